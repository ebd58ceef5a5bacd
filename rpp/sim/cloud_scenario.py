"""The `cloud:` section of a scenario file: the fake RunPod world to start from.

`rpp fake-runpod --scenario FILE` and the simulator both read it. Every mistake is
reported with its path in the file and what to write instead, never as a traceback:

    cloud:
      seed: 7                      # pod ids are reproducible from it
      bootTime: 90s                # create -> RUNNING (a duration, or seconds)
      provisioningTime: 20s        # of which PROVISIONING (default: a quarter)
      balance: 25.0                # omit for unlimited; 0 makes every create 402
      rateLimitPerMinute: 600      # omit: no quota, no RateLimit headers
      listingLag: 90s              # a created pod is listed (and GET finds it) 90 s late
      stock:
        - {datacenter: EU-RO-1, gpuType: NVIDIA GeForce RTX 4090, cloud: SECURE,
           count: 4, costPerHr: 0.69}
      templates:
        - {id: tpl-inference, image: ghcr.io/acme/infer:1.4, env: {MODE: fast}}
      existing:
        - {name: rpp-inference-x1, gpuType: NVIDIA GeForce RTX 4090,
           datacenter: EU-RO-1, image: ghcr.io/acme/infer:1.3, note: "..."}
      images:                      # how a container behaves on an image (a release)
        ghcr.io/acme/infer:1.5: {errorRatio: 0.3}          # 30% of requests answer 500
        ghcr.io/acme/infer:1.6: {latency: 0.75s}           # every request takes 0.75 s
        ghcr.io/acme/infer:1.7: {startFails: true}         # its service never answers
      faults: {rate: 0.2, kinds: [ServerError, RateLimited, Timeout], until: 3h}

Other top-level sections of the file belong to other readers and are ignored here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rpp.adapters.clock import Clock
from rpp.adapters.files import UnreadableFile, read_bytes
from rpp.model.documents import DocumentError, describe, parse_documents
from rpp.model.durations import DurationError, parse_duration
from rpp.sim.cloud import FakeCloud, ImageBehaviour, PodServerFactory
from rpp.sim.faults import FaultError, RandomFaults, random_faults_from_dict

_POD_ID = re.compile(r"^[a-z0-9]{6,32}$")
_STOCK_FIELDS = ("datacenter", "gpuType", "cloud", "count", "costPerHr")
_EXISTING_FIELDS = (
    "id",
    "name",
    "gpuType",
    "gpuCount",
    "datacenter",
    "cloud",
    "image",
    "env",
    "ports",
    "booted",
    "note",
)


class ScenarioError(ValueError):
    """A scenario that cannot be loaded; the message names the file and field."""


@dataclass(frozen=True)
class StockSpec:
    datacenter: str
    gpu_type: str
    cloud: str
    count: int
    cost_per_hr: float | None


@dataclass(frozen=True)
class ExistingPod:
    name: str
    gpu_type: str
    datacenter: str
    image: str
    cloud: str = "SECURE"
    gpu_count: int = 1
    pod_id: str | None = None
    ports: tuple[str, ...] = ("80/http",)
    booted: bool = True
    note: str | None = None
    env: Mapping[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class CloudScenario:
    boot_time: float = 60.0
    provisioning_time: float | None = None
    listing_lag: float = 0.0  # seconds from a create's 201 to its pod being listed
    seed: int = 0
    balance: float | None = None
    rate_limit_per_minute: int | None = None
    stock: tuple[StockSpec, ...] = ()
    templates: tuple[tuple[str, str, Mapping[str, str], tuple[str, ...]], ...] = ()
    existing: tuple[ExistingPod, ...] = ()
    images: Mapping[str, ImageBehaviour] = field(default_factory=dict)
    faults: RandomFaults | None = None  # every call may fail, at this rate (seeded)

    def start_faults(self, cloud: FakeCloud) -> None:
        """Deal the section's random faults from a generator seeded by the scenario."""
        if self.faults is not None:
            cloud.faults.at_random(self.faults, seed=self.seed, clock=cloud.clock)


class _Reader:
    """Reads one mapping, naming `path` in every error and refusing unknown keys."""

    def __init__(self, data: Any, path: str, known: tuple[str, ...]) -> None:
        if not isinstance(data, Mapping):
            raise ScenarioError(f"{path}: expected a mapping, got {type(data).__name__}")
        unknown = [k for k in data if k not in known]
        if unknown:
            raise ScenarioError(
                f"{path}.{unknown[0]}: unknown field; known fields: {', '.join(known)}"
            )
        self.data, self.path = data, path

    def text(self, key: str, default: str | None = None) -> str:
        value = self.data.get(key, default)
        if not isinstance(value, str) or not value.strip():
            raise ScenarioError(f"{self.path}.{key}: expected a non-empty string")
        return value

    def number(self, key: str, *, integer: bool = False, minimum: float = 0) -> Any:
        if key not in self.data:
            raise ScenarioError(f"{self.path}.{key}: is required")
        value = self.data[key]
        kinds = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds) or value < minimum:
            kind = "an integer" if integer else "a number"
            raise ScenarioError(
                f"{self.path}.{key}: expected {kind} >= {minimum:g}, got {value!r}"
            )
        return value

    def duration(self, key: str) -> float:
        value = self.data[key]
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return float(value)
        try:
            return parse_duration(value)
        except DurationError as error:
            raise ScenarioError(f"{self.path}.{key}: {error}") from None

    def items(self, key: str) -> list[Any]:
        value = self.data.get(key, [])
        if not isinstance(value, list):
            raise ScenarioError(f"{self.path}.{key}: expected a list")
        return value

    def string_map(self, key: str) -> dict[str, str]:
        value = self.data.get(key, {})
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise ScenarioError(f"{self.path}.{key}: expected a map of strings to strings")
        return dict(value)

    def strings(self, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = self.data.get(key, list(default))
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ScenarioError(f"{self.path}.{key}: expected a list of strings")
        return tuple(value)

    def cloud(self) -> str:
        value = self.text("cloud", "SECURE")
        if value not in ("SECURE", "COMMUNITY"):
            raise ScenarioError(f"{self.path}.cloud: expected SECURE or COMMUNITY, got {value!r}")
        return value


def parse_cloud_section(data: Any, *, path: str = "cloud") -> CloudScenario:
    """The `cloud:` mapping of a scenario -> CloudScenario, or ScenarioError."""
    known = ("seed", "bootTime", "provisioningTime", "balance", "rateLimitPerMinute", "listingLag")
    top = _Reader(data, path, (*known, "stock", "templates", "existing", "images", "faults"))
    stock = []
    for i, item in enumerate(top.items("stock")):
        r = _Reader(
            item, f"{path}.stock[{i}]", ("datacenter", "gpuType", "cloud", "count", "costPerHr")
        )
        stock.append(
            StockSpec(
                datacenter=r.text("datacenter"),
                gpu_type=r.text("gpuType"),
                cloud=r.cloud(),
                count=r.number("count", integer=True),
                cost_per_hr=float(r.number("costPerHr")) if "costPerHr" in item else None,
            )
        )
    templates = []
    for i, item in enumerate(top.items("templates")):
        r = _Reader(item, f"{path}.templates[{i}]", ("id", "image", "env", "ports"))
        templates.append(
            (r.text("id"), r.text("image"), r.string_map("env"), r.strings("ports", ("80/http",)))
        )
    existing: list[ExistingPod] = []
    for i, item in enumerate(top.items("existing")):
        where = f"{path}.existing[{i}]"
        r = _Reader(item, where, _EXISTING_FIELDS)
        pod_id = item.get("id")
        if pod_id is not None and (not isinstance(pod_id, str) or not _POD_ID.match(pod_id)):
            raise ScenarioError(f"{where}.id: a pod id is 6-32 lowercase letters and digits")
        if pod_id is not None and any(p.pod_id == pod_id for p in existing):
            raise ScenarioError(f"{where}.id: {pod_id} is used by an earlier existing pod")
        booted = item.get("booted", True)
        if not isinstance(booted, bool):
            raise ScenarioError(f"{where}.booted: expected true or false")
        existing.append(
            ExistingPod(
                name=r.text("name"),
                gpu_type=r.text("gpuType"),
                datacenter=r.text("datacenter"),
                image=r.text("image"),
                cloud=r.cloud(),
                gpu_count=r.number("gpuCount", integer=True, minimum=1)
                if "gpuCount" in item
                else 1,
                pod_id=pod_id,
                ports=r.strings("ports", ("80/http",)),
                booted=booted,
                note=r.text("note") if "note" in item else None,
                env=r.string_map("env"),
            )
        )
    faults = None
    if "faults" in data:
        section = data["faults"]
        if isinstance(section, Mapping) and "until" in section:  # a duration, as seconds
            until = _Reader(section, f"{path}.faults", tuple(section)).duration("until")
            section = {**section, "until": until}
        try:
            faults = random_faults_from_dict(section, where=f"{path}.faults")
        except FaultError as error:
            raise ScenarioError(str(error)) from None
    return CloudScenario(
        images=_images(data.get("images", {}), f"{path}.images"),
        faults=faults,
        boot_time=top.duration("bootTime") if "bootTime" in data else 60.0,
        listing_lag=top.duration("listingLag") if "listingLag" in data else 0.0,
        provisioning_time=top.duration("provisioningTime") if "provisioningTime" in data else None,
        seed=top.number("seed", integer=True) if "seed" in data else 0,
        balance=float(top.number("balance")) if "balance" in data else None,
        rate_limit_per_minute=(
            top.number("rateLimitPerMinute", integer=True, minimum=1)
            if "rateLimitPerMinute" in data
            else None
        ),
        stock=tuple(stock),
        templates=tuple(templates),
        existing=tuple(existing),
    )


def scenario_document(data: bytes | str, *, source: str) -> Any:
    """The one YAML document of a scenario file, read with the limits of every user file
    (rpp/model/documents.py: encoding, size, depth, aliases); ScenarioError otherwise."""
    try:
        documents = parse_documents(data)
    except DocumentError as error:
        raise ScenarioError(f"{source}: {error}") from None
    if len(documents) != 1:
        raise ScenarioError(
            f"{source}: holds {len(documents)} YAML documents; a scenario file is one mapping "
            "with pool:, cloud: and events:"
        )
    return documents[0]


def read_scenario_document(file: Path) -> Any:
    """`scenario_document` of a file on disk, never read past the size limit."""
    try:
        data = read_bytes(file)
    except UnreadableFile as error:
        raise ScenarioError(str(error)) from None
    return scenario_document(data, source=str(file))


def _images(data: Any, path: str) -> dict[str, ImageBehaviour]:
    """`images: {IMAGE: {errorRatio, latency, startFails}}`: each release's behaviour."""
    if not isinstance(data, Mapping):
        raise ScenarioError(
            f"{path}: expected a map of image to behaviour, e.g. "
            "{ghcr.io/acme/infer:1.5: {errorRatio: 0.3}}"
        )
    images = {}
    for image, item in data.items():
        if not isinstance(image, str) or not image.strip():
            raise ScenarioError(f"{path}: {image!r} is not an image name")
        r = _Reader(item, f"{path}[{image}]", ("errorRatio", "latency", "startFails"))
        ratio = float(r.number("errorRatio")) if "errorRatio" in item else 0.0
        if ratio > 1:
            raise ScenarioError(f"{r.path}.errorRatio: a share between 0 and 1, got {ratio:g}")
        fails = item.get("startFails", False)
        if not isinstance(fails, bool):
            raise ScenarioError(f"{r.path}.startFails: expected true or false")
        images[image] = ImageBehaviour(
            error_ratio=ratio,
            latency_s=r.duration("latency") if "latency" in item else None,
            start_fails=fails,
        )
    return images


def load_cloud_scenario(file: Path) -> CloudScenario:
    """Read a scenario file's `cloud:` section; errors name the file."""
    document = read_scenario_document(file)
    if not isinstance(document, Mapping):
        raise ScenarioError(
            f"{file}: is {describe(document)}; a scenario file is a mapping with a cloud: section"
        )
    if "cloud" not in document:
        raise ScenarioError(f"{file}: no top-level 'cloud:' section")
    try:
        return parse_cloud_section(document["cloud"])
    except ScenarioError as error:
        raise ScenarioError(f"{file}: {error}") from None


def build_cloud(
    scenario: CloudScenario, *, clock: Clock, pod_server_factory: PodServerFactory | None = None
) -> FakeCloud:
    """A FakeCloud in the scenario's starting state."""
    cloud = FakeCloud(
        clock=clock,
        boot_time=scenario.boot_time,
        provisioning_time=scenario.provisioning_time,
        seed=scenario.seed,
        pod_server_factory=pod_server_factory,
        rate_limit_per_minute=scenario.rate_limit_per_minute,
    )
    cloud.balance = scenario.balance
    cloud.listing_lag = scenario.listing_lag
    cloud.images = dict(scenario.images)
    for s in scenario.stock:
        cloud.set_stock(s.datacenter, s.gpu_type, s.cloud, s.count, s.cost_per_hr)
    for template_id, image, env, ports in scenario.templates:
        cloud.add_template(template_id, image=image, env=env, ports=ports)
    for p in scenario.existing:
        pod = cloud.add_pod(
            name=p.name,
            image=p.image,
            gpu_type=p.gpu_type,
            datacenter=p.datacenter,
            cloud=p.cloud,
            env=p.env,
            ports=p.ports,
            gpu_count=p.gpu_count,
            booted=p.booted,
            pod_id=p.pod_id,
        )
        if p.note:
            cloud.set_machine_note(pod.info.pod_id, p.note)
    scenario.start_faults(cloud)
    return cloud

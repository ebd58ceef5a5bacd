"""The controller process's configuration, read once from the environment by `rpp run`.

Where it sits: before observe -> decide -> act. `rpp run` calls `load_config(os.environ)`
and hands the values to the adapters it builds (RunPod client, prober, Prometheus
client, Kubernetes adapter) and to the loop. Nothing else reads the environment, but
`rpp delete-pools` and `rpp nginx-reloader` read the variables they share with it here
(`read_namespace`, `read_crd_group`, `parse_log_level`, `parse_log_format`).

Every bad value stops the process with one line that names the variable, says what is
wrong and what to set instead (`ConfigError`), never a traceback. Secrets never appear
in those lines nor in `Config`'s repr: RUNPOD_API_KEY (or what RUNPOD_API_KEY_FILE holds)
is not echoed, and credentials in PROMETHEUS_URL are cut from every message.

The RunPod key comes from exactly one of RUNPOD_API_KEY (read once) and
RUNPOD_API_KEY_FILE (a mounted Secret, checked here at start and read again at the start
of every loop by rpp/controller/runpod_key.py, so a rotated key needs no restart).

| variable | default | meaning |
|---|---|---|
| RUNPOD_API_KEY | one of two | the RunPod API key (an All key to act, Read Only to observe) |
| RUNPOD_API_KEY_FILE | one of two | a file holding that key (a mounted Secret), read every loop |
| NAMESPACE | the controller's own | where its RunPodPools live (and its Lease) |
| NAMESPACES | none | instead of NAMESPACE: a comma-separated list, or * for every namespace |
| CRD_GROUP | runpodpool.ownego.com | the RunPodPool API group |
| PROMETHEUS_URL | none | latency and error-rate rules and autoscaling read it |
| RECONCILE_INTERVAL | 30 | seconds between loops (or a duration: 45s, 2m) |
| LISTEN_ADDRESS | 0.0.0.0:8080 | /healthz, /metrics and /sd/<pool> |
| HEALTH_LISTEN_ADDRESS | none | /healthz alone on a second port, for the kubelet's probes |
| LOG_LEVEL | INFO | DEBUG, INFO, WARNING, ERROR |
| LOG_FORMAT | text | text (fields as key=value), or json (one object per line) |
| RUNPOD_API_URL | https://api.runpod.io | REST under /v2, GraphQL at /graphql |
| RUNPOD_PROXY_URL | each pod's proxy host | where probes and nginx slots send pod traffic |
| POD_NAME | the host name | this replica's name in the leader Lease |
| RUNPOD_MAX_ANSWER_MB | 16 | the largest RunPod answer read (MiB); bigger ones are refused |
| PROBE_CONCURRENCY | 2000 | most pods probed at once, over every pool |
| PROBE_HEALTH_MAX_KIB | 64 | most of a health answer read; a longer one fails the probe |
| PROBE_METRICS_MAX_KIB | 1024 | most of a metrics page read; a longer one fails the probe |
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import httpx

from rpp.adapters.kube.api import DEFAULT_CRD_GROUP
from rpp.controller.config_error import ConfigError as ConfigError
from rpp.controller.namespaces import WatchedNamespaces, check_namespace, read_watched
from rpp.model.durations import DurationError, parse_duration
from rpp.observe.prober import (
    DEFAULT_CONCURRENCY,
    DEFAULT_HEALTH_LIMIT,
    DEFAULT_METRICS_LIMIT,
    HEALTH_LIMIT_SETTING,
    METRICS_LIMIT_SETTING,
    proxy_url,
    url_pattern_from,
)

DEFAULT_API_URL = "https://api.runpod.io"
DEFAULT_LISTEN = "0.0.0.0:8080"
DEFAULT_INTERVAL_S = 30.0
MIN_INTERVAL_S = 1.0
MAX_INTERVAL_S = 3600.0
DEFAULT_MAX_ANSWER_MB = 16
MAX_ANSWER_MB = 1024
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
KEY_VARIABLE = "RUNPOD_API_KEY"
KEY_FILE_VARIABLE = "RUNPOD_API_KEY_FILE"
KEY_FILE_MAX_BYTES = 4096
"""A RunPod key is a few dozen characters; a file longer than this is the wrong file."""
LogFormat = Literal["text", "json"]

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")


@dataclass(frozen=True, kw_only=True)
class Config:
    """Everything `rpp run` reads from the environment, validated."""

    runpod_api_key: str = field(repr=False)
    """The key at start: RUNPOD_API_KEY's, or what RUNPOD_API_KEY_FILE held."""
    runpod_api_key_file: str | None = None
    """RUNPOD_API_KEY_FILE: the file the key is read from again every loop (None: the key
    came from RUNPOD_API_KEY and stays what it was at start)."""
    namespace: str | None
    """NAMESPACE (None: the credentials' namespace): the Lease's, and the one served
    unless NAMESPACES names others."""
    watched: WatchedNamespaces = field(default_factory=WatchedNamespaces)
    """NAMESPACE or NAMESPACES: whose RunPodPools are served (rpp/controller/namespaces.py)."""
    crd_group: str = DEFAULT_CRD_GROUP
    prometheus_url: str | None = field(default=None, repr=False)
    reconcile_interval: float = DEFAULT_INTERVAL_S
    listen_host: str = "0.0.0.0"
    listen_port: int = 8080
    health_listen: tuple[str, int] | None = None
    """HEALTH_LISTEN_ADDRESS: a second server answering /healthz only (None: no second one)."""
    log_level: str = "INFO"
    log_format: LogFormat = "text"
    runpod_api_url: str = DEFAULT_API_URL
    proxy_pattern: str = "https://{pod_id}-{port}.proxy.runpod.net"
    """RUNPOD_PROXY_URL as the prober's and the slots' URL pattern."""
    pod_name: str | None = None
    runpod_max_answer_mb: int = DEFAULT_MAX_ANSWER_MB
    probe_concurrency: int = DEFAULT_CONCURRENCY
    probe_health_limit: int = DEFAULT_HEALTH_LIMIT
    """Bytes."""
    probe_metrics_limit: int = DEFAULT_METRICS_LIMIT
    """Bytes."""

    @property
    def prometheus_display(self) -> str:
        """PROMETHEUS_URL without user:password, for the start-up log line."""
        return (
            "(none)" if self.prometheus_url is None else _without_credentials(self.prometheus_url)
        )


def _value(environ: Mapping[str, str], name: str) -> str | None:
    """A variable's value, stripped; None when unset or blank."""
    value = environ.get(name)
    return value.strip() if value is not None and value.strip() else None


def read_namespace(environ: Mapping[str, str]) -> str | None:
    """NAMESPACE, checked (`ConfigError` naming it); None: the credentials' namespace.
    `rpp delete-pools` and `rpp nginx-reloader` read it here too."""
    return _namespace(_value(environ, "NAMESPACE"))


def read_crd_group(environ: Mapping[str, str]) -> str:
    """CRD_GROUP, checked (`ConfigError` naming it), or the default group. `rpp
    delete-pools` reads it here too: a wrong group finds no pool and deletes nothing."""
    return _crd_group(_value(environ, "CRD_GROUP") or DEFAULT_CRD_GROUP)


def load_config(environ: Mapping[str, str]) -> Config:
    """Read and check every variable; the first bad one raises `ConfigError`."""

    def get(name: str) -> str | None:
        return _value(environ, name)

    host, port = parse_listen(get("LISTEN_ADDRESS") or DEFAULT_LISTEN)
    health = get("HEALTH_LISTEN_ADDRESS")
    health_listen = None if health is None else parse_listen(health, name="HEALTH_LISTEN_ADDRESS")
    if health_listen is not None and health_listen[1] == port:
        raise ConfigError(
            f"HEALTH_LISTEN_ADDRESS: port {port} is LISTEN_ADDRESS's too; choose another port, "
            "or unset it to answer /healthz on LISTEN_ADDRESS alone"
        )
    key_file = get(KEY_FILE_VARIABLE)
    return Config(
        runpod_api_key=_key_at_start(key=environ.get(KEY_VARIABLE), key_file=key_file),
        runpod_api_key_file=key_file,
        namespace=read_namespace(environ),
        watched=read_watched(environ),
        crd_group=read_crd_group(environ),
        prometheus_url=_prometheus(get("PROMETHEUS_URL")),
        reconcile_interval=_interval(get("RECONCILE_INTERVAL")),
        listen_host=host,
        listen_port=port,
        health_listen=health_listen,
        log_level=parse_log_level(get("LOG_LEVEL") or "INFO"),
        log_format=parse_log_format(get("LOG_FORMAT") or "text"),
        runpod_api_url=_api_url(get("RUNPOD_API_URL") or DEFAULT_API_URL),
        proxy_pattern=_proxy(get("RUNPOD_PROXY_URL")),
        pod_name=get("POD_NAME") or get("HOSTNAME"),
        runpod_max_answer_mb=_answer_limit(get("RUNPOD_MAX_ANSWER_MB")),
        probe_concurrency=_count(
            "PROBE_CONCURRENCY", get("PROBE_CONCURRENCY"), DEFAULT_CONCURRENCY, high=1_000_000
        ),
        probe_health_limit=_kib(
            HEALTH_LIMIT_SETTING, get(HEALTH_LIMIT_SETTING), DEFAULT_HEALTH_LIMIT
        ),
        probe_metrics_limit=_kib(
            METRICS_LIMIT_SETTING, get(METRICS_LIMIT_SETTING), DEFAULT_METRICS_LIMIT
        ),
    )


def _kib(name: str, value: str | None, default_bytes: int) -> int:
    """A size given in KiB (1 KiB to 1 GiB), as bytes."""
    return 1024 * _count(name, value, default_bytes // 1024, high=1024 * 1024)


def _count(name: str, value: str | None, default: int, *, high: int) -> int:
    """A whole number from 1 to `high`; the default when unset."""
    if value is None:
        return default
    if not value.isdigit() or not 1 <= int(value) <= high:
        raise ConfigError(
            f"{name}: {value!r} is not a whole number from 1 to {high}; "
            f"unset it for the default ({default})"
        )
    return int(value)


def _key_at_start(*, key: str | None, key_file: str | None) -> str:
    """The key from exactly one of RUNPOD_API_KEY and RUNPOD_API_KEY_FILE."""
    if key_file is not None:
        if key is not None and key.strip():
            raise ConfigError(
                f"{KEY_VARIABLE} and {KEY_FILE_VARIABLE}: both set; set only one: "
                f"{KEY_FILE_VARIABLE} (a mounted Secret, read again every loop, so a rotated "
                f"key needs no restart) or {KEY_VARIABLE}"
            )
        return read_api_key_file(key_file)
    return _api_key(key)


def _api_key(value: str | None) -> str:
    if value is None or not value.strip():
        raise ConfigError(
            f"{KEY_VARIABLE}: not set; put the key in the controller's Secret "
            "(kubectl create secret generic runpod-pool-controller "
            f"--from-literal={KEY_VARIABLE}=<key>), or mount that Secret as a file and set "
            f"{KEY_FILE_VARIABLE} to its path"
        )
    return check_api_key(value, where=KEY_VARIABLE)


def check_api_key(value: str, *, where: str) -> str:
    """The key alone (surrounding whitespace cut), or a `ConfigError` starting with
    `where` that says what is wrong with it, never what it is."""
    key = value.strip()
    if not key:
        raise ConfigError(f"{where}: empty; put the key there alone")
    if any(ch.isspace() for ch in key) or not key.isprintable():
        # Never echo the key: say only what is wrong with it.
        raise ConfigError(
            f"{where}: contains whitespace or control characters; paste the key alone"
        )
    return key


def read_api_key_file(path: str) -> str:
    """The key RUNPOD_API_KEY_FILE holds, checked as RUNPOD_API_KEY is; a `ConfigError`
    naming the variable and the path (never the file's content) when it cannot be used.

    The path is opened anew on every call: Kubernetes updates a mounted Secret by
    swapping the `..data` symlink, so an inode kept open would keep the old key."""
    where = f"{KEY_FILE_VARIABLE}={path}"
    try:
        with open(path, "rb") as file:
            raw = file.read(KEY_FILE_MAX_BYTES + 1)
    except OSError as err:
        why = err.strerror or type(err).__name__
        raise ConfigError(
            f"{where}: cannot be read ({why}); mount the controller's Secret there, or set "
            f"{KEY_VARIABLE} instead"
        ) from None
    if len(raw) > KEY_FILE_MAX_BYTES:
        raise ConfigError(
            f"{where}: longer than {KEY_FILE_MAX_BYTES:,} bytes, so not a RunPod key; point it "
            "at the file that holds the key alone"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text; put the key there alone") from None
    return check_api_key(text, where=where)


def _namespace(value: str | None) -> str | None:
    return None if value is None else check_namespace(value, where="NAMESPACE")


def _crd_group(value: str) -> str:
    if not _DNS_SUBDOMAIN.match(value):
        raise ConfigError(
            f"CRD_GROUP: {value!r} is not an API group (a DNS name such as "
            f"{DEFAULT_CRD_GROUP}); unset it for the default"
        )
    return value


def _prometheus(value: str | None) -> str | None:
    if value is None:
        return None
    shown = _without_credentials(value)
    try:
        url = httpx.URL(value)
    except (httpx.InvalidURL, TypeError, ValueError):
        raise ConfigError(
            f"PROMETHEUS_URL: {shown} is not a URL; set e.g. "
            "http://prometheus-operated.monitoring.svc:9090, or unset it"
        ) from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(
            f"PROMETHEUS_URL: {shown} is not an http(s) URL with a host; set e.g. "
            "http://prometheus-operated.monitoring.svc:9090, or unset it"
        )
    return value.rstrip("/")


def _interval(value: str | None) -> float:
    if value is None:
        return DEFAULT_INTERVAL_S
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parse_duration(value)
        except DurationError:
            raise ConfigError(
                f"RECONCILE_INTERVAL: {value!r} is not a number of seconds; set e.g. 30 or 45s"
            ) from None
    if not MIN_INTERVAL_S <= seconds <= MAX_INTERVAL_S:
        raise ConfigError(
            f"RECONCILE_INTERVAL: {value!r} is out of range; set {MIN_INTERVAL_S:g} to "
            f"{MAX_INTERVAL_S:g} seconds (default {DEFAULT_INTERVAL_S:g})"
        )
    return seconds


def _answer_limit(value: str | None) -> int:
    if value is None:
        return DEFAULT_MAX_ANSWER_MB
    if not value.isdigit() or not 1 <= int(value) <= MAX_ANSWER_MB:
        raise ConfigError(
            f"RUNPOD_MAX_ANSWER_MB: {value!r} is not a whole number of MiB from 1 to "
            f"{MAX_ANSWER_MB}; unset it for the default {DEFAULT_MAX_ANSWER_MB} (raise it only "
            "if RunPod's pod listing of this account is bigger)"
        )
    return int(value)


def parse_listen(value: str, *, name: str = "LISTEN_ADDRESS") -> tuple[str, int]:
    """host:port (IPv6 in brackets); a bad value is a ConfigError naming `name`."""
    host, sep, port_text = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # [::]:8080
    hint = "set host:port, e.g. 0.0.0.0:8080 or 127.0.0.1:9090"
    if not sep or not host:
        raise ConfigError(f"{name}: {value!r} has no host:port; {hint}")
    if not port_text.isdigit() or not 0 < int(port_text) <= 65535:
        raise ConfigError(f"{name}: port {port_text!r} is not 1-65535; {hint}")
    return host, int(port_text)


def parse_log_level(value: str) -> str:
    level = value.upper()
    if level == "WARN":
        level = "WARNING"
    if level not in LOG_LEVELS:
        raise ConfigError(f"LOG_LEVEL: {value!r} is not one of {', '.join(LOG_LEVELS)}")
    return level


def parse_log_format(value: str) -> LogFormat:
    lowered = value.lower()
    if lowered == "text":
        return "text"
    if lowered == "json":
        return "json"
    raise ConfigError(f"LOG_FORMAT: {value!r} is not text or json")


def _api_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ConfigError(
            f"RUNPOD_API_URL: {value!r} is not an http(s) URL; set e.g. "
            f"{DEFAULT_API_URL} (or the URL of `rpp fake-runpod`)"
        )
    base = value.rstrip("/")
    if base.endswith(("/v2", "/graphql")):
        raise ConfigError(
            f"RUNPOD_API_URL: {value!r} names an API path; give the base URL only "
            f"(e.g. {DEFAULT_API_URL}): REST is under /v2 and GraphQL at /graphql"
        )
    return base


def _proxy(value: str | None) -> str:
    try:
        pattern = url_pattern_from(value)
        proxy_url(pattern, pod_id="x", port=80)  # placeholders other than {pod_id}/{port}
        return pattern
    except ValueError:
        raise ConfigError(
            f"RUNPOD_PROXY_URL: {value!r} is not an http(s) URL or URL pattern; set e.g. "
            "http://127.0.0.1:9000 (the URL of `rpp fake-runpod`), or unset it to use "
            "RunPod's proxy"
        ) from None


def _without_credentials(url: str) -> str:
    try:
        return str(httpx.URL(url).copy_with(username=None, password=None))
    except (httpx.InvalidURL, TypeError, ValueError):
        return "(an invalid URL)"

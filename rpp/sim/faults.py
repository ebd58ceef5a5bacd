"""Fault injection for the fake RunPod API: a scriptable queue per operation.

Karpenter's fake cloud provider has `NextCreateErr`; this is the same idea for every
RunPod operation. A test (or a simulator scenario, or `POST /_fake/faults` on a running
`rpp fake-runpod`) queues what the next call of an operation should suffer:

    cloud.faults.next("createPod", ServerError(500))
    cloud.faults.next("listPods", RateLimited(retry_after=2), times=3)
    cloud.faults.always("hostNotices", Timeout())        # until cleared
    cloud.faults.next("createPod", CreatedButFailed())   # the pod IS made, then 500
    cloud.faults.next("listPods", OddFields(set={"gpu.count": "two"}))
    cloud.faults.next("updatePod", EchoingRefusal())     # RunPod quotes the env back
    cloud.faults.next("createPod", ListingLag(seconds=90))  # 201, listed 90 s later

Hostile answers (issue 15) are faults too: `RawAnswer` sends any bytes (a body that is
not JSON, `{"errors": 5}`, a 50 MB listing, a 100,000-deep nesting, a 5 MB detail),
`OddFields` changes fields of the pods in an otherwise normal answer (`gpu.count`
null, an unknown `status`, a maintenance time of "inf"), `ExtraPods` lists raw pod
objects nobody created (a foreign pod with odd fields), and `EchoingRefusal` refuses
quoting the request back, env included. rpp/sim/odd_answers.py renders them.

Operations are RunPod's (rpp/model/runpod_operations.py: the OpenAPI operationIds, and
`hostNotices` for the GraphQL query); `"*"` matches any operation. Queued faults are
used before `always` ones, and an operation-specific fault before a `"*"` one. Stock
changes over time are not faults: they live on the cloud (`set_stock`, `schedule_stock`).

A scenario file scripts the same queue: `do: fault` (operation, kind, times) queues
faults at a time, and `cloud.faults: {rate, kinds}` makes every call suffer a fault
at that rate, drawn from a generator seeded by the scenario, so a run replays
exactly (`FaultQueue.at_random`). `struck` counts every fault dealt, by kind; `listeners`
hear each one with its operation (the invariant checker learns when a listing failed).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rpp.model.runpod_operations import RunPodOperation

OPERATIONS = tuple(RunPodOperation)
ANY = "*"
RUNPOD_API_OPERATIONS = tuple(op for op in OPERATIONS if op is not RunPodOperation.POD_ACTION)
"""What random faults strike by default: every call the controller makes."""

# RunPod's wording for a create it cannot place (from RunPod's own answers).
NO_CAPACITY_DETAIL = (
    "There are no longer any instances available with the requested specifications. "
    "Please refresh and try again."
)


@dataclass(frozen=True)
class Fault:
    """What one faulted call does instead of (or besides) its normal answer."""

    kind: ClassVar[str] = "Fault"

    @property
    def takes_effect(self) -> bool:
        """True when the operation is carried out before the fault (a create makes its pod)."""
        return False

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **dataclasses.asdict(self)}


@dataclass(frozen=True)
class ServerError(Fault):
    """Answer a 5xx problem without acting."""

    kind: ClassVar[str] = "ServerError"
    status: int = 500
    detail: str = "Internal server error"


@dataclass(frozen=True)
class CreatedButFailed(Fault):
    """Carry the operation out (a create makes a pod that bills), then answer 5xx.

    RunPod's known fault: the client must not retry, and must find the pod by name.
    """

    kind: ClassVar[str] = "CreatedButFailed"
    status: int = 500
    detail: str = "Internal server error"

    @property
    def takes_effect(self) -> bool:
        return True


@dataclass(frozen=True)
class RateLimited(Fault):
    """Answer 429 with Retry-After (and an exhausted RateLimit window)."""

    kind: ClassVar[str] = "RateLimited"
    retry_after: int = 1
    detail: str = "Rate limit exceeded for the minute window."


@dataclass(frozen=True)
class Timeout(Fault):
    """Hold the request longer than the client waits; no answer while it is connected.

    `seconds` None holds until the client gives up. With `applied` the operation takes
    effect first (a create that made its pod but never answered).
    """

    kind: ClassVar[str] = "Timeout"
    seconds: float | None = None
    applied: bool = False

    @property
    def takes_effect(self) -> bool:
        return self.applied


@dataclass(frozen=True)
class Slow(Fault):
    """Wait `seconds` (event-loop time), then answer normally."""

    kind: ClassVar[str] = "Slow"
    seconds: float = 1.0


@dataclass(frozen=True)
class MalformedJson(Fault):
    """Answer `status` with a truncated JSON body, without acting."""

    kind: ClassVar[str] = "MalformedJson"
    status: int = 200


@dataclass(frozen=True)
class Refuse(Fault):
    """Answer any RunPod problem (400, 401, 402, 403, 404, 409, 422...) without acting."""

    kind: ClassVar[str] = "Refuse"
    status: int = 400
    detail: str = "The request was refused."
    title: str | None = None


# A scripted raw answer is streamed, but a typo must not make the fake send terabytes.
RAW_ANSWER_LIMIT = 1 << 30


@dataclass(frozen=True)
class RawAnswer(Fault):
    """Answer exactly these bytes, without acting: `prefix + separator.join([body] *
    repeat) + suffix`, streamed.

    A few fields script any hostile answer: a body of `{"errors": 5}`; a listing of
    50 MB (`prefix` `{"pods": [`, one pod object as `body`, `separator` `,`, `repeat`
    30000, `suffix` `]}`); a nesting 100,000 deep (`body` `[`, `repeat` 100000); a
    problem whose detail is 5 MB. With `length` false the answer is sent chunked,
    without a Content-Length, so the client has to stop reading by itself.
    """

    kind: ClassVar[str] = "RawAnswer"
    status: int = 200
    body: str = ""
    repeat: int = 1
    separator: str = ""
    prefix: str = ""
    suffix: str = ""
    content_type: str = "application/json"
    length: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.length, bool):
            raise FaultError("RawAnswer.length must be true or false")
        for name in ("body", "separator", "prefix", "suffix", "content_type"):
            if not isinstance(getattr(self, name), str):
                raise FaultError(f"RawAnswer.{name} must be a string")
        for name in ("status", "repeat"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise FaultError(f"RawAnswer.{name} must be a whole number")
        if not 100 <= self.status <= 599:
            raise FaultError(f"RawAnswer.status {self.status} is not an HTTP status")
        if self.repeat < 0:
            raise FaultError("RawAnswer.repeat must not be negative")
        if self.size > RAW_ANSWER_LIMIT:
            raise FaultError(f"RawAnswer would send {self.size} bytes; keep it to 1 GiB")

    @property
    def size(self) -> int:
        """The length of the answer, in characters (bytes for ASCII)."""
        joins = len(self.separator) * max(self.repeat - 1, 0)
        return len(self.prefix) + len(self.body) * self.repeat + joins + len(self.suffix)


@dataclass(frozen=True)
class OddFields(Fault):
    """Carry the operation out, then answer with fields of its pods changed.

    `set` maps a dotted path inside one pod object (`gpu.count`, `status`, and for the
    GraphQL notice query `machine.maintenanceStart`) to the value sent instead; `unset`
    lists paths to leave out; `pods` limits the change to these pod ids (default:
    every pod in the answer). What RunPod sends when its answer drifts from its
    contract, for one pod or for all.
    """

    kind: ClassVar[str] = "OddFields"
    set: Mapping[str, Any] = field(default_factory=dict)
    unset: tuple[str, ...] = ()
    pods: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.set, Mapping) or not all(isinstance(k, str) for k in self.set):
            raise FaultError("OddFields.set must map dotted paths to values")
        for name in ("unset", "pods"):
            value = getattr(self, name)
            if value is None and name == "pods":
                continue
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise FaultError(f"OddFields.{name} must be a list of strings")
            object.__setattr__(self, name, tuple(value))

    @property
    def takes_effect(self) -> bool:
        return True


@dataclass(frozen=True)
class ExtraPods(Fault):
    """List these raw pod objects too (listPods, and the notice query's pods): pods
    the account has that no pool made, with whatever fields they carry."""

    kind: ClassVar[str] = "ExtraPods"
    pods: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.pods, list | tuple):
            raise FaultError("ExtraPods.pods must be a list of pod objects")
        object.__setattr__(self, "pods", tuple(self.pods))

    @property
    def takes_effect(self) -> bool:
        return True


@dataclass(frozen=True)
class EchoingRefusal(Fault):
    """Refuse without acting, quoting the request body back in the detail, as
    validation errors do: whatever the controller sent (env, secrets and all) comes
    back in an error text the controller must not repeat."""

    kind: ClassVar[str] = "EchoingRefusal"
    status: int = 400
    title: str = "Bad Request"


@dataclass(frozen=True)
class ListingLag(Fault):
    """A create answers 201 as usual, but its pod shows in RunPod's list and GET only
    `seconds` later (the cloud's listingLag, for one create). On any other operation it
    changes nothing."""

    kind: ClassVar[str] = "ListingLag"
    seconds: float = 90.0

    def __post_init__(self) -> None:
        seconds = self.seconds
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise FaultError(f"ListingLag.seconds: expected a number of seconds, got {seconds!r}")
        if not 0 <= seconds <= 86400:
            raise FaultError(
                f"ListingLag.seconds: {seconds!r} is not between 0 and 86400 (one day)"
            )

    @property
    def takes_effect(self) -> bool:
        return True


def NoCapacity() -> Refuse:
    """RunPod's 400 for a create it cannot place, with RunPod's wording."""
    return Refuse(status=400, detail=NO_CAPACITY_DETAIL, title="Bad Request")


_KINDS: dict[str, type[Fault]] = {
    cls.kind: cls
    for cls in (
        ServerError,
        CreatedButFailed,
        RateLimited,
        Timeout,
        Slow,
        MalformedJson,
        Refuse,
        RawAnswer,
        OddFields,
        ExtraPods,
        EchoingRefusal,
        ListingLag,
    )
}


class FaultError(ValueError):
    """A fault description that cannot be used; the message names the field."""


def fault_from_dict(data: Mapping[str, Any], *, where: str = "fault") -> Fault:
    """`{"kind": "ServerError", "status": 503}` -> ServerError(503) (control API, scenarios)."""
    if not isinstance(data, Mapping):
        raise FaultError(f"{where}: expected a mapping with a 'kind'")
    kind = data.get("kind")
    if kind == "NoCapacity":
        return NoCapacity()
    cls = _KINDS.get(str(kind))
    if cls is None:
        known = ", ".join([*_KINDS, "NoCapacity"])
        raise FaultError(f"{where}.kind: unknown fault {kind!r}; use one of {known}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    args = {k: v for k, v in data.items() if k != "kind"}
    for key in args:
        if key not in fields:
            raise FaultError(
                f"{where}.{key}: {kind} has no such field; fields: {', '.join(fields) or 'none'}"
            )
    try:
        return cls(**args)
    except TypeError as exc:
        raise FaultError(f"{where}: {exc}") from None


DEFAULT_RANDOM_KINDS: tuple[Fault, ...] = (
    ServerError(status=500),
    ServerError(status=503, detail="Service Unavailable"),
    RateLimited(retry_after=2),
    Timeout(),
    MalformedJson(),
    CreatedButFailed(),
)
"""`cloud.faults` without `kinds`: 5xx, 429, timeouts, malformed answers, created-but-500."""


@dataclass(frozen=True)
class RandomFaults:
    """Every call of `operations` suffers one of `kinds` with probability `rate`."""

    rate: float
    kinds: tuple[Fault, ...] = DEFAULT_RANDOM_KINDS
    operations: tuple[str, ...] = RUNPOD_API_OPERATIONS
    until: float | None = None  # seconds after they start; None: for good

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise FaultError(f"rate: expected a share between 0 and 1, got {self.rate!r}")
        if not self.kinds:
            raise FaultError("kinds: list at least one fault kind")
        for operation in self.operations:
            check_operation(operation)


def check_operation(operation: str) -> str:
    if operation != ANY and operation not in OPERATIONS:
        raise FaultError(
            f"unknown operation {operation!r}; use one of {', '.join(OPERATIONS)} or '*'"
        )
    return operation


class FaultQueue:
    """Faults waiting for the next calls of each operation."""

    def __init__(self) -> None:
        self._queued: dict[str, deque[Fault]] = {}
        self._always: dict[str, Fault] = {}
        self._random: RandomFaults | None = None
        self._rng = random.Random(0)
        self._clock: Any = None
        self._random_until: dt.datetime | None = None
        self.struck: Counter[str] = Counter()  # faults dealt, by kind
        self.listeners: list[Callable[[str, Fault], None]] = []  # each fault dealt

    def at_random(
        self, faults: RandomFaults | None, *, seed: str | int = 0, clock: Any = None
    ) -> None:
        """From now on, calls suffer random faults as `faults` says (None: stop).

        The generator is seeded here and drawn once per call of a listed operation,
        so the same scenario and seed strike the same calls. `faults.until` needs the
        `clock` they run on (anything with `now()`): they stop that long after now."""
        self._random = faults
        self._rng = random.Random(f"faults:{seed}")
        self._clock = clock
        self._random_until = None
        if faults is not None and faults.until is not None and clock is not None:
            self._random_until = clock.now() + dt.timedelta(seconds=faults.until)

    def next(self, operation: str, fault: Fault, *, times: int = 1) -> None:
        """The next `times` calls of `operation` suffer `fault`."""
        if times < 1:
            raise FaultError(f"times must be at least 1, got {times}")
        queue = self._queued.setdefault(check_operation(operation), deque())
        queue.extend([fault] * times)

    def always(self, operation: str, fault: Fault) -> None:
        """Every call of `operation` suffers `fault` until `clear`."""
        self._always[check_operation(operation)] = fault

    def clear(self, operation: str | None = None) -> None:
        if operation is None:
            self._queued.clear()
            self._always.clear()
            return
        self._queued.pop(check_operation(operation), None)
        self._always.pop(operation, None)

    def pending(self, operation: str) -> int:
        return len(self._queued.get(operation, ()))

    def take(self, operation: str) -> Fault | None:
        """The fault for this call of `operation`, if any (consumes a queued one)."""
        fault = self._scripted(operation) or self._drawn(operation)
        if fault is not None:
            self.struck[fault.kind] += 1
            for listener in self.listeners:
                listener(operation, fault)
        return fault

    def _scripted(self, operation: str) -> Fault | None:
        for key in (operation, ANY):
            queue = self._queued.get(key)
            if queue:
                return queue.popleft()
        return self._always.get(operation) or self._always.get(ANY)

    def _drawn(self, operation: str) -> Fault | None:
        plan = self._random
        if plan is None or operation not in plan.operations:
            return None
        if self._random_until is not None and self._clock.now() >= self._random_until:
            return None
        if self._rng.random() >= plan.rate:
            return None
        return plan.kinds[self._rng.randrange(len(plan.kinds))]


def random_faults_from_dict(data: Any, *, where: str = "faults") -> RandomFaults:
    """`{rate: 0.2, kinds: [ServerError, {kind: Timeout, applied: true}], operations: [...]}`."""
    if not isinstance(data, Mapping):
        raise FaultError(
            f"{where}: expected a mapping such as {{rate: 0.2, kinds: [ServerError]}}"
        )
    for key in data:
        if key not in ("rate", "kinds", "operations", "until"):
            raise FaultError(
                f"{where}.{key}: unknown field; known fields: rate, kinds, operations, until"
            )
    rate = data.get("rate")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
        raise FaultError(f"{where}.rate: expected a share between 0 and 1, got {rate!r}")
    kinds: Sequence[Any] = data.get("kinds", [])
    if not isinstance(kinds, list):
        raise FaultError(f"{where}.kinds: expected a list of fault kinds")
    faults = tuple(
        fault_from_dict({"kind": k} if isinstance(k, str) else k, where=f"{where}.kinds[{i}]")
        for i, k in enumerate(kinds)
    )
    operations = data.get("operations", list(RUNPOD_API_OPERATIONS))
    if not isinstance(operations, list) or not all(isinstance(o, str) for o in operations):
        raise FaultError(f"{where}.operations: expected a list of operation names")
    for i, operation in enumerate(operations):
        try:
            check_operation(operation)
        except FaultError as error:
            raise FaultError(f"{where}.operations[{i}]: {error}") from None
    until = data.get("until")
    if until is not None and (
        isinstance(until, bool) or not isinstance(until, int | float) or until < 0
    ):
        raise FaultError(f"{where}.until: seconds after the start, a number >= 0")
    return RandomFaults(
        rate=float(rate),
        kinds=faults or DEFAULT_RANDOM_KINDS,
        operations=tuple(operations),
        until=None if until is None else float(until),
    )

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

Hostile answers (issue 15) are faults too: `RawAnswer` sends any bytes (a body that is
not JSON, `{"errors": 5}`, a 50 MB listing, a 100,000-deep nesting, a 5 MB detail),
`OddFields` changes fields of the pods in an otherwise normal answer (`gpu.count`
null, an unknown `status`, a maintenance time of "inf"), `ExtraPods` lists raw pod
objects nobody created (a foreign pod with odd fields), and `EchoingRefusal` refuses
quoting the request back, env included. rpp/sim/odd_answers.py renders them.

Operations are the OpenAPI operationIds (plus `hostNotices` for the GraphQL query);
`"*"` matches any operation. Queued faults are used before `always` ones, and an
operation-specific fault before a `"*"` one. Stock changes over time are not faults:
they live on the cloud (`set_stock`, `schedule_stock`).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

OPERATIONS = (
    "listPods",
    "getPod",
    "createPod",
    "updatePod",
    "deletePod",
    "podAction",
    "listGpuTypes",
    "listDataCenters",
    "hostNotices",
)
ANY = "*"

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
        for key in (operation, ANY):
            queue = self._queued.get(key)
            if queue:
                return queue.popleft()
        return self._always.get(operation) or self._always.get(ANY)

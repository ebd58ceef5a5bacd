"""Hostile answers of the fake RunPod: raw bytes, pods with odd fields, extra pods, echoes.

Where it sits: beside rpp/sim/cloud_api.py, which takes the scripted fault of each call
(rpp/sim/faults.py) and hands these four kinds here to shape the answer. They exist so
tests and rehearsals can feed the real client what a drifting, broken or hostile RunPod
could send (issue 15): a body that is not JSON or far too big, a pod whose `gpu.count`
is "two", a foreign pod nobody made, a refusal that quotes the env it was sent.

A raw answer is streamed in chunks of about a megabyte, with its length announced first,
so the fake can send a 50 MB listing without holding it, and the client under test sees
what a real server would send.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from rpp.model.runpod_operations import RunPodOperation
from rpp.sim import asgi_io as io
from rpp.sim.faults import ExtraPods, OddFields, RawAnswer

CHUNK = 1 << 20


def raw_chunks(fault: RawAnswer) -> Iterator[bytes]:
    """The answer's bytes in chunks of about CHUNK: prefix, the repeated body, suffix."""
    body, separator = fault.body.encode(), fault.separator.encode()
    yield fault.prefix.encode()
    per_chunk = max(1, CHUNK // max(1, len(body) + len(separator)))
    done = 0
    while done < fault.repeat:
        count = min(per_chunk, fault.repeat - done)
        part = separator.join([body] * count)
        yield (separator + part) if done else part
        done += count
    yield fault.suffix.encode()


def raw_length(fault: RawAnswer) -> int:
    joins = len(fault.separator.encode()) * max(fault.repeat - 1, 0)
    return (
        len(fault.prefix.encode())
        + len(fault.body.encode()) * fault.repeat
        + joins
        + len(fault.suffix.encode())
    )


async def send_raw(send: io.Send, fault: RawAnswer, headers: Iterable[tuple[str, str]]) -> None:
    """Stream the raw answer, its Content-Length first (unless the fault hides it)."""
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    raw.append((b"content-type", fault.content_type.encode("latin-1")))
    if fault.length:
        raw.append((b"content-length", str(raw_length(fault)).encode()))
    await send({"type": "http.response.start", "status": fault.status, "headers": raw})
    for chunk in raw_chunks(fault):
        if chunk:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def echo_detail(request: io.Request) -> str:
    """A validation detail that quotes the request back, as some APIs do."""
    return "Invalid input: " + request.body.decode("utf-8", "replace")


def _pods_in(operation: RunPodOperation, payload: Any) -> list[Any]:
    """The pod objects of one answer (a listing, one pod, or the notice query's pods)."""
    if operation is RunPodOperation.LIST_PODS and isinstance(payload, dict):
        pods = payload.get("pods")
        return pods if isinstance(pods, list) else []
    if operation is RunPodOperation.HOST_NOTICES and isinstance(payload, dict):
        data = payload.get("data") or {}
        pods = (data.get("myself") or {}).get("pods")
        return pods if isinstance(pods, list) else []
    return [payload] if isinstance(payload, dict) else []


def _set(target: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        child = target.get(key)
        if not isinstance(child, dict):
            child = target[key] = {}
        target = child
    target[last] = value


def _unset(target: dict[str, Any], path: str) -> None:
    *parents, last = path.split(".")
    for key in parents:
        child = target.get(key)
        if not isinstance(child, dict):
            return
        target = child
    target.pop(last, None)


def reshape(operation: RunPodOperation, payload: Any, fault: OddFields | ExtraPods) -> Any:
    """The normal answer of `operation`, changed the way the fault says."""
    if isinstance(fault, ExtraPods):
        _pods_in(operation, payload).extend(fault.pods)
        return payload
    for pod in _pods_in(operation, payload):
        if not isinstance(pod, dict):
            continue
        if fault.pods is not None and pod.get("id") not in fault.pods:
            continue
        for path, value in fault.set.items():
            _set(pod, path, value)
        for path in fault.unset:
            _unset(pod, path)
    return payload

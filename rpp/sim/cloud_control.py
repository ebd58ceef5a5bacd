"""Control endpoints of a running fake cloud (`/_fake/...`): script it over HTTP.

In-process, tests and the simulator hold the `FakeCloud` and call it directly. A fake
served by `rpp fake-runpod` lives in another process, so end-to-end tests (and users
rehearsing a pool) change its world through these endpoints instead. They are not
part of RunPod's API, need no key, and the fake only listens on 127.0.0.1 by default.

    POST   /_fake/faults                 {"operation", "fault": {"kind", ...}, "times"?, "always"?}
                                         (kinds: rpp/sim/faults.py, hostile answers included)
    DELETE /_fake/faults[?operation=...]
    POST   /_fake/stock                  {"datacenter", "gpuType", "cloud"?, "count", "costPerHr"?}
    POST   /_fake/balance                {"balance": number or null}
    POST   /_fake/auth                   {"acceptedKey": the only key accepted, or null: any}
                                         or {"acceptedKeys": [the keys accepted]} (a rotation)
    POST   /_fake/pods/{id}/note         {"note": text or null}
    POST   /_fake/pods/{id}/maintenance  {"start", "end"?, "note"?}
    POST   /_fake/pods/{id}/crash        {"status": "ERROR" or "EXITED"}
    POST   /_fake/pods/{id}/service      {"mode": "healthy", "dies", "hangs" or "fails",
                                         "after": seconds (fails: each request fails so far in)}
    DELETE /_fake/pods/{id}              (terminated outside the API)
    GET    /_fake/calls                  {"calls": [[operation, method, path], ...]}
    DELETE /_fake/calls
    GET    /_fake/work                   {"work": [every request the pods' apps started]}
    DELETE /_fake/work

The service modes are the fake inference pod's failure knobs (rpp/sim/inference.py):
`dies` (RunPod's proxy answers 502 at once, while RunPod still lists the pod running),
`hangs` (no answer until the CDN limit: 524), `fails` (each request, a probe too, fails
`after` seconds into it: 502, or a cut stream). The work log (rpp/sim/inference_work.py)
is what a serving harness joins with what its clients saw.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rpp.model.observations import PodStatus
from rpp.sim import asgi_io as io
from rpp.sim.cloud import CloudError, FakeCloud
from rpp.sim.faults import FaultError, fault_from_dict
from rpp.sim.inference import FakeInferencePod
from rpp.sim.inference_work import ServiceMode, WorkLog

_POD = re.compile(r"^/_fake/pods/(?P<id>[^/]+)(?:/(?P<what>note|maintenance|crash|service))?$")


class ControlError(ValueError):
    """A control request that cannot be carried out; answered 400 with the reason."""


def _body(request: io.Request) -> Mapping[str, Any]:
    try:
        data = json.loads(request.body or b"{}")
    except ValueError:
        raise ControlError("body is not JSON") from None
    if not isinstance(data, dict):
        raise ControlError("body must be a JSON object")
    return data


def _field(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in body:
        raise ControlError(f"{name} is required")
    value = body[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ControlError(f"{name} has the wrong type ({type(value).__name__})")
    return value


def _faults(cloud: FakeCloud, request: io.Request) -> Any:
    if request.method == "DELETE":
        only = request.query.get("operation")
        operation = only[0] if only else None
        cloud.faults.clear(operation)
        return {"cleared": operation or "all"}
    body = _body(request)
    operation = _field(body, "operation", str)
    fault = fault_from_dict(_field(body, "fault", dict), where="fault")
    if body.get("always"):
        cloud.faults.always(operation, fault)
    else:
        cloud.faults.next(operation, fault, times=int(body.get("times", 1)))
    return {"queued": fault.to_dict(), "operation": operation}


def _stock(cloud: FakeCloud, request: io.Request) -> Any:
    body = _body(request)
    price = body.get("costPerHr")
    if price is not None and (isinstance(price, bool) or not isinstance(price, int | float)):
        raise ControlError("costPerHr must be a number")
    count = _field(body, "count", int)
    if count < 0:
        raise ControlError("count must not be negative")
    cloud.set_stock(
        _field(body, "datacenter", str),
        _field(body, "gpuType", str),
        str(body.get("cloud", "SECURE")),
        count,
        None if price is None else float(price),
    )
    return {"ok": True}


def _balance(cloud: FakeCloud, request: io.Request) -> Any:
    value = _body(request).get("balance")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ControlError("balance must be a number or null")
    cloud.balance = None if value is None else float(value)
    return {"balance": cloud.balance}


def _auth(cloud: FakeCloud, request: io.Request) -> Any:
    body = _body(request)
    if "acceptedKeys" in body:
        keys = body["acceptedKeys"]
        if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
            raise ControlError("acceptedKeys must be a list of non-empty strings")
        cloud.accepted_keys = frozenset(keys)
        return {"ok": True}  # never echo a key back
    value = body.get("acceptedKey")
    if value is not None and (not isinstance(value, str) or not value):
        raise ControlError("acceptedKey must be a non-empty string or null")
    cloud.accepted_keys = None if value is None else frozenset({value})
    return {"ok": True}


def _pod(cloud: FakeCloud, request: io.Request, pod_id: str, what: str | None) -> Any:
    if what is None:
        if request.method != "DELETE":
            raise ControlError("use DELETE to remove a pod")
        cloud.remove_pod(pod_id)
        return {"removed": pod_id}
    body = _body(request)
    if what == "service":
        return _service(cloud, pod_id, body)
    if what == "note":
        cloud.set_machine_note(pod_id, body.get("note"))
    elif what == "maintenance":
        cloud.set_maintenance(
            pod_id, start=body.get("start"), end=body.get("end"), note=body.get("note")
        )
    else:
        status = str(body.get("status", "ERROR"))
        if status not in ("ERROR", "EXITED"):
            raise ControlError("status must be ERROR or EXITED")
        cloud.crash_pod(pod_id, status=PodStatus(status))
    return {"ok": True}


def _service(cloud: FakeCloud, pod_id: str, body: Mapping[str, Any]) -> Any:
    server = cloud.get(pod_id).server
    if not isinstance(server, FakeInferencePod):
        raise ControlError(f"pod {pod_id} runs no fake inference service")
    mode = _field(body, "mode", str)
    if mode == ServiceMode.HEALTHY.value:
        server.recover()
    elif mode == ServiceMode.DIES.value:
        server.die()
    elif mode == ServiceMode.HANGS.value:
        server.hang()
    elif mode == ServiceMode.FAILS.value:
        after = _field(body, "after", (int, float))
        if after < 0:
            raise ControlError("after must be 0 or more seconds")
        server.fail_after(float(after))
    else:
        modes = ", ".join(m.value for m in ServiceMode)
        raise ControlError(f"mode must be one of {modes}, got {mode!r}")
    return {"pod": pod_id, "mode": mode}


async def handle_control(
    cloud: FakeCloud, request: io.Request, send: io.Send, *, work_log: WorkLog | None = None
) -> None:
    path = request.path.rstrip("/")
    try:
        if path == "/_fake/faults" and request.method in ("POST", "DELETE"):
            answer = _faults(cloud, request)
        elif path == "/_fake/stock" and request.method == "POST":
            answer = _stock(cloud, request)
        elif path == "/_fake/balance" and request.method == "POST":
            answer = _balance(cloud, request)
        elif path == "/_fake/auth" and request.method == "POST":
            answer = _auth(cloud, request)
        elif path == "/_fake/calls" and request.method == "GET":
            answer = {"calls": [list(call) for call in cloud.calls]}
        elif path == "/_fake/calls" and request.method == "DELETE":
            cloud.calls.clear()
            answer = {"ok": True}
        elif path == "/_fake/work" and work_log is not None and request.method == "GET":
            answer = {"work": work_log.as_json()}
        elif path == "/_fake/work" and work_log is not None and request.method == "DELETE":
            work_log.clear()
            answer = {"ok": True}
        elif (match := _POD.match(path)) is not None:
            answer = _pod(cloud, request, match["id"], match["what"])
        else:
            await io.send_json(
                send, 404, {"error": f"no control endpoint {request.method} {path}"}
            )
            return
    except (ControlError, FaultError, ValueError) as error:
        await io.send_json(send, 400, {"error": str(error)})
        return
    except CloudError as error:
        await io.send_json(send, error.status, {"error": error.detail})
        return
    await io.send_json(send, 200, answer)

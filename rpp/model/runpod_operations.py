"""The operations of RunPod's REST v2 this controller calls, by their OpenAPI operationId.

Why it exists: a RunPod call is named in many places: the client labels its calls,
errors and `runpod_pool_runpod_api_calls_total` with it, the simulator's fake cloud
routes requests and deals faults by it, scenario files script faults with it
(`operation: createPod`), and the invariant checker watches calls by it. One enum
keeps those names the same everywhere: a misspelt member is a mypy error, and
tests/model/test_runpod_operations.py checks every REST member against RunPod's own OpenAPI
document (vendor/runpod/openapi-v2.json), so a name RunPod does not publish cannot be
here. It is a StrEnum: each member is its operationId string, so logs, metric labels,
JSON and scenario files read exactly as the bare names did.

Two members are not plain REST calls of the controller: `hostNotices` is the GraphQL
query for host maintenance notices (not in the REST document; its name is ours), and
`podAction` (stop, start, reset, restart a pod) is served by the fake cloud but never
called by the client. `listPodBilling` (what RunPod billed each pod, per hour) is read
at most once per 10 minutes per key (rpp/observe/billing.py), not every loop.

Where it sits: model, below everything; adapters (the client), act, decide and the
simulator import it.
"""

from __future__ import annotations

from enum import StrEnum


class RunPodOperation(StrEnum):
    """One RunPod call; the member is its operationId (in the fake's fault order)."""

    LIST_PODS = "listPods"
    GET_POD = "getPod"
    CREATE_POD = "createPod"
    UPDATE_POD = "updatePod"
    DELETE_POD = "deletePod"
    POD_ACTION = "podAction"
    LIST_GPU_TYPES = "listGpuTypes"
    LIST_DATA_CENTERS = "listDataCenters"
    HOST_NOTICES = "hostNotices"
    LIST_POD_BILLING = "listPodBilling"

    @property
    def writes(self) -> bool:
        """True for a call that changes a pod (a Read Only API key is refused it)."""
        return self in WRITES

    @property
    def rest(self) -> bool:
        """True for an operation of RunPod's REST v2 document (all but the GraphQL one)."""
        return self is not RunPodOperation.HOST_NOTICES


WRITES = frozenset(
    {
        RunPodOperation.CREATE_POD,
        RunPodOperation.UPDATE_POD,
        RunPodOperation.DELETE_POD,
        RunPodOperation.POD_ACTION,
    }
)
"""The calls that change a pod: a Read Only API key is refused them."""

CREATE_CALLS = frozenset(
    {
        RunPodOperation.CREATE_POD,
        RunPodOperation.LIST_GPU_TYPES,
        RunPodOperation.LIST_DATA_CENTERS,
    }
)
"""The calls one create makes: the catalog reads for its prices and candidates, then
createPod (rpp/act/create.py)."""

"""Which RunPod pod a pool may touch: the ownership rule, by name or spec.adopt.

Where it sits: the model, below decide and act, because both apply it and act must not
import decide. Decide keeps a pool's pods from the loop's listing with it
(rpp/decide/ownership.py `owned_pods`, which also names the pods a pool creates); the
executor applies it again to a fresh read of a pod right before it deletes or updates
it (rpp/act/executor.py, the ownership safeguard), so the rule lives here once.

A pod is the pool's when spec.adopt lists its id, or its name is the pool's namePrefix
followed by a suffix of lowercase letters and digits only. The strict suffix matters:
pools "web" and "web-2" have prefixes "rpp-web-" and "rpp-web-2-", and "rpp-web-2-abc"
must not look like a pod of "web".
"""

from __future__ import annotations

import re

from rpp.model.observations import RunPodPod
from rpp.model.spec import RunPodPoolSpec

_SUFFIX = re.compile(r"^[a-z0-9]+$")


def owns_name(spec: RunPodPoolSpec, name: str) -> bool:
    """A pod name the pool created: namePrefix plus a letters-and-digits suffix."""
    if not name.startswith(spec.name_prefix):
        return False
    return bool(_SUFFIX.match(name[len(spec.name_prefix) :]))


def owns(spec: RunPodPoolSpec, pod: RunPodPod) -> bool:
    """The pool may touch this pod: its name is the pool's, or spec.adopt lists its id."""
    return pod.id in spec.adopt or owns_name(spec, pod.name)

"""Import kubernetes.aio's client without its hundreds of generated API and model classes.

Where it sits: under the Kubernetes adapter, called once by `rpp run` before anything
imports `kubernetes`. The adapter (rpp/adapters/kube/real.py, connect.py) needs three
things from the client library: `ApiClient` (auth, TLS, token refresh), `Configuration`,
and the kubeconfig / in-cluster loaders (its watches read the stream themselves,
rpp/adapters/kube/watch_stream.py). But importing any of
them runs the packages' `__init__` first, and those import everything: `kubernetes`
imports the whole synchronous client, `kubernetes.aio.client` every API class, and
`kubernetes.aio.client.api_client` every model (about 900 modules in all; 8 MiB of a
process that should hold 1,000 pods in as little as it can).

`install()` puts lazy stand-ins for those four packages (`kubernetes`,
`kubernetes.aio`, `kubernetes.aio.client`, `kubernetes.aio.client.models`) in
`sys.modules`, each with the real package's directory as its `__path__`, so a submodule
(`kubernetes.aio.client.api_client`) loads from its own file without its package's
`__init__`. Nothing is lost: the first use of a name a stand-in does not know (say
`kubernetes.aio.client.CoreV1Api`, or a model the ApiClient deserializes by name) runs
the real `__init__` in the stand-in, which becomes the real package. A submodule's
name imports that submodule.

This leans on how the generated packages are laid out, so it is checked on the version
the project pins (kubernetes 37; tests/adapters/kube/test_kube_light_import.py), and does nothing
when `kubernetes` is already imported or not laid out as expected.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

PACKAGES = (
    "kubernetes",
    "kubernetes.aio",
    "kubernetes.aio.client",
    "kubernetes.aio.client.models",
)
"""Stood in for, outermost first."""

NAMES = {
    "kubernetes.aio.client": {
        "ApiClient": "api_client",
        "Configuration": "configuration",
        "ApiException": "exceptions",
    },
}
"""Names taken from one submodule without the package's `__init__` (kubernetes.aio.config
imports `from kubernetes.aio.client import ApiClient, Configuration`)."""


def install() -> bool:
    """Stand in for the client's packages; False (and nothing done) when that cannot be."""
    if any(name in sys.modules for name in PACKAGES):
        return False  # imported already: too late to save anything, and never half-stubbed
    spec = importlib.util.find_spec("kubernetes")
    if spec is None or spec.origin is None:
        return False
    root = Path(spec.origin).parent
    directories = [root, root / "aio", root / "aio" / "client", root / "aio" / "client" / "models"]
    if not all((d / "__init__.py").is_file() for d in directories):
        return False
    for name, directory in zip(PACKAGES, directories, strict=True):
        sys.modules[name] = _stand_in(name, directory)
    return True


def _stand_in(name: str, directory: Path) -> types.ModuleType:
    init = directory / "__init__.py"
    loader = importlib.machinery.SourceFileLoader(name, str(init))
    module = types.ModuleType(name)
    module.__spec__ = importlib.util.spec_from_file_location(
        name, init, loader=loader, submodule_search_locations=[str(directory)]
    )
    module.__path__ = [str(directory)]
    module.__file__ = str(init)
    module.__loader__ = loader
    names = NAMES.get(name, {})

    def __getattr__(attr: str) -> Any:
        if attr in names:
            return getattr(importlib.import_module(f"{name}.{names[attr]}"), attr)
        if (directory / attr / "__init__.py").is_file() or (directory / f"{attr}.py").is_file():
            return importlib.import_module(f"{name}.{attr}")
        # Anything else: become the real package (its __init__ run in this module), once.
        del module.__dict__["__getattr__"]
        loader.exec_module(module)
        return getattr(module, attr)

    module.__dict__["__getattr__"] = __getattr__
    return module

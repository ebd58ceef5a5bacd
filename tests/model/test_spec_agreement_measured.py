"""Files a real API server judged: `rpp validate` and the model give its verdict.

Each case is a YAML text as a person writes it, not yaml.safe_dump's output (which quotes
what YAML 1.1 would read otherwise), and its verdict is the one kube-apiserver 1.36.2 gave
(`kubectl create --dry-run=server -f FILE`, the CRD of `rpp crd`, 2328 files compared with
`rpp validate`; these are the ones where the YAML dialect, metadata, status or the name
decided). Every file goes through `rpp validate` as a user runs it, and through
tests/crd_admission.py after being read as kubectl reads YAML (rpp/model/kube_yaml.py).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rpp.model.kube_yaml import load_all
from tests.crd_admission import admit_object

ROOT = Path(__file__).parents[2]
POOL = (ROOT / "examples" / "pool.yaml").read_text()
NAME_LINE = re.compile(r"^  name: inference.*\n", re.MULTILINE)
HEAD = (
    "apiVersion: runpodpool.ownego.com/v1alpha1\nkind: RunPodPool\n"
    "metadata:\n  name: inference\n  namespace: agree\n"
)

# (text, the server's verdict: True admitted), measured on kube-apiserver 1.36.2; a
# refusal's comment quotes what it said.
MEASURED: dict[str, tuple[str, bool]] = {
    "dryRun: yes": (HEAD + "spec:\n  dryRun: yes\n", True),
    "dryRun: on": (HEAD + "spec:\n  dryRun: on\n", True),
    # spec.dryRun in body must be of type boolean: "string"
    "dryRun: 'true'": (HEAD + "spec:\n  dryRun: 'true'\n", False),
    "port: 0x50": (HEAD + "spec:\n  port: 0x50\n", True),
    "port: 0o120": (HEAD + "spec:\n  port: 0o120\n", True),
    "port: 0120": (HEAD + "spec:\n  port: 0120\n", True),
    "port: 8_080": (HEAD + "spec:\n  port: 8_080\n", True),
    "port: 80.0": (HEAD + "spec:\n  port: 80.0\n", True),
    "port: 8e1": (HEAD + "spec:\n  port: 8e1\n", True),
    "port: 8.0e1": (HEAD + "spec:\n  port: 8.0e1\n", True),
    "port: +80": (HEAD + "spec:\n  port: +80\n", True),
    # spec.port in body must be of type integer: "string"
    "port: 1:20": (HEAD + "spec:\n  port: 1:20\n", False),
    "templateId: 2001-12-14": (HEAD + "spec:\n  templateId: 2001-12-14\n", True),
    # spec.templateId in body must be of type string: "integer"
    "templateId: 0123": (HEAD + "spec:\n  templateId: 0123\n", False),
    # spec.templateId in body must be of type string: "integer"
    "templateId: 1e3": (HEAD + "spec:\n  templateId: 1e3\n", False),
    "templateId: ~": (HEAD + "spec:\n  templateId: ~\n", True),
    # kubectl: error converting YAML to JSON: json: unsupported value: +Inf
    "templateId: .inf": (HEAD + "spec:\n  templateId: .inf\n", False),
    # kubectl: error converting YAML to JSON: json: unsupported value: NaN
    "replicas.min: .nan": (HEAD + "spec:\n  replicas:\n    min: .nan\n", False),
    # spec.drain.period in body must be of type string: "integer"
    "drain.period: 150": (HEAD + "spec:\n  drain:\n    period: 150\n", False),
    # spec.drain.period: Invalid value: "2:30": not a duration
    "drain.period: 2:30": (HEAD + "spec:\n  drain:\n    period: 2:30\n", False),
    "a key twice": (HEAD + "spec:\n  replicas:\n    min: 1\n    min: 2\n", True),
    "spec twice": (HEAD + "spec:\n  paused: true\nspec:\n  paused: false\n", True),
    "flow list, trailing comma": (HEAD + "spec:\n  gpuTypes: [A, B,]\n", True),
    # spec.cloud: Unsupported value: "secure"
    "cloud: secure": (HEAD + "spec:\n  cloud: secure\n", False),
    # spec.cloud: Unsupported value: "SECURE "
    "cloud: 'SECURE '": (HEAD + "spec:\n  cloud: 'SECURE '\n", False),
    "anchors": (HEAD + "spec:\n  replicas: &r\n    min: 1\n  limits:\n    maxPods: 2\n", True),
    "merge key": (HEAD + "spec:\n  replicas:\n    <<: {min: 2}\n    max: 3\n", True),
    "no spec": (HEAD, True),
    "spec: (empty)": (HEAD + "spec:\n", True),
    # The example pool (examples/pool.yaml), changed outside its spec.
    # metadata.name: Required value: name or generateName is required
    "name: null": (NAME_LINE.sub("  name: null\n", POOL, count=1), False),
    "name missing": (NAME_LINE.sub("", POOL, count=1), False),
    "name: ''": (NAME_LINE.sub("  name: ''\n", POOL, count=1), False),
    # strict decoding error: unknown field "foo"
    "foo at the top": (POOL + "foo: 1\n", False),
    # strict decoding error: unknown field "metadata.foo"
    "metadata.foo": (POOL.replace("\nspec:\n", "\n  foo: 1\nspec:\n", 1), False),
    "status: null": (POOL + "status: null\n", True),
    "status as the controller writes it": (
        POOL + "status:\n  ready: 1\n  observedGeneration: 5\n",
        True,
    ),
    # strict decoding error: unknown field "status.bogus"
    "status.bogus": (POOL + "status:\n  bogus: 1\n", False),
    # Status is dropped on create: its types are never checked.
    "status.ready: one": (POOL + "status:\n  ready: one\n", True),
}


def _validate(files: list[Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rpp", "validate", *(f.name for f in files)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_rpp_validate_gives_the_verdict_the_api_server_gave_on_each_file(
    tmp_path: Path,
) -> None:
    files = {}
    for index, (name, (text, _)) in enumerate(MEASURED.items()):
        path = tmp_path / f"case{index:02d}.yaml"
        path.write_text(text)
        files[path] = name
    done = _validate(list(files), tmp_path)
    assert "Traceback" not in done.stderr
    refused = {line.split(":", 1)[0] for line in done.stderr.splitlines()}
    admitted = {line.split(":", 1)[0] for line in done.stdout.splitlines()}
    wrong = [
        f"{name}: the API server {'admits' if admit else 'refuses'} it, rpp validate does not"
        for path, name in files.items()
        for admit in [MEASURED[name][1]]
        if (path.name in admitted and path.name not in refused) != admit
    ]
    assert not wrong, "\n".join(wrong) + "\n" + done.stderr


@pytest.mark.parametrize("name", list(MEASURED))
def test_the_model_gives_the_verdict_the_api_server_gave(name: str) -> None:
    text, admitted = MEASURED[name]
    [obj] = load_all(text)
    refusals = admit_object(obj)
    assert (not refusals) == admitted, refusals


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (
            lambda pool: NAME_LINE.sub("", pool, count=1),
            "metadata.name: required; name the pool with lowercase letters, digits and '-' "
            "(at most 50 characters)",
        ),
        (
            lambda pool: NAME_LINE.sub("  name: null\n", pool, count=1),
            "metadata.name: required; name the pool with lowercase letters, digits and '-' "
            "(at most 50 characters)",
        ),
        (
            lambda pool: pool.replace("\nspec:\n", "\n  label:\n    team: ml\nspec:\n", 1),
            'metadata.label: unknown field; did you mean "labels"?',
        ),
        (
            lambda pool: pool + "status:\n  bogus: 1\n",
            "status.bogus: unknown field; the controller writes status: leave it out of the file",
        ),
        (
            lambda pool: pool.replace("  port: 80 ", "  port: 1:20 ", 1),
            "spec.port: expected a whole number, got '1:20'",
        ),
    ],
    ids=["no name", "name null", "metadata.label", "status.bogus", "port 1:20"],
)
def test_what_the_api_server_refuses_outside_the_spec_rpp_names_in_one_line(
    change: Callable[[str], str], line: str, tmp_path: Path
) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(change(POOL))
    done = _validate([path], tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"pool.yaml: {line}"]


def test_a_pool_file_with_generate_name_is_refused_as_kubectl_apply_refuses_it(
    tmp_path: Path,
) -> None:
    """`kubectl create` takes generateName (the API server admitted it, measured), but
    `kubectl apply`, the way a pool file is meant to be used, refuses it before sending
    anything ("cannot use generate name with apply"): rpp validate says so."""
    text = NAME_LINE.sub("  generateName: pool-\n", POOL, count=1)
    [obj] = load_all(text)
    assert admit_object(obj) == []
    path = tmp_path / "pool.yaml"
    path.write_text(text)
    done = _validate([path], tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        'pool.yaml: metadata.name: required; kubectl apply refuses metadata.generateName ("cannot '
        'use generate name with apply"): give the pool its name in metadata.name'
    ]


def test_every_field_of_object_meta_is_known() -> None:
    """The API server's ObjectMeta, as the kubernetes client lists it: none refused."""
    from kubernetes.client import V1ObjectMeta

    from rpp.model.object_fields import OBJECT_META_FIELDS

    assert sorted(OBJECT_META_FIELDS) == sorted(V1ObjectMeta.attribute_map.values())


def test_the_model_takes_a_date_pyyaml_made_as_the_text_kubectl_sent() -> None:
    """kubectl sends `templateId: 2001-12-14` as the text (admitted, measured); the model
    given PyYAML's date for it judges that text instead of failing on a date."""
    import yaml

    obj = yaml.safe_load(MEASURED["templateId: 2001-12-14"][0])
    assert admit_object(obj) == []
    assert admit_object({**obj, "spec": {"port": obj["spec"]["templateId"]}})

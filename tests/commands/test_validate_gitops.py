"""`rpp validate` on a GitOps folder: the pools checked, every other file skipped with a note.

A folder Argo CD or Flux syncs holds more than pools: the nginx in front of them
(examples/nginx.yaml), the alert rules, a kustomization.yaml, a JSON patch. `rpp validate`
once refused each of those (exit 2), so it could not run on the folder at all. The files
here are written as people write them; a folder stands for its .yaml, .yml and .json
files, not its subfolders, as `kubectl apply -f DIR` reads it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rpp.cli import main

ROOT = Path(__file__).parents[2]
POOL = ROOT / "examples" / "pool.yaml"

KUSTOMIZATION = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: runpod
resources:
  - nginx.yaml
  - prometheus-rules.yaml
  - pool-inference.yaml
  - pool-batch.yaml
"""

BATCH = """\
apiVersion: runpodpool.ownego.com/v1alpha1
kind: RunPodPool
metadata:
  name: batch
  namespace: runpod
spec:
  templateId: batch1234
  gpuTypes: [NVIDIA RTX A6000]
  replicas: {min: 1, max: 2}
  datacenters: {allow: [EU-SE-1, EU-RO-1]}
  nginx: {basePort: 9001}
"""

INFERENCE_SUMMARY = (
    "inference: DryRun, min 2, max 3, GPU types NVIDIA GeForce RTX 4090, NVIDIA RTX A6000"
)
BATCH_SUMMARY = "batch: DryRun, min 1, max 2, GPU types NVIDIA RTX A6000"


@pytest.fixture
def gitops(tmp_path: Path) -> Path:
    """apps/inference as a repository holds it: kustomization, nginx, rules, two pools."""
    folder = tmp_path / "apps" / "inference"
    folder.mkdir(parents=True)
    (folder / "kustomization.yaml").write_text(KUSTOMIZATION)
    shutil.copy(ROOT / "examples" / "nginx.yaml", folder / "nginx.yaml")
    shutil.copy(ROOT / "examples" / "prometheus-rules.yaml", folder / "prometheus-rules.yaml")
    shutil.copy(POOL, folder / "pool-inference.yaml")
    (folder / "pool-batch.yaml").write_text(BATCH)
    (folder / "README.md").write_text("# not YAML, not read\n")
    return folder


def expected_out(folder: Path) -> list[str]:
    return [
        f"{folder}/kustomization.yaml: no RunPodPool (Kustomization); skipped",
        f"{folder}/nginx.yaml: no RunPodPool "
        "(ConfigMap, Deployment, Role, RoleBinding, Service, ServiceAccount); skipped",
        f"{folder}/pool-batch.yaml: {BATCH_SUMMARY}",
        f"{folder}/pool-inference.yaml: {INFERENCE_SUMMARY}",
        f"{folder}/prometheus-rules.yaml: no RunPodPool (PrometheusRule); skipped",
    ]


def validate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    code = main(["validate", *args])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err.splitlines()


def test_a_gitops_folder_passes_with_one_note_per_file_without_a_pool(gitops: Path) -> None:
    """Run as a user runs it, on the folder."""
    result = subprocess.run(
        [sys.executable, "-m", "rpp", "validate", str(gitops)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == expected_out(gitops)


def test_the_folders_files_named_one_by_one_give_the_same_answer(
    gitops: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `rpp validate apps/inference/*.yaml` hands the command."""
    files = sorted(str(p) for p in gitops.glob("*.yaml"))
    assert validate(capsys, *files) == (0, expected_out(gitops), [])


def test_strict_wants_a_pool_in_every_file(
    gitops: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = validate(capsys, "--strict", str(gitops))
    assert code == 2
    assert out == [
        f"{gitops}/pool-batch.yaml: {BATCH_SUMMARY}",
        f"{gitops}/pool-inference.yaml: {INFERENCE_SUMMARY}",
    ]
    assert [line.split(": ", 1)[0] for line in err] == [
        f"{gitops}/kustomization.yaml",
        f"{gitops}/nginx.yaml",
        f"{gitops}/prometheus-rules.yaml",
    ]
    assert err[2] == (
        f"{gitops}/prometheus-rules.yaml: no RunPodPool here, found kind PrometheusRule "
        "(monitoring.coreos.com/v1); expected apiVersion: runpodpool.ownego.com/v1alpha1 "
        "and kind: RunPodPool"
    )


def test_an_invalid_pool_in_the_folder_still_fails(
    gitops: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (gitops / "pool-batch.yaml").write_text(BATCH.replace("min: 1, max: 2", "min: 3, max: 2"))
    code, out, err = validate(capsys, str(gitops))
    assert code == 1
    assert f"{gitops}/pool-inference.yaml: {INFERENCE_SUMMARY}" in out
    assert any(
        line.startswith(f"{gitops}/pool-batch.yaml: spec.replicas: min (3)") for line in err
    )


def test_a_file_that_cannot_be_parsed_still_fails(
    gitops: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (gitops / "service-patch.yaml").write_text("spec:\n  ports: [80,\n  other: 2\n")
    code, out, err = validate(capsys, str(gitops))
    assert code == 2
    assert len(out) == 5  # everything else is still reported
    [line] = err
    assert line.startswith(f"{gitops}/service-patch.yaml: line ")
    assert "YAML syntax error" in line


def test_a_pool_written_wrong_is_checked_not_skipped(
    gitops: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in the kind, or the pools' group with another kind, is a pool with a mistake."""
    (gitops / "pool-batch.yaml").write_text(BATCH.replace("kind: RunPodPool", "kind: RunpodPool"))
    (gitops / "pool-other.yaml").write_text(
        BATCH.replace("kind: RunPodPool", "kind: Pool").replace("name: batch", "name: other")
    )
    code, _, err = validate(capsys, str(gitops))
    assert code == 1
    assert f"{gitops}/pool-batch.yaml: kind: expected RunPodPool, got 'RunpodPool'" in err
    assert f"{gitops}/pool-other.yaml: kind: expected RunPodPool, got 'Pool'" in err


def test_kustomize_files_without_a_kind_are_skipped_too(
    gitops: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kustomize reads a kustomization.yaml without apiVersion and kind, and a JSON 6902
    patch is a YAML list of operations."""
    (gitops / "kustomization.yaml").write_text("resources:\n  - pool-inference.yaml\n")
    (gitops / "replicas-patch.yaml").write_text(
        "- op: replace\n  path: /spec/replicas/min\n  value: 3\n"
    )
    (gitops / "placeholder.yaml").write_text("# filled in by the pipeline\n")
    code, out, err = validate(capsys, str(gitops))
    assert (code, err) == (0, [])
    assert f"{gitops}/kustomization.yaml: no RunPodPool (a mapping without kind); skipped" in out
    assert f"{gitops}/replicas-patch.yaml: no RunPodPool (a YAML list); skipped" in out
    assert f"{gitops}/placeholder.yaml: no RunPodPool (no YAML document); skipped" in out


def test_a_pool_that_cannot_be_one_is_refused_beside_valid_pools(
    gitops: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = yaml.safe_load(POOL.read_text())
    (gitops / "pools.yaml").write_text(yaml.safe_dump([pool]))
    kindless = BATCH.replace("kind: RunPodPool\n", "").replace("name: batch", "name: third")
    (gitops / "third.yaml").write_text(kindless)
    code, _, err = validate(capsys, str(gitops))
    assert code == 2
    assert err == [
        f"{gitops}/pools.yaml: is a list of 1 item: kind RunPodPool "
        "(runpodpool.ownego.com/v1alpha1), not a RunPodPool; write each pool as its own "
        "YAML document, separated by a line ---",
        f"{gitops}/third.yaml: has no kind; expected apiVersion: "
        "runpodpool.ownego.com/v1alpha1 and kind: RunPodPool",
    ]


def test_files_without_a_single_pool_are_an_error(
    gitops: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pointed at the wrong folder, the command says what each file holds, and exits 2."""
    for pool in gitops.glob("pool-*.yaml"):
        pool.unlink()
    code, out, err = validate(capsys, str(gitops))
    assert (code, out) == (2, [])
    assert err[0] == (
        f"{gitops}/kustomization.yaml: no RunPodPool here, found kind Kustomization "
        "(kustomize.config.k8s.io/v1beta1); expected apiVersion: "
        "runpodpool.ownego.com/v1alpha1 and kind: RunPodPool"
    )
    assert err[-1] == "none of the 3 files given holds a RunPodPool"


def test_subfolders_are_not_read_and_a_file_given_twice_is_read_once(
    gitops: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An overlay's patch of a pool would clash with the base's pool: not read, as
    `kubectl apply -f DIR` does not read it. Naming a file the folder holds reads it once."""
    overlay = gitops / "overlays" / "prod"
    overlay.mkdir(parents=True)
    (overlay / "pool-batch.yaml").write_text(BATCH)
    pool = str(gitops / "pool-batch.yaml")
    assert validate(capsys, str(gitops), pool) == (0, expected_out(gitops), [])


def test_an_empty_folder_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = validate(capsys, str(tmp_path), str(POOL))
    assert code == 2
    assert out == [f"{POOL}: {INFERENCE_SUMMARY}"]
    assert err == [f"{tmp_path}: a folder with no .yaml, .yml or .json file"]

"""`rpp validate` across files: pools that are each valid but would fight are reported.

Two pools with one namePrefix take each other's pods, two pools on one slots ConfigMap
overwrite each other's nginx slots, two adopting one pod both drive it, and one pool given
twice has the second replace the first. Each clash is one line naming both pools and
files; the exit code is 1, as for any pool with problems.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rpp.cli import main

EXAMPLE = Path(__file__).parents[2] / "examples" / "pool.yaml"


def pool(name: str, **spec: Any) -> dict[str, Any]:
    """The example pool renamed, with its own prefix and ConfigMaps unless `spec` says."""
    obj: dict[str, Any] = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))
    obj["metadata"]["name"] = name
    obj["spec"]["namePrefix"] = f"rpp-{name}-"
    nginx = obj["spec"]["nginx"]
    nginx.update(configMap=f"{name}-nginx-config", slotsConfigMap=f"{name}-nginx-slots")
    nginx["service"] = name
    for key, value in spec.items():
        if isinstance(value, dict):
            obj["spec"][key] = {**obj["spec"].get(key, {}), **value}
        else:
            obj["spec"][key] = value
    return obj


def write(directory: Path, name: str, *objs: dict[str, Any]) -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump_all(objs))
    return path


def validate(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, list[str]]:
    code = main(["validate", *map(str, paths)])
    return code, capsys.readouterr().err.splitlines()


def test_pools_of_their_own_do_not_clash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write(tmp_path, "a.yaml", pool("web"))
    b = write(tmp_path, "b.yaml", pool("api"))
    assert validate(capsys, a, b) == (0, [])


def test_one_name_prefix_in_two_files_names_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write(tmp_path, "a.yaml", pool("web"))
    b = write(tmp_path, "b.yaml", pool("api", namePrefix="rpp-web-"))
    assert validate(capsys, a, b) == (
        1,
        [
            f"pool api ({b}): namePrefix rpp-web- is also pool web ({a})'s; each pool would "
            "take the other's pods for its own: give each pool its own prefix"
        ],
    )


def test_a_shared_slots_config_map_is_a_clash_within_one_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write(tmp_path, "a.yaml", pool("web"))
    b = write(tmp_path, "b.yaml", pool("api", nginx={"slotsConfigMap": "web-nginx-slots"}))
    code, err = validate(capsys, a, b)
    assert code == 1
    assert err == [
        f"pool api ({b}): its slots ConfigMap web-nginx-slots is pool web ({a})'s slots "
        "ConfigMap in namespace runpod; the pools would overwrite each other's nginx: give "
        "each pool its own"
    ]
    elsewhere = pool("api", nginx={"slotsConfigMap": "web-nginx-slots"})
    elsewhere["metadata"]["namespace"] = "other"
    c = write(tmp_path, "c.yaml", elsewhere)
    assert validate(capsys, a, c) == (0, [])


def test_slots_written_over_another_pools_nginx_config_are_a_clash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = write(
        tmp_path,
        "pools.yaml",
        pool("web"),
        pool("api", nginx={"slotsConfigMap": "web-nginx-config"}),
    )
    code, err = validate(capsys, both)
    assert code == 1
    assert err == [
        f"pool api ({both}[1]): its slots ConfigMap web-nginx-config is pool web ({both}[0])'s "
        "nginx ConfigMap in namespace runpod; the pools would overwrite each other's nginx: "
        "give each pool its own"
    ]


def test_the_same_pool_in_two_files_is_one_clash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write(tmp_path, "a.yaml", pool("web"))
    b = write(tmp_path, "b.yaml", pool("web"))
    code, err = validate(capsys, a, b)
    assert code == 1
    assert err == [
        f"pool web ({b}): the same pool as {a} in namespace runpod; applying both, the "
        "second replaces the first: keep one"
    ]


def test_one_file_named_twice_is_read_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rpp validate pools pools/web.yaml` (a folder and a file in it) is one pool."""
    a = write(tmp_path, "a.yaml", pool("web"))
    code, err = validate(capsys, tmp_path, a)
    assert (code, err) == (0, [])


def test_one_pod_adopted_by_two_pools_is_a_clash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write(tmp_path, "a.yaml", pool("web", adopt=["5pd0l3pw8xqhzt"]))
    b = write(tmp_path, "b.yaml", pool("api", adopt=["5pd0l3pw8xqhzt", "abcdef1234"]))
    code, err = validate(capsys, a, b)
    assert code == 1
    assert err == [
        f"pool api ({b}): adopts pod 5pd0l3pw8xqhzt, as pool web ({a}) does; two pools would "
        "drive one pod: adopt it in one pool only"
    ]


def test_a_clash_is_reported_by_the_command_with_exit_1(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", pool("web"))
    b = write(tmp_path, "b.yaml", pool("api", namePrefix="rpp-web-"))
    result = subprocess.run(
        [sys.executable, "-m", "rpp", "validate", str(a), str(b)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"{a}: web: DryRun, min 2, max 3, GPU types NVIDIA GeForce RTX 4090, NVIDIA RTX A6000",
        f"{b}: api: DryRun, min 2, max 3, GPU types NVIDIA GeForce RTX 4090, NVIDIA RTX A6000",
    ]
    [line] = result.stderr.splitlines()
    assert "pool api" in line
    assert "pool web" in line

"""`rpp run`'s RunPod key from RUNPOD_API_KEY or RUNPOD_API_KEY_FILE: exactly one, checked at
start, and every refusal one line naming the variable, never the key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rpp.controller.config import ConfigError, load_config, read_api_key_file

KEY = "rp_live_SECRET_key_123"


def key_file(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "RUNPOD_API_KEY"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def refusal(environ: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(environ)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_the_key_comes_from_the_file_with_its_trailing_newline_cut(tmp_path: Path) -> None:
    path = key_file(tmp_path, KEY + "\n")

    config = load_config({"RUNPOD_API_KEY_FILE": str(path)})

    assert config.runpod_api_key == KEY
    assert config.runpod_api_key_file == str(path)
    assert KEY not in repr(config)


def test_a_key_from_the_environment_has_no_file_to_read_again() -> None:
    config = load_config({"RUNPOD_API_KEY": KEY})

    assert config.runpod_api_key_file is None


def test_both_set_is_refused_naming_both_variables(tmp_path: Path) -> None:
    path = key_file(tmp_path, KEY)

    message = refusal({"RUNPOD_API_KEY": KEY, "RUNPOD_API_KEY_FILE": str(path)})

    assert message.startswith("RUNPOD_API_KEY and RUNPOD_API_KEY_FILE: both set; set only one")
    assert KEY not in message


def test_neither_set_names_both_ways_to_give_the_key() -> None:
    message = refusal({})

    assert message.startswith("RUNPOD_API_KEY: not set")
    assert "RUNPOD_API_KEY_FILE" in message


def test_a_missing_file_names_the_variable_and_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nowhere"

    message = refusal({"RUNPOD_API_KEY_FILE": str(path)})

    assert message.startswith(f"RUNPOD_API_KEY_FILE={path}: cannot be read (")
    assert "No such file" in message


@pytest.mark.parametrize(
    ("content", "says"),
    [
        pytest.param(f"rp_live SECRET_{KEY}\n", "whitespace", id="whitespace-inside"),
        pytest.param(f"{KEY}\x00SECRET", "control characters", id="control-character"),
        pytest.param("  \n", "empty", id="blank"),
        pytest.param(b"\xff\xfeSECRET" + KEY.encode(), "not UTF-8", id="not-utf8"),
        pytest.param("SECRET" * 1000, "longer than", id="too-long"),
    ],
)
def test_a_file_that_holds_no_usable_key_names_the_variable_never_the_content(
    tmp_path: Path, content: str | bytes, says: str
) -> None:
    path = key_file(tmp_path, content)

    message = refusal({"RUNPOD_API_KEY_FILE": str(path)})

    assert message.startswith(f"RUNPOD_API_KEY_FILE={path}: ")
    assert says in message
    assert "SECRET" not in message


def test_the_file_is_opened_by_its_path_each_time_so_a_swapped_symlink_is_followed(
    tmp_path: Path,
) -> None:
    # A mounted Secret: the file is a link through `..data`, which Kubernetes swaps.
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "RUNPOD_API_KEY").write_text("rp_old_key_1")
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "RUNPOD_API_KEY").write_text("rp_new_key_2")
    os.symlink("v1", tmp_path / "..data")
    os.symlink("..data/RUNPOD_API_KEY", tmp_path / "RUNPOD_API_KEY")
    path = str(tmp_path / "RUNPOD_API_KEY")
    assert read_api_key_file(path) == "rp_old_key_1"

    os.symlink("v2", tmp_path / "..data_tmp")
    os.replace(tmp_path / "..data_tmp", tmp_path / "..data")

    assert read_api_key_file(path) == "rp_new_key_2"

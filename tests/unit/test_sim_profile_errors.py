"""A profile file that lacks a field or holds the wrong type says which field and which file,
through ``infmon sim`` as a one-line error, never a Python ``TypeError``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from infmon.sim import profiles

SRC = (profiles.DATA / "models" / "Qwen2.5-7B-Instruct.toml").read_text()


def without(text: str, key: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith(f"{key} ="))


def test_missing_model_field_names_field_and_file(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(without(SRC, "hidden_size"))
    with pytest.raises(profiles.ProfileError) as err:
        profiles.load_file(path, profiles.ModelProfile)
    msg = str(err.value)
    assert str(path) in msg and "hidden_size" in msg and "ModelProfile" in msg
    assert "positional argument" not in msg and "__init__" not in msg


def test_every_missing_field_is_listed(tmp_path):
    path = tmp_path / "two.toml"
    path.write_text(without(without(SRC, "vocab_size"), "intermediate_size"))
    with pytest.raises(profiles.ProfileError, match="fields intermediate_size, vocab_size"):
        profiles.load_file(path, profiles.ModelProfile)


def test_wrong_type_names_field_and_file(tmp_path):
    path = tmp_path / "typo.toml"
    path.write_text(SRC.replace("num_hidden_layers = 28", 'num_hidden_layers = "28"'))
    assert path.read_text() != SRC
    with pytest.raises(profiles.ProfileError, match=r"typo\.toml: field num_hidden_layers must"):
        profiles.load_file(path, profiles.ModelProfile)


def test_integers_are_accepted_for_float_fields(tmp_path):
    path = tmp_path / "card.toml"
    path.write_text('name = "c"\nmemory_gib = 40\nbandwidth_gb_s = 1500\nbf16_tflops = 200\n')
    card = profiles.load_file(path, profiles.GpuProfile)
    assert card.memory_gib == 40 and card.fp8_tflops is None


def test_cli_says_it_in_one_line(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(without(SRC, "num_key_value_heads"))
    cmd = [sys.executable, "-m", "infmon", "sim", "--model", str(path), "--predict"]
    proc = subprocess.run([*cmd, "--concurrency", "1"], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "num_key_value_heads" in proc.stderr and str(path) in proc.stderr
    assert "Traceback" not in proc.stderr and "TypeError" not in proc.stderr

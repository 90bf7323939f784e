"""`infmon method` and `--baseline`/`--fail-if` option handling (no server needed)."""

from __future__ import annotations

import argparse

import pytest

from infmon.cli import build_parser
from infmon.commands import CliError
from infmon.commands.against import read_options
from infmon.commands.load_args import config_from_args
from infmon.commands.method import REPEATED, repeated_options


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["method", "http://127.0.0.1:9", *argv])


def test_a_second_run_repeats_the_recorded_workload_exactly():
    first = config_from_args(
        _args(
            "--concurrency", "1,4,16", "--step-duration", "7.5s", "--warmup", "1",
            "--output-tokens", "64", "--prompt-tokens", "100-300", "--seed", "42",
            "--think-time", "2s", "--turns", "2", "--no-ignore-eos",
        )
    ).to_public_dict()  # fmt: skip
    again = _args()
    for option, value in repeated_options(first).items():
        setattr(again, option, value)
    second = config_from_args(again).to_public_dict()
    for key in REPEATED:
        assert second[key] == first[key], key


def test_lists_numbers_and_flags_become_options():
    got = repeated_options(
        {"concurrency": [1, 16], "rate": [], "step_duration_s": 4.0, "seed": 7, "lockstep": False}
    )
    assert got == {"concurrency": "1,16", "step_duration": "4", "seed": "7", "lockstep": False}


def test_fail_if_needs_a_baseline_and_readable_rules(tmp_path):
    with pytest.raises(CliError, match="needs --baseline"):
        read_options(None, "tok/s<-5%")
    with pytest.raises(CliError, match="expected METRIC"):
        read_options(str(tmp_path), "tok/s<<5")
    with pytest.raises(CliError, match="--baseline"):
        read_options(str(tmp_path / "missing"), None)
    assert read_options(None, None).reference is None

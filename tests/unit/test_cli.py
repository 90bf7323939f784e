import subprocess

import pytest

from infmon.cli import COMMANDS, _normalise, main
from tests.conftest import infmon_cmd


def test_url_means_monitor():
    assert _normalise(["http://vllm:8000"]) == ["monitor", "http://vllm:8000"]
    assert _normalise(["bench", "http://x"]) == ["bench", "http://x"]
    assert _normalise(["--help"]) == ["--help"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_has_help(name, capsys):
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    assert "usage: infmon" in capsys.readouterr().out


def test_module_entry_point_runs():
    out = subprocess.run(infmon_cmd("--version"), capture_output=True, text=True, check=True)
    assert out.stdout.startswith("infmon ")

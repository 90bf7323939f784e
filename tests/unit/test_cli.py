import subprocess
import sys

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


def test_options_may_come_before_the_url():
    """``infmon --concurrency 4 URL`` is ``infmon monitor --concurrency 4 URL``; a value that
    names a command (``--label demo``) stays a value."""
    assert _normalise(["--concurrency", "4", "http://x"]) == [
        "monitor",
        "--concurrency",
        "4",
        "http://x",
    ]
    assert _normalise(["--label", "demo", "http://x"])[0] == "monitor"
    from infmon.cli import build_parser

    args = build_parser().parse_args(_normalise(["--concurrency", "4", "http://x"]))
    assert args.command == "monitor" and args.url == "http://x" and args.concurrency == "4"


@pytest.mark.parametrize("name", ["bench", "scrape", "monitor"])
def test_a_typo_prints_the_subcommands_usage(name, capsys):
    with pytest.raises(SystemExit) as exc:
        main([name, "http://x", "--concurrncy", "4"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: infmon {name} ")
    assert f"infmon {name}: error: unrecognized arguments: --concurrncy 4" in err
    if name != "scrape":  # scrape has no --concurrency
        assert "(did you mean --concurrency?)" in err


def test_a_server_that_answered_at_all_was_reached():
    """Only a refused (or timed-out) connect is "never reached": a page that drips past its
    deadline or does not parse came from a server that is there."""
    from infmon.commands.common import Reachability
    from infmon.model.server.snapshot import SourceState, unavailable

    def seen(kind: str, message: str) -> Reachability:
        r = Reachability("http://h:1")
        r.observe(unavailable(0.0, SourceState.DOWN, kind, f"http://h:1/metrics: {message}"))
        return r

    refused = seen("connect", "All connection attempts failed")
    assert not refused.reached
    assert refused.error_line() == (
        "infmon: error: never reached http://h:1 (All connection attempts failed)"
    )
    assert not seen("timeout", "ConnectTimeout").reached
    assert seen("timeout", "no complete page within 2 s").reached
    assert seen("parse", "not Prometheus exposition text").reached


def test_a_command_imports_only_its_own_module():
    """`infmon sim` (started by every end-to-end test) and `infmon --help` import no other
    command: building every command's options took 1.7 s per start, the simulator's alone 0.2."""
    code = (
        "import sys; from infmon.cli import main\n"
        "try:\n    main(['sim', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('infmon.commands.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout.strip().splitlines()[-1]
    assert "infmon.commands.sim" in loaded
    assert not any(f"infmon.commands.{c}'" in loaded for c in COMMANDS if c != "sim"), loaded

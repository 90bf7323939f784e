"""Hostile local input (#27, finding 6): a damaged journal, a bad theme file, JSON nested past
Python's recursion limit, a session directory made immutable under a running bench.

Before: tracebacks ("no such table: meta", "database disk image is malformed", ``ReprError``,
``AttributeError``, ``RecursionError``) and SIGBUS (exit 135, no message, no report).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd, poll_until
from tests.hostile.kit import assert_clean_run, bench, clean_env, run_infmon
from tests.hostile.server import serve
from tests.synthetic import write_synthetic_session

pytestmark = pytest.mark.e2e
PAGE = 4096


def _damage(journal: Path, page: int) -> None:
    """Scramble the b-tree header of one page (page 2 holds the ``meta`` table)."""
    data = bytearray(journal.read_bytes())
    for i in range((page - 1) * PAGE, (page - 1) * PAGE + 12):
        data[i] ^= 0xA5
    journal.write_bytes(bytes(data))


def _one_line_error(ran) -> None:
    assert ran.returncode == 2, ran.show()
    assert_clean_run(ran)
    assert ran.stderr.count("\n") == 1 and ran.stderr.startswith("infmon: error: "), ran.stderr


def test_a_damaged_journal_is_one_line_and_report_salvages_it(tmp_path: Path) -> None:
    good = tmp_path / "good"
    write_synthetic_session(good, concurrencies=(2, 4), step_duration_s=3)
    empty, flipped = tmp_path / "empty", tmp_path / "flipped"
    shutil.copytree(good, empty)
    (empty / "journal.sqlite").write_bytes(b"")
    shutil.copytree(good, flipped)
    _damage(flipped / "journal.sqlite", 2)
    env = {"TMPDIR": str(tmp_path)}
    for broken in (empty, flipped):
        for args in (("export", "--csv", str(broken)), ("compare", str(good), str(broken))):
            _one_line_error(run_infmon(*args, home=tmp_path, **env))
    _one_line_error(run_infmon("report", str(empty), home=tmp_path, **env))
    salvaged = run_infmon("report", str(flipped), home=tmp_path, **env)
    assert salvaged.returncode == 1, salvaged.show()
    assert_clean_run(salvaged)
    m = re.search(r"journal is damaged \(.*malformed\); salvaged ([\d,]+) records", salvaged.stderr)
    assert m and int(m.group(1).replace(",", "")) > 0, salvaged.stderr
    report = Path(salvaged.stdout.split()[0]).parent
    assert report.parent == tmp_path and (report / "report.md").stat().st_size > 0


def test_deep_json_from_a_dataset_or_v1_models_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with serve("benign") as (url, _):
        dataset = bench(url, tmp_path / "a", "--dataset", str(deep), home=tmp_path)
    with serve("deep-models") as (url, _):
        models = bench(url, tmp_path / "b", home=tmp_path)
    for ran in (dataset, models):
        _one_line_error(ran)
    assert "nested too deeply" in dataset.stderr
    assert "/v1/models" in models.stderr


def test_bad_theme_files_are_skipped_with_a_line_each(tmp_path: Path) -> None:
    from tests.hostile.test_tui import monitor

    themes = tmp_path / ".config" / "infmon" / "themes"
    themes.mkdir(parents=True)
    (themes / "a.toml").write_text('name = "a"\nprimary = "notacolor"\n')
    (themes / "b.toml").write_text('name = "b"\nprimary = "#ff0000"\nvariables = "x"\n')
    (themes / "c.toml").write_text('name = "c"\nprimary = "#f00"\n[variables]\nclient = "}"\n')
    with serve("benign") as (url, srv), monitor(url, tmp_path) as (t, _session):
        screen = t.wait_for("three skipped themes", lambda s: s.count("theme skipped") == 3)
        assert "Traceback" not in screen
        poll_until(lambda: len(srv.log.load) >= 5, 30, "the monitor's load running")
        t.run("send-keys", "-t", "tui", "q")
        screen = t.wait_for("the monitor to quit", lambda s: "infmon-exit=" in s, timeout_s=60)
    assert "infmon-exit=0" in screen, screen


@pytest.mark.skipif(os.geteuid() != 0, reason="chattr +i needs CAP_LINUX_IMMUTABLE")
def test_a_session_directory_made_immutable_mid_run(tmp_path: Path) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("needs chattr (e2fsprogs)")
    session = tmp_path / "s"
    with serve("benign") as (url, srv):
        args = (
            *("bench", url, "--session-dir", str(session), "--concurrency", "4"),
            *("--step-duration", "5", "--warmup", "0", "--output-tokens", "8"),
            *("--prompt-tokens", "8", "--no-server-metrics"),
        )
        proc = subprocess.Popen(
            infmon_cmd(*args),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(tmp_path, TMPDIR=str(tmp_path)),
        )
        try:
            deadline = time.monotonic() + 30
            while len(srv.log.load) < 40 and time.monotonic() < deadline:
                time.sleep(0.05)
            made = subprocess.run(["chattr", "-R", "+i", str(session)], capture_output=True)
            if made.returncode != 0:
                pytest.skip(f"chattr +i refused here: {made.stderr.strip()}")
            out, err = proc.communicate(timeout=90)
        finally:
            subprocess.run(["chattr", "-R", "-i", str(session)], check=False)
            if proc.poll() is None:
                proc.kill()
    print(out, err)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{err}"  # 135 was SIGBUS
    assert "Traceback" not in err
    m = re.search(r"journal: read-only since [\d:]+, the session's record .* saved to (\S+)", err)
    assert m, err
    assert (Path(m.group(1)) / "report.md").exists()

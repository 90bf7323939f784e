"""A password in the target URL (#27, finding 4): ``http://alice:PW@host``.

Before, the password was on screen, in ``ps``, the journal, report.md, report.html,
report.json and ``--json``. Now every place a URL is shown or stored has it redacted
(``infmon.model.base.sanitize.redact_url``).
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd
from tests.hostile.kit import assert_clean_run, bench, clean_env, run_infmon
from tests.hostile.server import serve

pytestmark = pytest.mark.e2e
PASSWORD = "PW-hostile-0c1d-in-the-url"


def _with_password(url: str) -> str:
    return url.replace("http://", f"http://alice:{PASSWORD}@")


def _session_text(session: Path) -> str:
    """Every byte a session holds: reports, CSV, JSON, and the SQLite journal's rows."""
    parts = []
    for p in sorted(session.rglob("*")):
        if p.is_file() and not p.name.startswith("journal"):
            parts.append(p.read_bytes().decode("utf-8", "replace"))
    for db in session.glob("journal*.sqlite"):
        with sqlite3.connect(db) as conn:
            for table in ("meta", "events", "scrapes", "scrape_pages"):
                parts += [repr(row) for row in conn.execute(f"SELECT * FROM {table}")]
    return "\n".join(parts)


def test_bench_scrape_and_ps_never_show_a_url_password(tmp_path: Path) -> None:
    with serve("benign") as (url, srv):
        target = _with_password(url)
        ran = bench(target, tmp_path / "s", "--json", str(tmp_path / "b.json"), home=tmp_path)
        scraped = run_infmon("scrape", target, "--json", home=tmp_path)
        srv.ttft_s, before = 0.5, len(srv.log.requests)
        proc = subprocess.Popen(
            infmon_cmd("quality", target, "--probes", str(_probes(tmp_path))),
            cwd=REPO,
            env=clean_env(tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 20
            while len(srv.log.requests) == before and time.monotonic() < deadline:
                time.sleep(0.05)
            cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        finally:
            proc.wait(30)
    assert ran.returncode == 0, ran.show()
    assert_clean_run(ran)
    assert scraped.returncode == 0, scraped.show()
    for what, text in {
        "bench output": ran.output,
        "scrape output": scraped.output,
        "bench --json": (tmp_path / "b.json").read_text(),
        "the session": _session_text(tmp_path / "s"),
        "ps": cmdline.decode(),
    }.items():
        assert PASSWORD not in text, f"the URL's password is in {what}"
    assert "alice:&lt;redacted&gt;@127.0.0.1" in (tmp_path / "s" / "report.md").read_text()


def _probes(tmp_path: Path) -> Path:
    path = tmp_path / "probes.jsonl"
    path.write_text('{"id": "one", "prompt": "say 1", "expect": "1"}\n')
    return path

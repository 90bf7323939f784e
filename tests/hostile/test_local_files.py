"""A hostile local user (#27, finding 1): links planted where infmon writes its reports.

Before, an unwritable session sent reports to the fixed ``$TMPDIR/infmon-reports/<name>``; a
user who made that directory first, with ``requests.csv.tmp`` and ``report.md.tmp`` linked to a
victim file, had root's ``infmon report`` overwrite the victim and could read every report.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.hostile.kit import run_infmon
from tests.synthetic import write_synthetic_session

pytestmark = pytest.mark.e2e
OTHER_UID = 65534
"""``nobody``: the other local user (the test runs as root, which can hand files to it)."""
PLANTED = ("requests.csv", "requests.csv.tmp", "report.md", "report.md.tmp", "report.json.tmp")


def _as_other(path: Path) -> None:
    os.lchown(path, OTHER_UID, OTHER_UID)


def _plant(directory: Path, victim: Path) -> None:
    for name in PLANTED:
        (directory / name).symlink_to(victim)
        _as_other(directory / name)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "important.conf"
    path.write_text("precious = true\n")
    return path


@pytest.mark.skipif(os.geteuid() != 0, reason="handing files to another user needs root")
def test_the_fallback_never_writes_through_a_prepared_directory(
    tmp_path: Path, victim: Path
) -> None:
    shared = tmp_path / "shared"  # a sticky, world-writable $TMPDIR
    shared.mkdir()
    shared.chmod(0o1777)
    trap = shared / "infmon-reports" / "session"
    trap.mkdir(parents=True)
    _as_other(trap.parent)
    _as_other(trap)
    _plant(trap, victim)
    session = tmp_path / "session"
    write_synthetic_session(session, concurrencies=(2,), step_duration_s=2)
    os.chown(session, OTHER_UID, OTHER_UID)  # the session directory is not root's to write

    ran = run_infmon("report", str(session), home=tmp_path, TMPDIR=str(shared))
    assert ran.returncode == 0, ran.show()
    assert victim.read_text() == "precious = true\n"
    assert sorted(p.name for p in trap.iterdir()) == sorted(PLANTED)  # untouched
    written = [Path(line) for line in ran.stdout.splitlines()]
    (private,) = {p.parent for p in written}
    assert private.parent == shared and private.name.startswith("infmon-reports-session-")
    st = private.lstat()
    assert st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o700
    assert not any(p.is_symlink() for p in written)
    assert not list(session.glob("report*")), "wrote into a directory another user owns"
    again = run_infmon("report", str(session), home=tmp_path, TMPDIR=str(shared))
    assert {Path(line).parent for line in again.stdout.splitlines()} != {private}


def test_links_planted_in_the_session_directory_are_replaced_not_followed(
    tmp_path: Path, victim: Path
) -> None:
    session = tmp_path / "session"
    write_synthetic_session(session, concurrencies=(2,), step_duration_s=2)
    _plant(session, victim)
    ran = run_infmon("report", str(session), home=tmp_path)
    assert ran.returncode == 0, ran.show()
    assert victim.read_text() == "precious = true\n"
    for name in ("requests.csv", "report.md"):
        assert not (session / name).is_symlink() and (session / name).stat().st_size > 0
    (session / "infmon.lock").unlink(missing_ok=True)
    (session / "infmon.lock").symlink_to(victim)
    ran = run_infmon("bench", "http://127.0.0.1:9", "--session-dir", str(session), home=tmp_path)
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1, ran.show()
    assert victim.read_text() == "precious = true\n"

"""Files infmon writes, created so that nobody else can steer them.

A file is written to a fresh temporary name in its own directory (``mkstemp``: ``O_EXCL``, so a
symlink or a file planted under that name is never opened) and renamed over its final name (a
rename replaces a planted symlink, it never writes through it). Where the session directory
cannot be used, reports go to a private directory made by ``mkdtemp`` (mode 0700, a new name
each run), never to a fixed path in a shared ``$TMPDIR`` another user could have prepared.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

FILE_MODE = 0o644
"""Reports and JSON files are readable like any file the user makes (the directory guards them)."""
_private: dict[Path, Path] = {}


@contextlib.contextmanager
def atomic_open(path: Path, *, newline: str | None = None) -> Iterator[IO[str]]:
    """A file object for ``path`` that appears there complete (renamed in on success) or not
    at all; see the module docstring for why this never follows a planted symlink."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    with atomic_open(path) as f:
        f.write(text)


def owned_by_other(path: Path) -> int | None:
    """The owner's uid when ``path`` (a directory) belongs to another user, else None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_uid if st.st_uid != os.geteuid() else None


def private_dir(key: Path) -> Path:
    """This process's private directory for ``key`` (``$TMPDIR/infmon-reports-NAME-XXXX``,
    NAME its last part, mode 0700), made once and checked again on every use. ``$TMPDIR`` is
    taken as given: Python's own choice would move on to ``/tmp`` or the working directory
    when it is full, and the operator named this place."""
    made = _private.get(key)
    if made is not None and _is_private(made):
        return made
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", key.name)[:64] or "session"
    base = tempfile.tempdir or os.environ.get("TMPDIR") or tempfile.gettempdir()
    made = _private[key] = Path(tempfile.mkdtemp(prefix=f"infmon-reports-{safe}-", dir=base))
    return made


def _is_private(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077

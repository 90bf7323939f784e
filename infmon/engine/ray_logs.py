"""A Ray actor's own output, brought into the session directory.

Ray sends an actor's stdout and stderr to files on its node (``/tmp/ray/session_*/logs``),
where nobody looks once the run is over, and on a cluster each node has its own. The actor
says where its output goes (its file descriptors 1 and 2, as the kernel knows them) when it
opens; when the run ends the controller asks it for the last ``LOG_TAIL_BYTES`` of each and
writes them, sanitised (control and escape sequences shown, never interpreted), to
``workers/<node>-<pid>.log``. An actor that was lost cannot answer: its file says so and names
where its output stays on its node.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from infmon.model.base.sanitize import clean, clean_lines

LOG_TAIL_BYTES = 256 * 1024
"""At most this much of each of an actor's two outputs comes back (its last part)."""


def own_log_paths() -> tuple[str, ...]:
    """The files this process's stdout and stderr go to (none when they are not files)."""
    out: list[str] = []
    for fd in (1, 2):
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if path.startswith("/") and path not in out and os.path.isfile(path):
            out.append(path)
    return tuple(out)


def read_tails(paths: Sequence[str], max_bytes: int = LOG_TAIL_BYTES) -> list[tuple[str, str]]:
    """The last ``max_bytes`` of each file, decoded (undecodable bytes replaced)."""
    out = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - max_bytes))
                data = f.read(max_bytes)
        except OSError as exc:
            out.append((path, f"(unreadable: {exc.strerror or exc})"))
            continue
        cut = f"(its first {size - len(data):,} bytes left out)\n" if size > len(data) else ""
        out.append((path, cut + data.decode("utf-8", "replace")))
    return out


def log_file(log_dir: Path, host: str, pid: int) -> Path:
    """``workers/<node>-<pid>.log`` (the node's address kept to safe file-name characters)."""
    node = re.sub(r"[^A-Za-z0-9._-]", "_", host)[:64] or "node"
    return log_dir / "workers" / f"{node}-{int(pid)}.log"


def write_worker_log(
    log_dir: Path,
    title: str,
    host: str,
    pid: int,
    tails: Sequence[tuple[str, str]],
    note: str | None = None,
) -> Path:
    """One actor's output (``tails``: path on its node, text), or ``note`` saying why not."""
    path = log_file(log_dir, host, pid)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"# {clean(title, 200)}"]
    if note is not None:
        lines.append(f"# {clean(note, 400)}")
    for where, text in tails:
        lines += [f"# ---- {clean(where, 300)} (on {clean(host, 64)})", clean_lines(text)]
    path.write_text("\n".join(lines).rstrip("\n") + "\n", encoding="utf-8")
    return path

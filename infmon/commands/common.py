"""What the commands share once their options are parsed: the terminal output, the API key
kept out of the process title, the stop signals, the workload, the checks made before a run
(session directory, server), and the session's record and reports. The options themselves
and the ``Config`` they build are in ``infmon.commands.load_args``.

Everything printed goes through ``say``, which escapes control characters as a last line of
defence (untrusted text is sanitised where it enters, too).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from infmon.clock import Clock, wall_time
from infmon.commands import CliError
from infmon.config import Config
from infmon.journal import JournalStatus, JournalWriter
from infmon.load.build import LazyWorkload
from infmon.load.feed import WorkloadError
from infmon.model.base.sanitize import REDACTED, clean, redact_url
from infmon.model.server.snapshot import ServerSnapshot, SourceState


def scrub_argv(argv: list[str]) -> list[str]:
    """``argv`` with the value of ``--api-key`` (either spelling) and a URL's credentials
    replaced by ``<redacted>``."""
    out, hide_next = [], False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
        elif arg == "--api-key":
            out.append(arg)
            hide_next = True
        elif arg.startswith("--api-key="):
            out.append(f"--api-key={REDACTED}")
        else:
            out.append(redact_url(arg))
    return out


def hide_api_key_from_process_title() -> None:
    """Rewrite the process title (``ps``, ``/proc/PID/cmdline``) without the API key.

    ``/proc/PID/cmdline`` is readable by every user of the machine; ``--api-key-file`` or
    ``$OPENAI_API_KEY`` never put the key there at all, and are the safe ways to pass it. A
    password in a URL (``http://alice:PW@host``) is hidden the same way.
    """
    if scrub_argv(sys.argv) == sys.argv:
        return
    import setproctitle

    setproctitle.setproctitle(" ".join(scrub_argv([sys.executable, "-m", "infmon", *sys.argv[1:]])))


def say(text: str, *, err: bool = False, end: str = "\n") -> None:
    """Print a status line (or a block of lines); a terminal that went away (SSH dropped) must
    not end the run.

    The last line of defence for the terminal: every control character but newline and tab is
    shown escaped (``\\x1b``), and bidi overrides too, whatever reached here. Carriage returns
    at the very start or end are infmon's own (a progress line redrawn in place) and kept.
    """
    body = text.strip("\r")
    lead = text[: len(text) - len(text.lstrip("\r"))]
    tail = text[len(lead) + len(body) :] if body else ""
    out = lead + clean(redact_url(body), None, multiline=True) + tail + end
    with contextlib.suppress(OSError, ValueError):
        stream = sys.stderr if err else sys.stdout
        stream.write(out)
        stream.flush()


class StopSignals:
    """SIGTERM and SIGHUP end a run as Ctrl+C does: the main task is cancelled, every
    ``finally`` runs (in-flight streams cancelled and recorded, the record flushed, the
    report written), and the exit status is 128 + the signal number."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.received: int | None = None

    @property
    def name(self) -> str:
        return signal.Signals(self.received).name if self.received is not None else "none"

    @property
    def exit_code(self) -> int:
        return 128 + (self.received or 0)

    def install(self) -> None:
        """Call inside the running loop, from the task the signals should cancel."""
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None
        for sig in self.SIGNALS:
            loop.add_signal_handler(sig, self._on_signal, sig, task)

    def _on_signal(self, sig: int, task: asyncio.Task[Any]) -> None:
        if self.received is not None:
            return
        self.received = sig
        if sig == signal.SIGHUP:
            _detach_lost_terminal()
        task.cancel()

    def shield_finish(self) -> None:
        """After the loop is gone: a further SIGTERM/SIGHUP must not cut the report short."""
        for sig in self.SIGNALS:
            signal.signal(sig, self._late)

    def _late(self, sig: int, frame: object) -> None:
        if self.received is None:
            self.received = sig


def _detach_lost_terminal() -> None:
    """On hang-up, point stdout/stderr that were the (now gone) terminal at /dev/null."""
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            if os.isatty(fd):
                os.dup2(null, fd)
    os.close(null)


def make_workload(config: Config) -> LazyWorkload:
    """The config's workload, built (with the server's tokenizer) when first used or on
    ``await workload.ready(model)``; ``infmon.load.build.build_workload`` builds it at once."""
    try:
        return LazyWorkload(config)
    except WorkloadError as exc:
        raise CliError(str(exc)) from None


def default_session_dir(label: str, now_s: float | None = None) -> Path:
    """``./infmon-sessions/<UTC time>-<label>/`` (a suffix is added if it exists)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(wall_time() if now_s is None else now_s))
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label) or "run"
    base = Path("infmon-sessions") / f"{stamp}-{safe}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def check_dir_usable(directory: Path) -> None:
    """Could a session directory be made and written at ``directory``? Asked of the nearest
    existing ancestor, without making anything (``open_journal`` proves it by writing): a
    bad directory is said before an unreachable server, and neither leaves a directory."""
    from infmon.journal import SessionDirError

    path = Path(directory).absolute()
    near = path
    while not near.exists() and near.parent != near:
        near = near.parent
    reason = None
    if not near.is_dir():
        reason = os.strerror(errno.ENOTDIR)
    elif os.statvfs(near).f_flag & os.ST_RDONLY:
        reason = "read-only file system"
    elif not os.access(near, os.W_OK | os.X_OK):
        reason = os.strerror(errno.EACCES)
    if reason is not None:
        raise CliError(str(SessionDirError(path, f"not writable ({reason})")))


def check_reachable(config: Config) -> None:
    """One TCP connect to the server (within ``--connect-timeout``) before anything is
    recorded: an unreachable URL is a one-line error and leaves no session directory."""
    url = urlsplit(config.url or "")
    if url.scheme not in ("http", "https") or not url.hostname:
        raise CliError(f"{config.url}: not an http:// or https:// URL")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=config.connect_timeout_s).close()
    except OSError as exc:
        reason = exc.strerror or str(exc) or exc.__class__.__name__
        raise CliError(f"{config.url}: cannot connect ({reason})") from None


class Reachability:
    """Whether a run ever reached its server (a scrape answered, or the load found the
    model), and the last reason it could not: a monitor that never reached it ends with
    one line and a non-zero status instead of a report of nothing."""

    def __init__(self, url: str) -> None:
        self.url, self.reached, self.last_error = url, False, ""

    def observe(self, snap: ServerSnapshot) -> None:
        message = snap.error_message or ""
        unreached = snap.error_kind == "connect" or "ConnectTimeout" in message
        if snap.state in (SourceState.OK, SourceState.NO_METRICS) or not unreached:
            self.reached = True  # it answered (a slow or broken page is still a server)
        elif message:  # "http://h/metrics: why": the URL is said once
            url, sep, why = message.partition(": ")
            self.last_error = why if sep and url.startswith("http") else message

    def error_line(self) -> str:
        why = f" ({self.last_error})" if self.last_error else ""
        return f"infmon: error: never reached {redact_url(self.url)}{why}"


def open_journal(directory: Path, clock: Clock) -> JournalWriter:
    """The session record of a run (append-only, flushed in the background). An unusable
    directory (unwritable, read-only, another infmon recording there) is a one-line error,
    raised before any load is sent."""
    from infmon.journal import SessionDirError

    try:
        return JournalWriter(directory, clock)
    except SessionDirError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        why = exc.strerror or str(exc) or exc.__class__.__name__
        raise CliError(f"cannot create session directory {directory}: {why}") from None


def write_session_reports(
    directory: Path, journal_status: JournalStatus | None = None, err: bool = False
) -> None:
    """Rebuild the session's reports; a failure is reported on one line, never a traceback.
    ``journal_status`` (the writer's at the end) puts what a failing disk refused in them."""
    from infmon.report import write_reports

    if journal_status is not None and journal_status.line():
        grade = "error" if journal_status.unwritten_records else "warning"
        say(f"infmon: {grade}: {journal_status.line()}", err=True)
    try:
        written = write_reports(directory, journal_status=journal_status)
    except Exception as exc:  # a report bug must not turn a finished run into a crash
        say(f"infmon: warning: reports not written ({exc.__class__.__name__}: {exc})", err=True)
        return
    names = ", ".join(p.name for p in written if p.suffix in (".md", ".html"))
    where = written[0].parent if written else directory
    say(f"reports: {names} in {where}", err=err)
    energy = energy_of(where)
    if energy is not None:
        say(energy, err=err)


def energy_of(reports: Path) -> str | None:
    """The energy per step of the report just written in ``reports`` (where GPU power was
    known), else None."""
    import json

    from infmon.report.docjson import parse_report
    from infmon.report.gpu import energy_line

    path = reports / "report.json"
    try:
        return energy_line(parse_report(json.loads(path.read_text()), str(path)))
    except (OSError, ValueError):  # no report there, or not one: the reports' own line says why
        return None

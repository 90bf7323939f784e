"""Running the real ``infmon`` against the hostile server: exit code, output, peak RSS, cleanliness."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO, infmon_cmd

KEY = "sk-hostile-DISTINCTIVE-93b1e7-never-leak"
BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


@dataclass(frozen=True)
class Ran:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    max_rss_mb: float
    """Peak resident memory of the infmon process or of its load worker, the larger
    (``VmHWM``, sampled every 50 ms while it runs)."""
    elapsed_s: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def show(self) -> str:
        return (
            f"$ infmon {' '.join(self.args)}\nexit {self.returncode}, peak RSS "
            f"{self.max_rss_mb:.0f} MB, {self.elapsed_s:.1f} s\n--- stdout\n{self.stdout}"
            f"--- stderr\n{self.stderr}"
        )


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """No user config, no inherited key; ``extra`` added."""
    env = {
        k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY" and not k.startswith("INFMON_")
    }
    env.update(XDG_CONFIG_HOME=str(home / "xdg"), HOME=str(home), PYTHONUNBUFFERED="1", **extra)
    return env


def _hwm_mb(pid: int) -> float:
    """Peak resident memory since the process's exec (``VmHWM``); 0 when it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            todo += [int(x) for x in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
    return out


def run_infmon(*args: str, home: Path, timeout_s: float = 90, **env: str) -> Ran:
    """Run ``python -m infmon ARGS`` to its end, sampling its processes' peak RSS."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            infmon_cmd(*args), cwd=REPO, stdout=out, stderr=err, env=clean_env(home, **env)
        )
        deadline = t0 + timeout_s
        peaks: dict[int, float] = {}
        while True:
            # each process's own peak since its exec: wait4's ru_maxrss would count the
            # moment after fork, when the child still maps the (large) test process
            for p in _tree(proc.pid):
                peaks[p] = max(peaks.get(p, 0.0), _hwm_mb(p))
            pid, status, _usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                out.seek(0)
                err.seek(0)
                raise AssertionError(
                    f"infmon {' '.join(args)} still running after {timeout_s} s\n"
                    f"stdout: {out.read()[-2000:]!r}\nstderr: {err.read()[-2000:]!r}"
                )
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        ran = Ran(
            tuple(args),
            proc.returncode,
            out.read().decode("utf-8", "strict"),
            err.read().decode("utf-8", "strict"),
            max(peaks.values(), default=0.0),
            elapsed,
        )
    print(ran.show())
    return ran


def raw_controls(text: str, *, allow: str = "\n\t") -> list[str]:
    """Every character no terminal or page should get raw: C0 (but ``allow``), DEL, C1, bidi,
    lone surrogates; described as ``U+XXXX`` with some context."""
    bad = []
    for i, ch in enumerate(text):
        c = ord(ch)
        if (
            (c < 0x20 and ch not in allow)
            or 0x7F <= c <= 0x9F
            or ch in BIDI
            or unicodedata.category(ch) == "Cs"
        ):
            bad.append(f"U+{c:04X} at {i}: {text[max(0, i - 20) : i + 20]!r}")
    return bad


def assert_clean(text: str, what: str = "output", *, allow: str = "\n\t") -> None:
    bad = raw_controls(text, allow=allow)
    assert not bad, f"raw control characters in {what}: {bad[:5]}"


def assert_clean_run(ran: Ran, max_rss_mb: float = 300.0) -> None:
    """No raw control character on stdout or stderr; peak RSS within the bound; no traceback."""
    assert_clean(ran.stdout, "stdout")
    assert_clean(ran.stderr, "stderr")
    assert "Traceback" not in ran.output, ran.show()
    assert ran.max_rss_mb < max_rss_mb, f"peak RSS {ran.max_rss_mb:.0f} MB ≥ {max_rss_mb} MB"


def bench(
    url: str, session: Path, *extra: str, home: Path, timeout_s: float = 90, **env: str
) -> Ran:
    return run_infmon(
        "bench",
        url,
        "--session-dir",
        str(session),
        "--concurrency",
        "2",
        "--step-duration",
        "1.5",
        "--warmup",
        "0",
        "--output-tokens",
        "8",
        "--prompt-tokens",
        "8",
        "--metrics-interval",
        "0.5",
        *extra,
        home=home,
        timeout_s=timeout_s,
        **env,
    )


def records(session: Path) -> list:
    from infmon.journal import SessionReader

    return list(SessionReader(session).iter_records())


def error_kinds(session: Path) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for r in records(session):
        if r.error_kind:
            kinds[r.error_kind] = kinds.get(r.error_kind, 0) + 1
    return kinds

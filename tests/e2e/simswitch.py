"""A switch command for ``infmon method --abab`` in tests: ``python simswitch.py STATE PORT
LABEL`` stops the simulator recorded in STATE/pid (if any) and starts ``infmon sim --scenario
LABEL`` on PORT in the background, as an operator's restart script would; ``stop`` as LABEL
only stops it. The method then waits until the new simulator answers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def _stop(pid_file: Path) -> None:
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    pid_file.unlink()
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def main(state: str, port: str, label: str) -> None:
    d = Path(state)
    d.mkdir(parents=True, exist_ok=True)
    _stop(d / "pid")
    if label == "stop":
        return
    cmd = [
        sys.executable,
        "-m",
        "infmon",
        "sim",
        "--scenario",
        label,
        "--port",
        port,
        "--seed",
        "1",
    ]
    with open(d / f"{label}.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
    (d / "pid").write_text(str(proc.pid))


if __name__ == "__main__":
    main(*sys.argv[1:4])

"""Regenerate the README screenshots: the monitor sweeps a simulator, the app exports SVGs.

    python docs/screenshots.py [--url URL] [--step-duration 8] [--out DIR]

Without ``--url`` it starts ``infmon sim --scenario baseline`` itself. Writes
``docs/screenshot-160x48.svg`` and ``docs/screenshot-80x24.svg`` (or into ``--out``).
``tests/e2e/test_docs_screenshots.py`` runs it and compares its output with the committed
screenshots by pane text (``screen_lines``), so a README screenshot cannot go stale.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))

from infmon.cli import build_parser  # noqa: E402
from infmon.commands.demo import simulator_process  # noqa: E402
from infmon.commands.load_args import config_from_args  # noqa: E402
from infmon.commands.monitor import build_monitor, finish  # noqa: E402


def _sweeping(app) -> bool:
    """The sweep still runs (the header says ``sweep 3/11 …`` while it does)."""
    snap = app.last_snapshot
    return snap is None or snap.header.sweep is not None


async def sweep_and_shoot(app, max_s: float) -> tuple[str, str]:
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("w")
        waited = 0.0
        while waited < max_s and (_sweeping(app) or waited < 5):
            await asyncio.sleep(1.0)
            waited += 1.0
            if waited == 20:
                await pilot.press("m", *"switched to FP8", "enter")
        await asyncio.sleep(3.0)
        large = app.export_screenshot(title="infmon 160x48")
        await pilot.resize_terminal(80, 24)
        await asyncio.sleep(1.5)
        small = app.export_screenshot(title="infmon 80x24")
        await pilot.press("q")
        await asyncio.sleep(0.5)
    return large, small


def screen_lines(svg: str) -> list[str]:
    """The text rows of an exported screenshot (Textual's SVG: one ``<text>`` per run)."""
    import html
    import re

    rows: dict[float, list[tuple[float, str]]] = {}
    for m in re.finditer(r'<text[^>]*x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        text = html.unescape(re.sub("<[^>]+>", "", m.group(3))).replace("\xa0", " ")
        rows.setdefault(float(m.group(2)), []).append((float(m.group(1)), text))
    return ["".join(t for _, t in sorted(r)) for _, r in sorted(rows.items())]


def shoot(url: str, step_s: float, max_s: float, out: Path = DOCS) -> None:
    session_dir = tempfile.mkdtemp(prefix="infmon-screens-")
    args = build_parser().parse_args(
        [
            "monitor",
            url,
            "--step-duration",
            f"{step_s:g}s",
            "--session-dir",
            session_dir,
            "--slo",
            "ttft=1s,tpot=50ms",
            "--label",
            "readme",
        ]
    )
    app, recorder = build_monitor(config_from_args(args), args)
    large, small = asyncio.run(sweep_and_shoot(app, max_s))
    finish(app, recorder)
    (out / "screenshot-160x48.svg").write_text(large, encoding="utf-8")
    (out / "screenshot-80x24.svg").write_text(small, encoding="utf-8")
    print(f"wrote {out}/screenshot-160x48.svg and screenshot-80x24.svg (session {session_dir})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url")
    parser.add_argument("--step-duration", type=float, default=8.0)
    parser.add_argument("--max-seconds", type=float, default=150.0)
    parser.add_argument("--out", type=Path, default=DOCS, help="where the SVGs go (default docs/)")
    args = parser.parse_args()
    if args.url:
        shoot(args.url, args.step_duration, args.max_seconds, args.out)
    else:
        with simulator_process("baseline", []) as (url, _stop):
            shoot(url, args.step_duration, args.max_seconds, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

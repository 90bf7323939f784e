"""Session reports: ``write_reports(session_dir)`` → report.md, .html, .json, requests.csv."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infmon.journal.reader import SessionReader
from infmon.journal.writer import _clean, write_json_atomic

__all__ = ["build_summary", "write_reports"]


def build_summary(session_dir: Path, on_record: Any = None) -> dict[str, Any]:
    from infmon.report.summary import build_summary as build

    return build(Path(session_dir), on_record)


def write_reports(
    session_dir: Path, out_dir: Path | None = None, screenshot_svg: str | Path | None = None
) -> list[Path]:
    """Rebuild every report of a session directory (offline); returns the files written."""
    from infmon.report.csvout import RequestsCsv
    from infmon.report.html import render_html
    from infmon.report.markdown import render_markdown

    session_dir = Path(session_dir)
    out = Path(out_dir) if out_dir is not None else session_dir
    out.mkdir(parents=True, exist_ok=True)
    origin = SessionReader(session_dir).origin_s()
    csv_path = out / "requests.csv"
    tmp_csv = csv_path.with_name(csv_path.name + ".tmp")
    with open(tmp_csv, "w", newline="", encoding="utf-8") as f:
        doc = build_summary(session_dir, RequestsCsv(f, origin).add)
    tmp_csv.replace(csv_path)
    doc = _clean(doc)
    written = [csv_path]
    shot = None
    if screenshot_svg is not None:
        shot = (
            Path(screenshot_svg).read_text()
            if isinstance(screenshot_svg, Path)
            else str(screenshot_svg)
        )
        (out / "screenshot.svg").write_text(shot, encoding="utf-8")
        written.append(out / "screenshot.svg")
    write_json_atomic(out / "report.json", doc)
    for name, text in (
        ("report.md", render_markdown(doc)),
        ("report.html", render_html(doc, shot)),
    ):
        tmp = out / (name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out / name)
    written += [out / "report.json", out / "report.md", out / "report.html"]
    return written


def load_report(path: Path) -> dict[str, Any]:
    """A report document from a ``report.json`` file or a session directory (rebuilt)."""
    path = Path(path)
    if path.is_dir():
        return _clean(build_summary(path))
    return json.loads(path.read_text())

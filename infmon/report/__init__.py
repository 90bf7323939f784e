"""Session reports: ``write_reports(session_dir)`` → report.md, .html, .json, requests.csv."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from infmon.journal.reader import SessionReader
from infmon.journal.safefile import atomic_open, private_dir, write_text_atomic
from infmon.journal.writer import JournalStatus
from infmon.report.doc import ReportDoc
from infmon.report.docjson import json_ready, write_report_json

if TYPE_CHECKING:  # numpy's columns, imported by the summary only when a report is built
    from infmon.model.records.columns import RecordColumns

__all__ = ["build_summary", "fallback_dir", "report_dir", "write_reports"]


def build_summary(
    session_dir: Path, on_columns: Callable[[RecordColumns], None] | None = None
) -> ReportDoc:
    """The report document of a session (``infmon.report.summary.build_summary``)."""
    from infmon.report.summary import build_summary as build

    return build(Path(session_dir), on_columns)


def report_dir(session_dir: Path, out_dir: Path | None = None) -> Path:
    """Where reports go: ``out_dir`` if given, else the session directory if it can be
    written, else this run's private ``fallback_dir`` (a full or read-only disk, a directory
    another user owns)."""
    from infmon.journal.store import SessionDirError, check_session_dir

    if out_dir is not None:
        return Path(out_dir)
    try:
        return check_session_dir(Path(session_dir))
    except SessionDirError:
        return fallback_dir(session_dir)


def fallback_dir(session_dir: Path) -> Path:
    """A private directory (``$TMPDIR/infmon-reports-<session name>-XXXXXXXX``, mode 0700)
    made for this process; the same one for every report it writes of this session."""
    return private_dir(Path(session_dir).resolve())


def write_reports(
    session_dir: Path,
    out_dir: Path | None = None,
    screenshot_svg: str | Path | None = None,
    journal_status: JournalStatus | None = None,
) -> list[Path]:
    """Rebuild every report of a session directory (offline); returns the files written.
    ``journal_status`` (the writer's, at the end of a run) adds what the disk refused; when
    the reports cannot be written where they belong they go to ``fallback_dir``."""
    if journal_status is not None and journal_status.rescued_dir:  # the whole record moved
        session_dir = Path(journal_status.rescued_dir)
    out = report_dir(session_dir, out_dir)
    try:
        return _write_reports(Path(session_dir), out, screenshot_svg, journal_status)
    except OSError:
        if out_dir is not None or out.resolve() != Path(session_dir).resolve():
            raise
        return _write_reports(
            Path(session_dir), fallback_dir(session_dir), screenshot_svg, journal_status
        )


def _write_reports(
    session_dir: Path,
    out: Path,
    screenshot_svg: str | Path | None,
    journal_status: JournalStatus | None,
) -> list[Path]:
    from infmon.report.csvout import RequestsCsv
    from infmon.report.html import render_html
    from infmon.report.markdown import render_markdown

    out.mkdir(parents=True, exist_ok=True)
    origin = SessionReader(session_dir).origin_s()
    csv_path = out / "requests.csv"
    with atomic_open(csv_path, newline="") as f:
        doc = build_summary(session_dir, RequestsCsv(f, origin).add_columns)
    _note_journal(doc, journal_status, out, session_dir)
    doc = json_ready(doc)
    written = [csv_path]
    shot = None
    if screenshot_svg is not None:
        shot = (
            Path(screenshot_svg).read_text()
            if isinstance(screenshot_svg, Path)
            else str(screenshot_svg)
        )
        write_text_atomic(out / "screenshot.svg", shot)
        written.append(out / "screenshot.svg")
    write_report_json(out / "report.json", doc)
    for name, text in (
        ("report.md", render_markdown(doc)),
        ("report.html", render_html(doc, shot)),
    ):
        write_text_atomic(out / name, text)
    written += [out / "report.json", out / "report.md", out / "report.html"]
    return written


def _note_journal(
    doc: ReportDoc, status: JournalStatus | None, out: Path, session_dir: Path
) -> None:
    """What the disk refused, in the document and first among its caveats."""
    notes = []
    if status is not None:
        doc["session"]["journal"] = status.to_dict()
        if not status.ok:
            notes.append(_journal_note(status))
    if out.resolve() != Path(session_dir).resolve():
        doc["session"]["reports_dir"] = str(out)
        notes.append(f"Reports written to {out} (not the session directory).")
    doc["caveats"] = notes + list(doc.get("caveats") or [])


def _journal_note(status: JournalStatus) -> str:
    """The report's first caveat when the disk failed: what it holds, what it leaves out."""
    head = f"{status.line() or 'journal: write errors'}."
    if status.rescued_dir:
        head += (
            f" This report is built from that copy, with the {status.rescued_records:,} "
            "records the session directory refused."
        )
    if status.held_records:
        head += (
            f" {status.held_records:,} records were held in memory and never reached the "
            "journal, so the figures leave them out."
        )
    if status.unwritten_records:
        head += (
            f" {status.unwritten_records:,} records were lost (never written), so the "
            "figures leave them out."
        )
    return head

"""``report.md``: a session report to paste into a PR or a chat."""

from __future__ import annotations

from infmon.model.base.sanitize import clean
from infmon.report import gpu, perreq, server_detail, trials
from infmon.report.doc import KneeInfo, ReportDoc, WorkloadInfo
from infmon.report.faults import fault_lines
from infmon.report.fmt import DASH, STEP_HEADER, mark_text, num, pct, server_rows, step_row
from infmon.report.stepstats import slo_verdict_of


def md_escape(text: object) -> str:
    """Untrusted text inside a Markdown table: no HTML, no pipes, one line, and no control or
    bidi characters (they are shown escaped, ``\\x1b``); ``[`` escaped, so a value is never a
    link (``[x](javascript:…)``) or an image."""
    s = clean(str(text).replace("\r\n", " ").replace("\n", " ").replace("\t", " "), None)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return s.replace("|", "\\|").replace("`", "\\`").replace("[", "\\[")


def _table(header: tuple[str, ...] | list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]
    return out


def _workload_lines(w: WorkloadInfo) -> list[str]:
    """One line naming what was sent (the trace, when one was replayed)."""
    if not w:
        return []
    parts = [f"workload {w.get('workload')}", f"prompts {w.get('sizing')}"]
    parts.append(f"prompt tokens {w.get('prompt_tokens')}, output {w.get('output_tokens')}")
    if w.get("shared_prefix_tokens"):
        parts.append(
            f"shared prefix {w['shared_prefix_tokens']} tokens × {w.get('prefix_groups')} groups"
        )
    if (w.get("turns") or 1) > 1:
        parts.append(f"{w['turns']} turns per conversation")
    if w.get("trace"):
        parts.append(f"trace {w['trace']}")
    if w.get("schedule"):
        parts.append(f"schedule {w['schedule']}")
    parts.append(f"seed {w.get('seed')}")
    return [md_escape(" · ".join(parts)), ""]


def _journal_warning(journal: dict[str, object] | None) -> list[str]:
    """A disk that refused the record is said before anything else (the figures depend on it)."""
    line = (journal or {}).get("line")
    return [f"> **Warning:** {md_escape(line)}", ""] if line else []


def render_markdown(doc: ReportDoc) -> str:
    s = doc.get("session") or {}
    target = doc.get("target") or {}
    out = [
        f"# infmon report: {md_escape(s.get('label') or s.get('dir') or 'session')}",
        "",
        *_journal_warning(s.get("journal")),
        f"{md_escape(target.get('model') or DASH)} at {md_escape(target.get('url') or DASH)}"
        f" · {num(s.get('requests'))} requests, {num(s.get('failed'))} failed"
        + (f", {num(s['cancelled'])} cancelled" if s.get("cancelled") else ""),
        "",
        *(
            [f"Load thread: {md_escape(str(target['load_thread']))}", ""]
            if target.get("load_thread")
            else []
        ),
        *_workload_lines(doc.get("workload") or {}),
        "## Server",
        "",
    ]
    out += _table(("", "value"), [list(r) for r in server_rows(doc)])
    out += ["", "## Steps", ""]
    out += _table(STEP_HEADER, [step_row(st) for st in doc.get("steps") or []])
    knee, slo = doc.get("knee"), slo_verdict_of(doc)
    out += [
        "",
        f"**Knee:** {md_escape(_knee_text(knee))}  ",
        f"**SLO limit:** {slo.text()}",
        "",
    ]
    out += trials.markdown_lines(doc, _table)
    out += gpu.markdown_lines(doc, _table)
    out += perreq.markdown_lines(doc, _table)
    out += server_detail.markdown_lines(doc, _table)
    out += ["## Diagnosis", ""] + [
        f"- {md_escape(x)}" for x in doc.get("diagnosis") or ["Nothing notable."]
    ]
    q = doc.get("quality")
    if q:
        out += [
            "",
            "## Output quality",
            "",
            f"{num(q.get('probes'))} probes · accuracy {pct(q.get('accuracy'))}"
            + (
                f" · agreement with baseline {pct(q.get('agreement'))}"
                if q.get("agreement") is not None
                else ""
            ),
        ]
    marks = [e for e in doc.get("events") or [] if e.get("kind") in ("mark", "baseline")]
    if marks:
        out += ["", "## Marks", ""]
        out += [f"- {num(e.get('t_s'))} s · {md_escape(mark_text(e))}" for e in marks]
    faults = fault_lines(doc)
    if faults:
        out += ["", "## Faults", ""] + [f"- {md_escape(x)}" for x in faults]
    out += ["", "## Caveats", ""] + [f"- {md_escape(x)}" for x in doc.get("caveats") or []]
    return "\n".join(out) + "\n"


def _knee_text(knee: KneeInfo | None) -> str:
    if not knee:
        return "not found within these steps"
    tail = "" if knee.get("confirmed", True) else " — not yet confirmed: no higher level held"
    return f"c={knee.get('concurrency')} ({knee.get('reason', '')}){tail}"

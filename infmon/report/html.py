"""``report.html``: one self-contained page (inline CSS and SVG, no script, strict CSP).

Everything that came from the server or the operator (model output, labels, URLs) is
escaped, and the page's Content-Security-Policy forbids scripts outright.
"""

from __future__ import annotations

import base64
import re

from infmon.model.base.sanitize import html_text
from infmon.report import gpu, svg
from infmon.report.doc import QualityInfo, ReportDoc
from infmon.report.faults import fault_lines
from infmon.report.fmt import (
    STEP_HEADER,
    concurrency_axis,
    mark_text,
    num,
    pct,
    server_rows,
    step_row,
)
from infmon.report.markdown import _knee_text
from infmon.report.stepstats import slo_verdict_of

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;padding:0 16px;max-width:1400px;
color:#1d232b}p,ul{max-width:1100px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:13px}td,th{border:1px solid #d8dde3;
padding:3px 5px;text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.w{white-space:normal}td.w span{white-space:nowrap}
th{background:#f1f4f7;vertical-align:bottom;white-space:normal}
td:first-child{text-align:left}.wide{overflow-x:auto}tr.knee td{background:#fff3c4;font-weight:600}
.chart{display:block;margin:10px 0}.plot{fill:#fbfcfd;stroke:#c9d0d8}.grid{stroke:#e6eaee}
.tick{font-size:10px;fill:#5a6470}.axis{font-size:11px;fill:#333}.legend{font-size:11px}
.mark{stroke:#888;stroke-dasharray:3 3}.marklabel{font-size:10px;fill:#555}
pre.out{white-space:pre-wrap;margin:0;font-size:12px;text-align:left;max-width:420px}
.muted{color:#6a737d}
"""


def _table(
    header: list[str] | tuple[str, ...], rows: list[list[str]], marked: int | None = None
) -> str:
    """A table (scrolled sideways when wider than the page: a cell never wraps mid-figure);
    row ``marked`` (the knee's) highlighted."""
    head = "".join(f"<th>{html_text(h)}</th>" for h in header)
    body = "".join(
        ('<tr class="knee">' if i == marked else "<tr>") + "".join(_cell(c) for c in r) + "</tr>"
        for i, r in enumerate(rows)
    )
    return f'<div class="wide"><table><tr>{head}</tr>{body}</table></div>'


FIGURE_JOINTS = re.compile(r"(?<=[/,]) | (?=\()")
"""Where a cell may wrap: after "p50 / " or ", ", before " (": between figures."""


def _cell(value: object) -> str:
    """A cell, each run of its text between ``FIGURE_JOINTS`` kept on one line: a narrow
    window wraps "58.8 / 59.3 / 59.4" between its figures, never inside one."""
    runs = FIGURE_JOINTS.split(str(value))
    if len(runs) == 1:
        return f"<td>{html_text(runs[0])}</td>"
    return '<td class="w">' + " ".join(f"<span>{html_text(r)}</span>" for r in runs) + "</td>"


def _knee_row(doc: ReportDoc) -> int | None:
    """The steps table's row of the knee (its concurrency's first step)."""
    knee = doc.get("knee")
    c = knee["concurrency"] if knee else None
    steps = doc.get("steps") or []
    return next(
        (i for i, s in enumerate(steps) if c is not None and s.get("concurrency") == c), None
    )


def _marks(doc: ReportDoc) -> tuple[tuple[float, str], ...]:
    out = []
    for e in doc.get("events") or []:
        kind = e.get("kind")
        if kind in ("mark", "baseline", "step_begin", "step_start"):
            out.append((e["t_s"], mark_text(e)))
    return tuple(out[-40:])


def _s(ms: object) -> float | None:
    return ms / 1e3 if isinstance(ms, (int, float)) else None


def charts(doc: ReportDoc) -> list[str]:
    tl, stl, steps = doc.get("timeline") or [], doc.get("server_timeline") or [], doc["steps"]
    marks, out = _marks(doc), []
    t = tuple(p["t_s"] for p in tl)
    ts = tuple(p["t_s"] for p in stl)
    out.append(
        svg.render(
            svg.Chart(
                "Throughput over time",
                "session time (s)",
                "output tokens/s",
                (
                    svg.Series("client out tok/s", t, svg.column(tl, "out_tok_s")),
                    svg.Series("server gen tok/s", ts, svg.column(stl, "gen_tok_s")),
                ),
                marks,
            )
        )
    )
    out.append(
        svg.render(
            svg.Chart(
                "Latency over time",
                "session time (s)",
                "TTFT mean (ms)",
                (
                    svg.Series("TTFT mean ms", t, svg.column(tl, "ttft_ms_mean")),
                    svg.Series(
                        "E2EL mean s", t, svg.column(tl, "e2el_ms_mean", 1e-3), right_axis=True
                    ),
                ),
                marks,
                y2_label="E2EL mean (s)",
            )
        )
    )
    out.append(  # its own axis: beside TTFT's seconds of queueing, TPOT's ms would be a flat line
        svg.render(
            svg.Chart(
                "Time per output token over time",
                "session time (s)",
                "TPOT mean (ms)",
                (svg.Series("TPOT mean ms", t, svg.column(tl, "tpot_ms_mean")),),
                marks,
            )
        )
    )
    xs = concurrency_axis(steps)
    if steps and xs is not None:
        vmarks: list[tuple[float, str]] = []
        if knee := doc.get("knee"):
            vmarks.append((knee["concurrency"], "knee"))
        if (slo := slo_verdict_of(doc)).reached and slo.limit is not None:
            vmarks.append((slo.limit, "SLO limit"))
        out.append(
            svg.render(
                svg.Chart(
                    "Throughput and latency vs concurrency",
                    "concurrency (log2)",
                    "output tokens/s",
                    (
                        svg.Series(
                            "out tok/s",
                            xs,
                            tuple(s.get("output_throughput_tok_s") for s in steps),
                            points=True,
                        ),
                        svg.Series(
                            "E2EL p50 s",
                            xs,
                            tuple(_s((s.get("e2el_ms") or {}).get("p50")) for s in steps),
                            points=True,
                            right_axis=True,
                        ),
                    ),
                    tuple(vmarks),
                    log2_x=True,
                    y2_label="E2EL p50 (s)",
                    x_from=1.0,
                )
            )
        )
    out.append(
        svg.render(
            svg.Chart(
                "Server KV cache and queue",
                "session time (s)",
                "KV usage (%)",
                (
                    svg.Series("KV usage %", ts, svg.column(stl, "kv_usage", 100.0)),
                    svg.Series("running", ts, svg.column(stl, "running"), right_axis=True),
                    svg.Series("waiting", ts, svg.column(stl, "waiting"), right_axis=True),
                ),
                marks,
                y2_label="requests",
            )
        )
    )
    if any(p.get("acceptance_rate") is not None for p in stl):
        out.append(
            svg.render(
                svg.Chart(
                    "Speculative decoding",
                    "session time (s)",
                    "acceptance rate",
                    (
                        svg.Series("acceptance rate", ts, svg.column(stl, "acceptance_rate")),
                        svg.Series(
                            "mean acceptance length",
                            ts,
                            svg.column(stl, "mean_acceptance_length"),
                            right_axis=True,
                        ),
                    ),
                    marks,
                    y2_label="tokens per step",
                )
            )
        )
    else:
        out.append('<p class="muted">Speculative decoding: no metrics in this session.</p>')
    return out


def _quality(q: QualityInfo | None) -> str:
    if not q:
        return '<p class="muted">No quality run in this session.</p>'
    head = (
        f"<p>{num(q.get('probes'))} probes · accuracy {pct(q.get('accuracy'))}"
        + (f" · agreement {pct(q.get('agreement'))}" if q.get("agreement") is not None else "")
        + "</p>"
    )
    rows = []
    for r in q.get("results") or []:
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{html_text(str(v))}</td>"
                for v in (r.get("id"), r.get("expect"), "✓" if r.get("correct") else "✗")
            )
            + f'<td><pre class="out">{html_text(str(r.get("output") or ""), multiline=True)}</pre></td></tr>'
        )
    table = (
        "<table><tr><th>probe</th><th>expected</th><th>ok</th><th>output</th></tr>"
        + "".join(rows)
        + "</table>"
    )
    return head + table


def _faults(doc: ReportDoc) -> list[str]:
    lines = fault_lines(doc)
    if not lines:
        return []
    return ["<h2>Faults</h2><ul>", *(f"<li>{html_text(x)}</li>" for x in lines), "</ul>"]


def render_html(doc: ReportDoc, screenshot_svg: str | None = None) -> str:
    s, target = doc.get("session") or {}, doc.get("target") or {}
    title = html_text(f"infmon report: {s.get('label') or s.get('dir') or 'session'}")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>{title}</title><style>{CSS}</style></head><body>",
        f"<h1>{title}</h1>",
        *(
            [f'<p class="warn"><b>Warning:</b> {html_text(str(line))}</p>']
            if (line := (s.get("journal") or {}).get("line"))
            else []
        ),
        f"<p>{html_text(str(target.get('model') or '—'))} at {html_text(str(target.get('url') or '—'))}"
        f" · {num(s.get('requests'))} requests, {num(s.get('failed'))} failed</p>",
        *(
            [f"<p>Load thread: {html_text(str(target['load_thread']))}</p>"]
            if target.get("load_thread")
            else []
        ),
        "<h2>Server</h2>",
        _table(["", "value"], [list(r) for r in server_rows(doc)]),
        "<h2>Steps</h2>",
        _table(STEP_HEADER, [step_row(x) for x in doc.get("steps") or []], _knee_row(doc)),
        f"<p><b>Knee:</b> {html_text(_knee_text(doc.get('knee')))} · <b>SLO limit:</b> "
        f"{html_text(slo_verdict_of(doc).text())}</p>",
        "<h2>Charts</h2>",
        *charts(doc),
        *gpu.html_parts(doc, _table),
        "<h2>Diagnosis</h2><ul>",
        *(f"<li>{html_text(x)}</li>" for x in doc.get("diagnosis") or []),
        "</ul>",
        *_faults(doc),
        "<h2>Output quality</h2>",
        _quality(doc.get("quality")),
        "<h2>Caveats</h2><ul>",
        *(f"<li>{html_text(x)}</li>" for x in doc.get("caveats") or []),
        "</ul>",
    ]
    if screenshot_svg:
        data = base64.b64encode(screenshot_svg.encode()).decode()
        parts += [
            "<h2>Live view</h2>",
            f'<img alt="live view" style="max-width:100%" src="data:image/svg+xml;base64,{data}">',
        ]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"

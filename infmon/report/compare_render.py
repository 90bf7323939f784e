"""Text and HTML renderings of a comparison document."""

from __future__ import annotations

from typing import Any

from infmon.model.sanitize import html_text
from infmon.report.compare import METRICS
from infmon.report.fmt import num
from infmon.report.html import CSP, CSS

SHOWN = (
    "out_tok_s",
    "ttft_p50_ms",
    "tpot_p50_ms",
    "itl_p50_ms",
    "e2el_p50_ms",
    "goodput_req_s",
    "kv_usage_max",
    "acceptance",
)
LABELS = {m[0]: m[1] for m in METRICS}


def cell_text(cell: dict[str, Any]) -> str:
    value = cell.get("value")
    text = num(value, 2 if isinstance(value, float) and abs(value) < 10 else 1)
    d = cell.get("delta_pct")
    if d is not None:
        mark = {True: " *", False: " ≈", None: ""}[cell.get("beyond_noise")]
        text += f" ({d:+.0f}%{mark})"
    return text


def _rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for step in doc["steps"]:
        for r in step["runs"]:
            if r["present"]:
                rows.append([str(step["x"]), r["name"], *(cell_text(r[m]) for m in SHOWN)])
    return rows


def render_text(doc: dict[str, Any]) -> str:
    names = [r["name"] for r in doc["runs"]]
    out = [f"compare: baseline {names[0]} vs {', '.join(names[1:])}", ""]
    out += [f"warning: {w}" for w in doc.get("warnings") or []]
    out += [""] if doc.get("warnings") else []
    out += ["server configuration:"]
    for row in doc["config_diff"]:
        flag = "≠" if row["differs"] else " "
        out.append(f"  {flag} {row['key']:<26} " + " | ".join(str(v) for v in row["values"]))
    header = ["c", "run", *(LABELS[m] for m in SHOWN)]
    rows = _rows(doc)
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]
    out += ["", "per step (Δ vs baseline; * beyond noise, ≈ within noise):"]
    out.append("  " + "  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    out += ["  " + "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    out += [
        "",
        "knee / SLO limit: "
        + "; ".join(
            f"{r['name']}: {(r.get('knee') or {}).get('concurrency', '—')} / "
            f"{r.get('slo_max_concurrency') if r.get('slo_max_concurrency') is not None else '—'}"
            for r in doc["runs"]
        ),
    ]
    out += ["", "explanation:"] + [f"  - {line}" for line in doc["explanations"]]
    out += ["", f"noise test: {doc['noise_method']}"]
    return "\n".join(out) + "\n"


def render_html(doc: dict[str, Any]) -> str:
    names = [r["name"] for r in doc["runs"]]
    cfg_rows = "".join(
        f"<tr{' class=diff' if row['differs'] else ''}><td>{html_text(row['key'])}</td>"
        + "".join(f"<td>{html_text(str(v))}</td>" for v in row["values"])
        + "</tr>"
        for row in doc["config_diff"]
    )
    head = "".join(f"<th>{html_text(h)}</th>" for h in ["c", "run", *(LABELS[m] for m in SHOWN)])
    body = "".join(
        "<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in r) + "</tr>" for r in _rows(doc)
    )
    return (
        "\n".join(
            [
                "<!DOCTYPE html>",
                '<html lang="en"><head><meta charset="utf-8">',
                f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
                f"<title>infmon compare</title><style>{CSS} tr.diff td{{background:#fff4d6}}</style>"
                "</head><body>",
                f"<h1>infmon compare: {html_text(' vs '.join(names))}</h1>",
                "<h2>Explanation</h2><ul>",
                *(f"<li>{html_text(x)}</li>" for x in doc["explanations"]),
                "</ul>",
                "<h2>Server configuration</h2>",
                "<table><tr><th></th>"
                + "".join(f"<th>{html_text(n)}</th>" for n in names)
                + "</tr>"
                + cfg_rows
                + "</table>",
                "<h2>Per step</h2><p class=muted>Δ vs baseline; * beyond noise, ≈ within noise.</p>",
                f"<table><tr>{head}</tr>{body}</table>",
                f"<p class=muted>Noise test: {html_text(doc['noise_method'])}</p>",
                "</body></html>",
            ]
        )
        + "\n"
    )

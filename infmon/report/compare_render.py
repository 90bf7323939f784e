"""Text and HTML renderings of a comparison (``infmon.report.compare.Comparison``).

Each cell is the run's figure, its change against the baseline and the noise test's mark from
one computation (``infmon.model.compare.baseline.delta_text``): ``15.9 -70%*`` beyond noise, ``≈``
within noise, ``?`` when too few samples to test.
"""

from __future__ import annotations

import math

from infmon.model.base.sanitize import html_text
from infmon.model.compare.baseline import BY_KEY, LevelComparison, delta_text, unit_label
from infmon.model.compare.noise import METHOD
from infmon.model.compare.spec_econ import MODEL as SPEC_MODEL
from infmon.model.compare.trial_deltas import METHOD as TRIALS_METHOD
from infmon.model.steps.step_levels import by_level
from infmon.report.compare import Comparison, knee_with_limit
from infmon.report.compare_charts import acceptance_chart, findings, overlay_charts
from infmon.report.fmt import DASH
from infmon.report.stepstats import slo_verdict_of

TABLES = (
    ("throughput and medians", ("tok_s", "ttft_p50", "tpot_p50", "itl_p50", "e2e_p50", "goodput")),
    ("90th percentiles and the server", ("ttft_p90", "tpot_p90", "itl_p90", "e2e_p90")),
)
SERVER = ("KV max", "accept")


def _server_cells(cmp: Comparison, i: int, c: LevelComparison) -> list[str]:
    s = by_level(cmp.runs[i].levels).get(c.level)
    ev, spec = (s.server, s.spec) if s is not None else (None, None)
    kv = ev.kv_usage_max if ev is not None else math.nan
    return [
        f"{100 * kv:.0f}%" if math.isfinite(kv) else DASH,
        f"{spec.acceptance_rate:.2f}" if spec is not None else DASH,
    ]


def _rows(cmp: Comparison, keys: tuple[str, ...], server: bool) -> list[list[str]]:
    rows = []
    for level in cmp.levels():
        for i, run in enumerate(cmp.runs):
            c = cmp.cell(i, level)
            if c is None:
                continue
            name = run.name if i == 0 or c.in_baseline else f"{run.name} (not in baseline)"
            cells = [delta_text(c.get(k)) for k in keys]  # type: ignore[arg-type]
            rows.append([level.label, name, *cells, *(_server_cells(cmp, i, c) if server else [])])
    return rows


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    out = ["  " + "  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    out += ["  " + "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return out


def _headers(keys: tuple[str, ...], server: bool) -> list[str]:
    return ["level", "run", *(unit_label(BY_KEY[k]) for k in keys), *(SERVER if server else ())]


def _knees(cmp: Comparison) -> list[str]:
    out = []
    for r in cmp.runs:
        k = knee_with_limit(r)
        slo = slo_verdict_of(r.doc)
        at = k.get("concurrency") if k else None
        text = f"  {r.name}: knee {'c=' + str(at) if at else DASH}"
        if k and k.get("limit_text"):
            text += f" ({k['limit_text']})"
        text += f"; SLO limit {slo.text()}"
        out.append(text)
    return out


def _trial_notes(cmp: Comparison) -> list[str]:
    """``fp8 vs baseline: c=16 over 5 trials each``: where deltas are over repeated trials."""
    notes = []
    for i, run in enumerate(cmp.runs[1:], start=1):
        note = cmp.trials_note(i)
        if note:
            notes.append(f"{run.name} vs {cmp.base.name}: {note}")
    return notes


def _noise_lines(cmp: Comparison) -> list[str]:
    notes = _trial_notes(cmp)
    if not notes:
        return [f"noise test: {METHOD}"]
    return [
        *(f"deltas over repeated trials: {n}" for n in notes),
        f"noise test at those levels: {TRIALS_METHOD}",
        f"noise test elsewhere: {METHOD}",
    ]


def render_text(cmp: Comparison) -> str:
    names = [r.name for r in cmp.runs]
    out = [f"compare: baseline {names[0]} vs {', '.join(names[1:])}", ""]
    out += [*(f"finding: {x}" for x in findings(cmp)), ""] if len(cmp.runs) > 1 else []
    out += [f"warning: {w}" for w in cmp.warnings]
    out += [""] if cmp.warnings else []
    for run, view in zip(cmp.runs[1:], cmp.views, strict=True):
        if view.changes:
            out.append(f"{run.name} vs {names[0]}: " + " · ".join(view.changes))
    out += ["server configuration:"]
    for row in cmp.config:
        flag = "≠" if row.differs else " "
        shown = " | ".join(DASH if v is None else str(v) for v in row.values)
        out.append(f"  {flag} {row.key:<26} {shown}")
    for i, (title, keys) in enumerate(TABLES):
        server = i == len(TABLES) - 1
        out += [
            "",
            f"per level, {title} (Δ vs baseline; * beyond noise, ≈ within noise, ? too few samples to test):",
            *(f"  over trials: {n}" for n in _trial_notes(cmp)),
        ]
        out += _table(_headers(keys, server), _rows(cmp, keys, server))
    out += ["", "knee / SLO limit:", *_knees(cmp)]
    out += ["", "explanation:"] + [f"  - {line}" for line in cmp.explanations]
    out += ["", *_noise_lines(cmp), f"spec decoding model: {SPEC_MODEL}"]
    return "\n".join(out) + "\n"


def render_html(cmp: Comparison) -> str:
    from infmon.report.html import CSP, CSS

    names = [r.name for r in cmp.runs]
    cfg = "".join(
        f"<tr{' class=diff' if row.differs else ''}><td>{html_text(row.key)}</td>"
        + "".join(f"<td>{html_text(DASH if v is None else str(v))}</td>" for v in row.values)
        + "</tr>"
        for row in cmp.config
    )
    tables = []
    for i, (title, keys) in enumerate(TABLES):
        server = i == len(TABLES) - 1
        head = "".join(f"<th>{html_text(h)}</th>" for h in _headers(keys, server))
        body = "".join(
            "<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in r) + "</tr>"
            for r in _rows(cmp, keys, server)
        )
        tables.append(f"<h3>{html_text(title)}</h3><table><tr>{head}</tr>{body}</table>")
    changes = "".join(
        f"<li>{html_text(run.name)}: {html_text(' · '.join(v.changes))}</li>"
        for run, v in zip(cmp.runs[1:], cmp.views, strict=True)
        if v.changes
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>infmon compare: {html_text(' vs '.join(names))}</title><style>{CSS} tr.diff td{{background:#fff4d6}}</style>"
        "</head><body>",
        f"<h1>infmon compare: {html_text(' vs '.join(names))}</h1>",
        *(f"<p><b>warning:</b> {html_text(w)}</p>" for w in cmp.warnings),
        "<h2>Findings</h2><ul>",
        *(f"<li>{html_text(x)}</li>" for x in findings(cmp)),
        "</ul>",
        "<h2>Charts</h2>",
        *overlay_charts(cmp),
        acceptance_chart(cmp) or "",
        "<h2>Explanation</h2><ul>",
        *(f"<li>{html_text(x)}</li>" for x in cmp.explanations),
        "</ul>",
        f"<h2>What changed</h2><ul>{changes}</ul>" if changes else "",
        "<h2>Server configuration</h2>",
        "<table><tr><th></th>"
        + "".join(f"<th>{html_text(n)}</th>" for n in names)
        + "</tr>"
        + cfg
        + "</table>",
        "<h2>Per level</h2><p class=muted>Δ vs baseline; * beyond noise, ≈ within noise, ? too few samples to test.</p>",
        *tables,
        "<h2>Knee</h2><ul>",
        *(f"<li>{html_text(x.strip())}</li>" for x in _knees(cmp)),
        "</ul>",
        *(f"<p class=muted>{html_text(x[0].upper() + x[1:])}</p>" for x in _noise_lines(cmp)),
        f"<p class=muted>Spec decoding model: {html_text(SPEC_MODEL)}</p>",
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"

"""What went wrong in a session, as plain lines: failed requests by kind, outages, restarts.

Both report writers show these lines (escaped their own way), so an outage the operator lived
through is in the report with its times, not only in the raw record.
"""

from __future__ import annotations

from collections import Counter

from infmon.report.doc import ReportDoc

FAULT_KINDS = ("server_down", "server_up", "restart")


def fault_lines(doc: ReportDoc) -> list[str]:
    """Empty when every request succeeded and the server never went away."""
    kinds: Counter[str] = Counter()
    for step in doc.get("steps") or []:
        for kind, n in (step.get("errors_by_kind") or {}).items():
            kinds[str(kind)] += int(n)
    lines = []
    if kinds:
        lines.append(
            "failed requests by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common())
        )
    for e in doc.get("events") or []:
        event_kind, t = e.get("kind"), e.get("t_s")
        if event_kind not in FAULT_KINDS or not isinstance(t, (int, float)):
            continue
        if event_kind == "server_down":
            what = f"server unreachable ({e.get('error_kind') or 'error'}: {e.get('error') or ''})".replace(
                ": )", ")"
            )
        elif event_kind == "server_up":
            down = e.get("down_s")
            what = "server back" + (
                f" after {down:.1f} s" if isinstance(down, (int, float)) else ""
            )
        else:
            what = "server restarted (counters reset)"
        lines.append(f"{t:.1f} s · {what}")
    return lines

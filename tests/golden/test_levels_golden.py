"""Golden level samples (issue 32, "StepLedger absorbs LevelBuilder"): what a comparison of
runs resamples, built from recorded sessions (their report's ledger), a report.json with its
requests.csv, a ``vllm bench serve`` file, and a live session fed through the run's wiring
(with and without an SLO, speculating), fingerprinted array by array and compared with the
fingerprints taken before the level builder moved into the step ledger (regenerate:
UPDATE_GOLDEN=1, after reading the diff)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from dataclasses import fields, is_dataclass
from pathlib import Path

import numpy as np

from infmon.clock import FakeClock
from infmon.model.compare.baseline import Reference
from infmon.model.records.measures import SLO
from infmon.model.steps.step_levels import by_level
from infmon.report.runs import load_run
from tests.recorded import unpack_journal
from tests.ui.fakes import new_session
from tests.unit.test_live_baseline import _sweep

FIXTURES = Path(__file__).parents[1] / "fixtures"
SESSIONS = FIXTURES / "sessions"
GOLDEN = Path(__file__).parent / "recorded" / "levels.fingerprint.json.golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def _fp(x: object) -> object:
    """Every field; an array as its dtype, shape and a hash of its bytes."""
    if isinstance(x, np.ndarray):
        digest = hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()[:16]
        return [str(x.dtype), list(x.shape), digest]
    if is_dataclass(x) and not isinstance(x, type):
        return {f.name: _fp(getattr(x, f.name)) for f in fields(x)}
    if isinstance(x, (tuple, list)):
        return [_fp(v) for v in x]
    return repr(x)


def _with_slo(src: Path, dst: Path) -> Path:
    """A copy of a recorded session whose configuration had an SLO (goodput by bin)."""
    shutil.copytree(src, dst)
    db = sqlite3.connect(dst / "journal.sqlite")
    try:
        cfg = json.loads(db.execute("SELECT value FROM meta WHERE key='config'").fetchone()[0])
        cfg["slo"] = {"ttft_s": 0.075, "tpot_s": 0.0195, "e2el_s": 2.8}
        db.execute("UPDATE meta SET value=? WHERE key='config'", (json.dumps(cfg),))
        db.commit()
    finally:
        db.close()
    return dst


def _recorded(tmp: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for name in ("bench-sim", "monitor-sim", "jsonl-v1"):
        shutil.copytree(SESSIONS / name, tmp / name)
        out[name] = _fp(load_run(tmp / name).levels)
    for name in ("bench-sim", "monitor-sim"):
        out[f"{name}-slo"] = _fp(load_run(_with_slo(SESSIONS / name, tmp / f"{name}-slo")).levels)
    out["demo-knee"] = _fp(load_run(unpack_journal("demo-knee", tmp / "demo")).levels)
    rep = tmp / "rep"
    rep.mkdir()
    shutil.copy(SESSIONS / "jsonl-v1.report.json", rep / "report.json")
    shutil.copy(SESSIONS / "jsonl-v1.requests.csv", rep / "requests.csv")
    out["report-json"] = _fp(load_run(rep / "report.json").levels)
    vllm = FIXTURES / "vllm-bench-serve-result.json"
    out[vllm.name] = _fp(load_run(vllm).levels)
    return out


def _live(slo: SLO | None, tag: str, slow: float) -> dict[str, object]:
    clock = FakeClock(0.0)
    base = new_session(clock, slo)
    base.method.levels.keep_requests = True
    _sweep(base, clock, spec=None)
    samples = base.method.levels.samples(clock.now(), {})
    ref = Reference("baseline", "runs/baseline", by_level(samples), base.facts())
    session = new_session(clock, slo)
    session.set_reference(ref, clock.now())
    _sweep(session, clock, spec=0.3, slow=slow)
    clock.advance(3.0)
    snap = session.snapshot(clock.now())
    got = session.baseline_inputs(clock.now())
    assert got is not None
    out = {f"{tag}-ref": _fp(tuple(ref.levels.values())), f"{tag}-samples": _fp(got[1])}
    out[f"{tag}-view"] = _fp(snap.baseline)
    out[f"{tag}-spec"] = _fp(snap.server.spec)
    return out


def test_level_samples_match_their_golden_fingerprints(tmp_path):
    slo = SLO(ttft_s=0.02, e2el_s=0.5)
    got = {**_recorded(tmp_path), **_live(None, "live", 3.0), **_live(slo, "live-slo", 2.0)}
    text = json.dumps(got, indent=1, sort_keys=True) + "\n"
    if UPDATE or not GOLDEN.exists():
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "level samples changed; review, then UPDATE_GOLDEN=1"

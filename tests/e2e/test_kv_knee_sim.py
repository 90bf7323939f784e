"""The KV prediction on ``tiny-kv`` (issue 20, must show 3).

From ``cache_config_info`` (blocks × block size) and the workload's mean prompt + output tokens
infmon predicts the concurrency at which KV fills; on the simulator's ``tiny-kv`` scenario the
prediction must lie within one doubling of the first swept level where the server reports
preemptions, and the knee's limit must say KV cache (10 s steps: every step has the 20
requests the knee rule needs).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from infmon.model.steps.knee import find_knee
from infmon.model.steps.kv_fill import KV, knee_limit
from infmon.report.runs import load_run
from infmon.report.stepstats import knee_points
from tests.conftest import REPO, infmon_cmd, running_sim

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
LEVELS = (4, 8, 16, 32, 64)


def test_predicted_kv_fill_is_within_a_doubling_of_the_first_preemptions(tmp_path) -> None:
    session = tmp_path / "tiny"
    with running_sim("--scenario", "tiny-kv", "--seed", "1") as url:
        r = subprocess.run(
            infmon_cmd(
                "bench", url, "--concurrency", ",".join(map(str, LEVELS)),
                "--step-duration", "10", "--warmup", "1", "--output-tokens", "128",
                "--prompt-tokens", "512", "--seed", "1", "--session-dir", str(session),
            ),
            cwd=REPO, capture_output=True, text=True, timeout=400,
        )  # fmt: skip
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads((session / "report.json").read_text())
    preempting = [
        s["concurrency"]
        for s in doc["steps"]
        if (s.get("server_evidence") or {}).get("preemptions", 0) > 0
    ]
    facts = load_run(session).facts
    fill = facts.kv_fill
    print(
        f"tiny-kv: {facts.kv_blocks:.0f} blocks × {facts.kv_block_size:.0f} tokens, "
        f"{facts.tokens_per_seq:.0f} tokens a sequence → KV fills at c≈{fill:.0f}; "
        f"preemptions from c={preempting[0] if preempting else None}"
    )
    assert preempting, [s.get("server_evidence") for s in doc["steps"]]
    first = preempting[0]
    assert first / 2 <= fill <= first * 2
    knee = find_knee(knee_points(doc["steps"]))
    limit = knee_limit(knee, knee_points(doc["steps"]), fill, facts.max_num_seqs)
    print(f"knee: {knee}; limit: {limit.text}")
    assert knee is not None, [(s["concurrency"], s["eligible"]) for s in doc["steps"]]
    assert limit.kind == KV, limit.text

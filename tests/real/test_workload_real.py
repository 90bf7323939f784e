"""Real workloads on a real vLLM (issue 15): prompts of exactly N tokens through vLLM's own
``/tokenize``, with no local tokenizer, on both endpoints; shared prefixes the prefix cache
serves (more than half of the prompt tokens)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.real.harness import explain, infmon, rs

pytestmark = pytest.mark.real_server


def bench(url: str, out: Path, *args: str) -> dict:
    proc = infmon(
        "bench",
        url,
        "--json",
        str(out / "bench.json"),
        "--session-dir",
        str(out / "s"),
        "--warmup",
        "0s",
        *args,
        cwd=out.parent,
    )
    assert proc.returncode == 0, explain(proc)
    data = json.loads((out / "bench.json").read_text())
    data["stdout"] = proc.stdout
    data["report"] = json.loads((out / "s" / "report.json").read_text())
    return data


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_prompt_lengths_are_exact_on_real_vllm(
    vllm: rs.Server, endpoint: str, tmp_path: Path
) -> None:
    for n in (32, 256, 900):  # 900 + 8 output tokens fits the tiny model's 1024
        out = tmp_path / f"{endpoint}-{n}"
        out.mkdir()
        data = bench(
            vllm.url,
            out,
            "--endpoint",
            endpoint,
            "--prompt-tokens",
            str(n),
            "--output-tokens",
            "8",
            "--concurrency",
            "2",
            "--step-requests",
            "6",
        )
        p = data["steps"][0]["prompt_lengths"]
        print(f"vLLM {endpoint} --prompt-tokens {n}: server-counted mean {p['counted_mean']}")
        assert p["count"] == 6 and abs(p["counted_mean"] - n) <= 1, p
        assert "exact (the server's /tokenize, vllm)" in data["stdout"]


def test_shared_prefixes_are_served_from_the_prefix_cache(vllm: rs.Server, tmp_path: Path) -> None:
    out = tmp_path / "prefix"
    out.mkdir()
    data = bench(
        vllm.url,
        out,
        "--prompt-tokens",
        "700",
        "--shared-prefix-tokens",
        "512",
        "--prefix-groups",
        "4",
        "--output-tokens",
        "8",
        "--concurrency",
        "4",
        "--step-requests",
        "40",
    )
    rate = data["report"]["steps"][0]["server"]["prefix_hit_rate"]
    print(f"vLLM --shared-prefix-tokens 512 --prefix-groups 4: prefix-cache hit rate {rate:.3f}")
    assert rate is not None and rate > 0.5
    p = data["steps"][0]["prompt_lengths"]
    assert abs(p["counted_mean"] - 700) <= 1, p
    md = (out / "s" / "report.md").read_text()
    assert "shared prefix 512 tokens × 4 groups" in md

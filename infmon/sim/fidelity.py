"""The published GPU measurements the simulator is calibrated against, and its predictions.

Each point names its source, the vLLM setup it was measured with, and the figure; ``evaluate``
runs ``--predict`` for it. ``bench/sim_fidelity.py`` prints the table, a unit test holds every
ratio inside ``BAND``. Where a source gives an inequality (a slowdown), the point is a shape
check: ``published`` is the bound and ``ok`` says whether the prediction is on the right side.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from infmon.sim.predict import LoadSpec, Prediction, predict
from infmon.sim.scenarios import Scenario, build_config

BAND = (0.75, 1.33)
QWEN = "Qwen2.5 speed benchmark (QwenLM/Qwen2.5 speed_benchmark.rst), A100 80GB, vLLM 0.6.3"
GPUSTACK = "GPUStack performance-lab qwen3-8b/h100-latency.md, H100 SXM, vLLM 0.11.0"
PR13849 = "vllm PR #13849, RTX 4090, Qwen2.5-7B-Instruct, k=4"


@dataclass(frozen=True, slots=True)
class Point:
    name: str
    source: str
    published: float
    unit: str
    measure: Callable[[], float]
    bound: str = ""  # "<": the prediction must be below ``published`` (a shape check)


@dataclass(frozen=True, slots=True)
class Result:
    point: Point
    predicted: float

    @property
    def ratio(self) -> float:
        return self.predicted / self.point.published

    @property
    def ok(self) -> bool:
        if self.point.bound == "<":
            return self.predicted < self.point.published
        return BAND[0] <= self.ratio <= BAND[1]


def _run(sc: Scenario, load: LoadSpec, **kw: object) -> Prediction:
    return predict(build_config(sc, **kw), load)


def _qwen(model: str, ctx: int) -> Callable[[], float]:
    sc = Scenario("qwen", "", gpu="A100-80GB", model=model, engine="vllm-0.6-v0")

    def f() -> float:
        # The benchmark's speed is 2,048 tokens over the whole generate() call (prefill too).
        return _run(sc, LoadSpec(1, ctx, 2048, concurrency=1)).output_throughput_tok_s

    return f


def _h100(what: str) -> Callable[[], float]:
    sc = Scenario("h100", "", gpu="H100-80GB", model="Qwen/Qwen3-8B", engine="vllm-v1")
    # ShareGPT, 100 prompts: 23,260 input and 22,061 output tokens in all (the means here).
    load = LoadSpec(100, 233, 221, concurrency=4)

    def f() -> float:
        p = _run(sc, load)
        return {"tpot": p.tpot_ms.mean, "ttft": p.ttft_ms.mean, "tok_s": p.output_throughput_tok_s}[
            what
        ]

    return f


def _rtx4090(method: str, batch: int) -> float:
    """Mean TPOT at ``batch`` streams: no spec, the 0.5B draft or n-gram (k=4)."""
    extra: dict[str, object] = {}
    if method == "draft":
        extra = {
            "drafter": "Qwen/Qwen2.5-0.5B-Instruct",
            "speculative_k": 4,
            "spec_method": "draft_model",
            "acceptance": (0.7, 0.6, 0.5, 0.45),
        }
    elif method == "ngram":
        extra = {"speculative_k": 4, "spec_method": "ngram", "acceptance": (0.25,)}
    sc = Scenario(
        "4090",
        "",
        gpu="RTX-4090",
        model="Qwen/Qwen2.5-7B-Instruct",
        engine="vllm-0.7-v0-spec",
        max_model_len=4096,
    )
    load = LoadSpec(max(8, 2 * batch), 256, 256, concurrency=batch)
    return _run(sc, load, **extra).tpot_ms.mean


def points() -> list[Point]:
    out: list[Point] = []
    qwen = {
        "Qwen/Qwen2.5-7B-Instruct": (84.28, 80.70, 77.69, 70.30),
        "Qwen/Qwen2.5-3B-Instruct": (127.61, 123.15, 117.35, 105.88),
        "Qwen/Qwen2.5-1.5B-Instruct": (183.33, 176.68, 168.69, 152.04),
        "Qwen/Qwen2.5-0.5B-Instruct": (311.55, 304.79, 290.28, 264.51),
        "Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8": (122.01, 112.38, 105.25),
    }
    for model, figures in qwen.items():
        for ctx, pub in zip((1, 6144, 14336, 30720), figures, strict=False):
            name = f"{model.split('/')[-1]} bs1 in={ctx}"
            out.append(Point(name, QWEN, pub, "tok/s", _qwen(model, ctx)))
    out += [
        Point("Qwen3-8B c=4 mean TPOT", GPUSTACK, 7.38, "ms", _h100("tpot")),
        Point("Qwen3-8B c=4 mean TTFT", GPUSTACK, 64.0, "ms", _h100("ttft")),
        Point("Qwen3-8B c=4 output", GPUSTACK, 496.88, "tok/s", _h100("tok_s")),
        Point("no spec bs1 TPOT", PR13849, 15.73, "ms", lambda: _rtx4090("none", 1)),
        Point("no spec bs16 TPOT", PR13849, 18.48, "ms", lambda: _rtx4090("none", 16)),
        Point(
            "0.5B draft bs1 speed-up",
            PR13849,
            1.72,
            "x",
            lambda: _rtx4090("none", 1) / _rtx4090("draft", 1),
        ),
        Point(
            "n-gram bs16 speed-up (slower than none)",
            PR13849,
            1.0,
            "x",
            lambda: _rtx4090("none", 16) / _rtx4090("ngram", 16),
            bound="<",
        ),
    ]
    return out


def evaluate(selected: list[Point] | None = None) -> list[Result]:
    return [Result(p, p.measure()) for p in (selected or points())]

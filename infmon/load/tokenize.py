"""The server's own tokenizer, over HTTP: count a prompt as the server will, with no local one.

Endpoints, tried in this order (one request each):

- vLLM (and SGLang, which copies its shape): ``POST /tokenize`` ``{"model", "prompt"}`` or
  ``{"model", "messages", "add_generation_prompt": true}`` → ``{"count", "tokens"}``;
  ``POST /detokenize`` ``{"model", "tokens"}`` → ``{"prompt"}`` (SGLang: ``{"text"}``).
- llama.cpp: ``POST /tokenize`` ``{"content", "add_special": true}`` → ``{"tokens"}``;
  ``POST /detokenize`` ``{"tokens"}`` → ``{"content"}``.
- TGI: ``POST /tokenize`` ``{"inputs"}`` → a list of tokens.

Where the tokenize endpoint cannot count a chat template (llama.cpp, TGI), or adds special
tokens differently from generation, one probe generation request (``max_tokens`` 1) measures
the difference from its ``usage.prompt_tokens``, and every count is corrected by it. A server
with no tokenize endpoint is counted by ``infmon.load.token_line`` instead (a straight line
through a few probes' ``usage.prompt_tokens``), which also picks between the two; the probe
request, the :class:`Counter` both are and the HTTP helpers they share are here.

Every response is read with a size cap and a deadline (the tokenizer's own, not the
stream's): an answer may be at most 64 KiB plus 16 bytes per byte of its request (a token
id is never longer than the text it stands for, plus JSON), each call ends within 30 s, and
all the calls of one start-up within 60 s. Beyond them the tokenizer is refused, with the
endpoint named (a server answering 15 MB per call held start-up for over 150 s, 377 MB).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from infmon.load.selfcheck import thread_sched
from infmon.load.workload.items import Prompt
from infmon.model.base.sanitize import loads_json

MAX_RESPONSE_BYTES = 32 * 1024 * 1024
"""Largest tokenize answer read (a 1M-token prompt's ids are about 8 MB of JSON)."""
TOKENIZE_TIMEOUT_S = 30.0
"""One tokenizer call, from sending to the last byte of its answer: the server's time (wall
time less this client's own wait for a CPU), and never over ``STARVED_WALL_FACTOR`` times it
in wall time however starved the client."""
STARVED_WALL_FACTOR = 4.0
TOKENIZE_BUDGET_S = 60.0
"""Every tokenizer call of one start-up together: the server's time, not this client's own wait
for a CPU (a starved client's calls are slow by its own waits, which are not the server's)."""
ANSWER_BASE_BYTES = 64 * 1024
ANSWER_BYTES_PER_REQUEST_BYTE = 16


class TokenizeError(Exception):
    """The tokenizer could not be used; ``str()`` is one clean line."""


class TokenizeTimeout(TokenizeError):
    """No complete answer within the call's deadline."""


def _one_line(text: str, limit: int = 200) -> str:
    """Server text made safe to show: printable, one line, bounded."""
    clean = "".join(ch if ch.isprintable() else "?" for ch in " ".join(text.split()))
    return clean[:limit]


async def post_bytes(
    http: httpx.AsyncClient,
    path: str,
    body: dict[str, Any],
    max_bytes: int = MAX_RESPONSE_BYTES,
    deadline_s: float = TOKENIZE_TIMEOUT_S,
) -> tuple[int, bytes]:
    """POST ``body``; (status, body bytes) read up to ``max_bytes`` within ``deadline_s`` of
    the server's time (:func:`server_time_s`)."""
    task = asyncio.ensure_future(_read_capped(http, path, body, max_bytes))
    loop = asyncio.get_running_loop()
    t0, sched0 = loop.time(), thread_sched()
    wall_end = t0 + deadline_s * STARVED_WALL_FACTOR
    left = deadline_s
    try:
        while left > 0 and loop.time() < wall_end:
            await asyncio.wait({task}, timeout=min(left, wall_end - loop.time()))
            if task.done():
                return task.result()
            left = deadline_s - server_time_s(loop.time() - t0, sched0)
        raise TokenizeTimeout(f"{path}: no complete answer within {deadline_s:g} s")
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def server_time_s(wall_s: float, sched0: tuple[float, float, int] | None) -> float:
    """Of ``wall_s`` since ``sched0`` (:func:`thread_sched`), the time that was not this
    thread's own wait for a CPU (the kernel's run-queue wait): the server's time. A client
    starved of CPU is slow by its own waits, which are not the server's."""
    sched1 = thread_sched()
    starved = sched1[1] - sched0[1] if sched0 is not None and sched1 is not None else 0.0
    return max(0.0, wall_s - starved)


async def _read_capped(
    http: httpx.AsyncClient, path: str, body: dict[str, Any], max_bytes: int
) -> tuple[int, bytes]:
    data = bytearray()
    async with http.stream("POST", path, json=body, timeout=TOKENIZE_TIMEOUT_S) as resp:
        async for chunk in resp.aiter_bytes():
            data += chunk
            if len(data) > max_bytes:
                raise TokenizeError(
                    f"{path}: answered over {max_bytes:,} bytes for a "
                    f"{len(json.dumps(body)):,}-byte request (more than any tokenizer would)"
                )
        return resp.status_code, bytes(data)


async def post_json(
    http: httpx.AsyncClient, path: str, body: dict[str, Any], deadline_s: float
) -> tuple[int, Any]:
    """POST ``body``; (status, parsed JSON or None), the answer bounded by the request's size."""
    cap = ANSWER_BASE_BYTES + ANSWER_BYTES_PER_REQUEST_BYTE * len(json.dumps(body))
    status, raw = await post_bytes(http, path, body, min(cap, MAX_RESPONSE_BYTES), deadline_s)
    return status, _json(raw)


class Counter(Protocol):
    """Counts prompts as the server's generation endpoint will (``usage.prompt_tokens``)."""

    exact: bool
    error_tokens: int
    """0 when exact; else the largest miss seen while calibrating (the ± of "approximate")."""

    async def count(self, prompt: Prompt) -> int: ...

    def describe(self) -> str: ...


@dataclass(frozen=True, slots=True)
class TokenizerInfo:
    kind: str
    """"vllm", "llamacpp" or "tgi"."""
    counts_chat: bool
    """The endpoint renders chat messages with the server's template (vLLM, SGLang)."""
    detokenize: bool


class ServerTokenizer:
    """The server's tokenize (and detokenize) endpoints; ``count`` includes the chat template."""

    exact = True
    error_tokens = 0

    def __init__(self, http: httpx.AsyncClient, model: str, chat: bool) -> None:
        self.http, self.model, self.chat = http, model, chat
        self.info: TokenizerInfo | None = None
        self.offset = 0
        """usage.prompt_tokens minus the endpoint's count, measured by :meth:`calibrate`."""
        self.per_message = 0
        """What each chat message beyond the first adds (template not rendered by the endpoint)."""
        self.calls = 0
        self.spent_s = 0.0
        """Time spent in tokenizer calls so far (bounded by ``TOKENIZE_BUDGET_S``)."""

    def describe(self) -> str:
        info = self.info
        kind = info.kind if info else "?"
        extra = f", corrected by {self.offset:+d} from a probe" if self.offset else ""
        return f"exact (the server's /tokenize, {kind}{extra})"

    async def detect(self) -> TokenizerInfo | None:
        """Which tokenize API the server has (None: none of them)."""
        probe = "Hello world"
        status, data = await self._post("/tokenize", {"model": self.model, "prompt": probe})
        if status == 200 and isinstance(data, dict) and isinstance(data.get("tokens"), list):
            msgs = {"model": self.model, "messages": [{"role": "user", "content": probe}]}
            status, chat = await self._post("/tokenize", {**msgs, "add_generation_prompt": True})
            counts_chat = status == 200 and isinstance(chat, dict) and "tokens" in chat
            detok = await self._post("/detokenize", {"model": self.model, "tokens": data["tokens"]})
            self.info = TokenizerInfo("vllm", counts_chat, _detok_text(detok[1]) is not None)
            return self.info
        status, data = await self._post("/tokenize", {"content": probe, "add_special": True})
        if status == 200 and isinstance(data, dict) and isinstance(data.get("tokens"), list):
            detok = await self._post("/detokenize", {"tokens": data["tokens"]})
            self.info = TokenizerInfo("llamacpp", False, _detok_text(detok[1]) is not None)
            return self.info
        status, data = await self._post("/tokenize", {"inputs": probe})
        if status == 200 and isinstance(data, list):
            self.info = TokenizerInfo("tgi", False, False)
            return self.info
        return None

    async def _post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        self.calls += 1
        loop = asyncio.get_running_loop()
        left = TOKENIZE_BUDGET_S - self.spent_s
        if left <= 0:
            raise self._over_budget(path, self.calls - 1)
        t0, sched0 = loop.time(), thread_sched()
        try:
            return await post_json(self.http, path, body, min(TOKENIZE_TIMEOUT_S, left))
        except TokenizeTimeout:
            if left < TOKENIZE_TIMEOUT_S:  # the budget's end, not the call's own deadline
                raise self._over_budget(path, self.calls) from None
            raise
        except httpx.HTTPError as exc:
            raise TokenizeError(f"{path}: {exc.__class__.__name__}") from None
        finally:
            self.spent_s += server_time_s(loop.time() - t0, sched0)

    @staticmethod
    def _over_budget(path: str, calls: int) -> TokenizeError:
        return TokenizeError(
            f"the server's {path} took over {TOKENIZE_BUDGET_S:g} s in {calls:,} calls; too "
            "slow to size prompts with"
        )

    async def token_ids(self, text: str) -> list[int]:
        """The ids of ``text`` as a plain prompt (special tokens as generation adds them)."""
        info = self._info()
        if info.kind == "vllm":
            body: dict[str, Any] = {"model": self.model, "prompt": text}
        elif info.kind == "llamacpp":
            body = {"content": text, "add_special": True}
        else:
            body = {"inputs": text}
        status, data = await self._post("/tokenize", body)
        tokens = data if info.kind == "tgi" else (data or {}).get("tokens")
        if status != 200 or not isinstance(tokens, list):
            raise TokenizeError(f"/tokenize failed (HTTP {status}): {_error(data)}")
        return [int(t) if isinstance(t, int) else 0 for t in tokens]

    async def detokenize(self, ids: list[int]) -> str:
        info = self._info()
        if not info.detokenize:
            raise TokenizeError(f"the {info.kind} server has no /detokenize")
        body: dict[str, Any] = {"tokens": ids}
        if info.kind == "vllm":
            body["model"] = self.model
        status, data = await self._post("/detokenize", body)
        text = _detok_text(data)
        if status != 200 or text is None:
            raise TokenizeError(f"/detokenize failed (HTTP {status}): {_error(data)}")
        return text

    async def raw_count(self, prompt: Prompt) -> int:
        """The endpoint's own count (the chat template included where it can render one)."""
        info = self._info()
        if self.chat and info.counts_chat:
            body = {"model": self.model, "messages": prompt.as_messages()}
            status, data = await self._post("/tokenize", {**body, "add_generation_prompt": True})
            if status != 200 or not isinstance(data, dict):
                raise TokenizeError(f"/tokenize (messages) failed (HTTP {status}): {_error(data)}")
            count = data.get("count")
            return int(count) if isinstance(count, int) else len(data.get("tokens") or ())
        text = prompt.as_text() if not self.chat else "\n".join(c for _, c in prompt_pairs(prompt))
        return len(await self.token_ids(text))

    async def count(self, prompt: Prompt) -> int:
        extra = len(prompt_pairs(prompt)) - 1 if self.chat else 0
        return await self.raw_count(prompt) + self.offset + self.per_message * extra

    async def calibrate(self, sample: Prompt) -> int:
        """Measure ``usage.prompt_tokens − raw_count`` on a probe; where the endpoint cannot
        render the chat template, a second probe with one more message measures what each
        message adds. Returns the offset."""
        self.offset = await self._miss(sample)
        info = self._info()
        if self.chat and not info.counts_chat:
            two = Prompt(messages=(("system", "Be brief."), *prompt_pairs(sample)))
            self.per_message = await self._miss(two) - self.offset
        return self.offset

    async def _miss(self, sample: Prompt) -> int:
        raw = await self.raw_count(sample)
        used = await probe_prompt_tokens(self.http, self.model, self.chat, sample)
        return used - raw if used is not None else 0

    def _info(self) -> TokenizerInfo:
        if self.info is None:
            raise TokenizeError("tokenizer not detected")
        return self.info


def prompt_pairs(prompt: Prompt) -> tuple[tuple[str, str], ...]:
    """The (role, content) pairs of ``prompt``; a plain text is one user message."""
    return prompt.messages if prompt.messages is not None else (("user", prompt.text or ""),)


def _detok_text(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    for key in ("prompt", "text", "content"):
        if isinstance(data.get(key), str):
            return str(data[key])
    return None


def _error(data: Any) -> str:
    if isinstance(data, dict):
        err = data.get("error") or data.get("message") or data.get("detail") or data
        if isinstance(err, dict):
            err = err.get("message") or err
        return _one_line(err if isinstance(err, str) else json.dumps(err))
    return "no JSON answer"


async def probe_prompt_tokens(
    http: httpx.AsyncClient, model: str, chat: bool, prompt: Prompt
) -> int | None:
    """``usage.prompt_tokens`` of one streamed request for 1 token (None: no usage). Asks for
    the usage chunk; a server that rejects ``stream_options`` is asked again without it."""
    body: dict[str, Any] = {"model": model, "max_tokens": 1, "stream": True}
    if chat:
        body["messages"] = prompt.as_messages()
        path = "/v1/chat/completions"
    else:
        body["prompt"] = prompt.as_text()
        path = "/v1/completions"
    for extra in ({"stream_options": {"include_usage": True}}, {}):
        try:
            status, raw = await post_bytes(http, path, {**body, **extra})
        except httpx.HTTPError as exc:
            raise TokenizeError(f"probe {path}: {exc.__class__.__name__}") from None
        if status in (400, 422) and extra:
            continue
        if status != 200:
            raise TokenizeError(f"probe {path} failed (HTTP {status}): {_error(_json(raw))}")
        return _usage_prompt_tokens(raw)
    return None


def _usage_prompt_tokens(raw: bytes) -> int | None:
    """The last ``usage.prompt_tokens`` in an SSE body (or a plain JSON answer)."""
    found = None
    lines = raw.decode("utf-8", "replace").splitlines() or [""]
    for line in lines:
        text = line[5:].strip() if line.startswith("data:") else line.strip()
        if not text.startswith("{"):
            continue
        obj = _json(text.encode())
        usage = obj.get("usage") if isinstance(obj, dict) else None
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            found = int(usage["prompt_tokens"])
    return found


def _json(raw: bytes) -> Any:
    try:
        return loads_json(raw)
    except ValueError:
        return None


async def gather_limited(n: int, coros: list[Any]) -> list[Any]:
    """Run awaitables at most ``n`` at a time (tokenize calls must not flood the server)."""
    sem = asyncio.Semaphore(n)

    async def one(c: Any) -> Any:
        async with sem:
            return await c

    return list(await asyncio.gather(*(one(c) for c in coros)))

"""The load client: one streamed request → one ``RequestRecord``.

Streams go through infmon's own HTTP/1.1 keep-alive pool (``infmon.load.h1`` says why, with
the figures): each read is decoded in the connection's protocol and stamped with its read time;
discovery (``/v1/models``) and injected test transports use one ``httpx.AsyncClient``. Every
request carries a unique ``X-Request-Id`` (``request_id_prefix`` + its id) so server logs and
traces can be joined with its record.

Timestamps are taken once per network read (before decoding), so parsing cost never shows up
as latency. Failures become records with an ``error_kind``; only operator-level problems
(unreachable server, unknown model, rejected probe) raise ``ClientError``. The API key is sent
in the ``Authorization`` header only and is scrubbed from every message this module produces.
Everything the server sends is untrusted: model ids, error bodies and kept text are sanitised
(``infmon.model.base.sanitize``) before they leave this module, discovery reads are bounded in size
and time, and a stream's events and ``usage`` are checked (``stream_state``).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import httpx

from infmon.clock import Clock, MonotonicClock, wall_time
from infmon.config import Config
from infmon.load.backoff import parse_retry_after
from infmon.load.h1 import H1Pool, H1Settings, WireError
from infmon.load.params import (
    ClientError,
    ClientParams,
    ServerCapabilities,
    base_headers,
    http_client,
    tls_of,
)
from infmon.load.sse import SSEError, SSEEventTooLarge
from infmon.load.stall import unless_stalled
from infmon.load.stream_state import (
    StreamFailure,
    StreamState,
    TokenMeter,
    check_complete,
    error_text,
)
from infmon.load.wire import Opened, drain, httpx_post, is_success
from infmon.load.workload.items import Prompt
from infmon.model.base.sanitize import REDACTED, clean, loads_json
from infmon.model.records.request import ErrorKind, RequestRecord
from infmon.net import FetchError, bounded_get

PROBE_ATTEMPTS = 5
"""Tries of the capability probe when the server fails transiently."""
DISCOVERY_MAX_BYTES = 8 * 1024 * 1024
"""The largest ``/v1/models`` answer read (a gateway listing hundreds of models is ~1 MB)."""
DISCOVERY_DEADLINE_S = 30.0
"""``/v1/models`` must answer in full within this (on top of the connect timeout)."""
MAX_MODEL_ID = 300


class StreamingClient:
    """The load client: explicit connection limits and streaming timeouts (no total timeout)."""

    def __init__(
        self,
        config_or_params: Config | ClientParams,
        clock: Clock | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        params = config_or_params
        if isinstance(params, Config):
            params = ClientParams.from_config(params)
        self.params: ClientParams = params
        self.model: str | None = params.model
        self.capabilities: ServerCapabilities | None = None
        self._clock = clock or MonotonicClock()
        self._probe_lock = asyncio.Lock()
        self._path = "/v1/chat/completions" if params.endpoint == "chat" else "/v1/completions"
        self.meter = TokenMeter()
        """Output tokens of every stream as their chunks arrive (the live rate)."""
        self.request_id_prefix = f"infmon-{secrets.token_hex(6)}-"
        """Each request's ``X-Request-Id`` is this prefix and its ``request_id`` (unique per client)."""
        headers = base_headers(params)
        verify = tls_of(params)
        self._http = http_client(params, transport=transport, verify=verify)
        """Discovery (``/v1/models``), and streams too when a transport is injected (tests)."""
        self._wire: H1Pool | None = None
        if transport is None:
            self._wire = H1Pool(
                H1Settings(
                    params.base_url,
                    headers,
                    params.connect_timeout_s,
                    params.read_timeout_s,
                    params.max_connections,
                    verify,
                    self._clock.now,
                )
            )

    def scrub(self, text: str) -> str:
        """Remove the API key from any text that might be shown or recorded."""
        key = self.params.api_key
        return text.replace(key, REDACTED) if key else text

    async def aclose(self) -> None:
        await self._http.aclose()
        if self._wire is not None:
            await self._wire.aclose()

    # ----------------------------------------------------------------- discovery

    async def list_models(self) -> list[str]:
        """Model ids from ``GET /v1/models`` (sanitised); raises ``ClientError`` with a clear
        message. The answer is read up to 8 MiB and within 30 s in all."""
        deadline = self.params.connect_timeout_s + DISCOVERY_DEADLINE_S
        url = self.params.base_url + "/v1/models"
        try:
            resp = await bounded_get(
                self._http, url, max_bytes=DISCOVERY_MAX_BYTES, deadline_s=deadline
            )
        except httpx.HTTPError as exc:
            kind, msg = self._classify(exc)
            raise ClientError(kind, f"{self.params.base_url}: {msg}") from None
        except FetchError as exc:
            kind = ErrorKind.TIMEOUT if "within" in str(exc) else ErrorKind.PROTOCOL
            raise ClientError(kind, f"{url}: {exc}") from None
        if not is_success(resp.status):
            raise ClientError(
                ErrorKind.HTTP,
                self._error_message(resp.status, resp.body, "/v1/models"),
                resp.status,
            )
        try:
            data = loads_json(resp.body).get("data")
            return [clean(m["id"], MAX_MODEL_ID) for m in data]
        except (ValueError, AttributeError, KeyError, TypeError):
            raise ClientError(
                ErrorKind.PROTOCOL,
                f"{self.params.base_url}/v1/models did not answer an OpenAI model list",
            ) from None

    async def resolve_model(self) -> str:
        """Check ``params.model`` against the server's list, or take the first served model.

        An empty list with a model given is trusted: ``transformers serve`` lists only the
        models already in its hub cache, yet serves others by path.
        """
        models = await self.list_models()
        if self.model:
            if models and self.model not in models:
                served = ", ".join(models[:5]) or "none"
                raise ClientError(
                    ErrorKind.HTTP, f"model {self.model!r} is not served here (served: {served})"
                )
            return self.model
        if not models:
            raise ClientError(ErrorKind.PROTOCOL, f"{self.params.base_url} serves no models")
        self.model = models[0]
        return self.model

    async def detect_capabilities(self) -> ServerCapabilities:
        """Probe with a 1-token stream: full vLLM body first, then drop what the server rejects."""
        async with self._probe_lock:
            if self.capabilities is not None:
                return self.capabilities
            trials = [
                ServerCapabilities(True, True),
                ServerCapabilities(True, False),
                ServerCapabilities(False, False),
            ]
            if not self.params.ignore_eos:
                trials = trials[1:]
            last: RequestRecord | None = None
            for caps in trials:
                last = await self._probe(caps)
                if last.ok:
                    caps = replace(caps, per_request_metrics=last.server is not None)
                    self._require_per_request(caps)
                    self.capabilities = caps
                    return caps
                if last.http_status not in (400, 422):
                    break
            assert last is not None
            raise ClientError(
                last.error_kind or ErrorKind.OTHER,
                f"probe request failed: {last.error_message}",
                last.http_status,
            )

    def _require_per_request(self, caps: ServerCapabilities) -> None:
        """``--per-request-metrics``: vLLM's API has no per-request switch (0.32: the server
        flag decides), so asking means checking the probe's answer and saying what to do."""
        if self.params.require_per_request_metrics and not caps.per_request_metrics:
            hint = "" if caps.stream_options else " (it also refused stream_options)"
            raise ClientError(
                ErrorKind.PROTOCOL,
                f"{self.params.base_url} sends no per-request metrics{hint}: start vLLM with "
                "--enable-per-request-metrics, or drop --per-request-metrics",
            )

    async def _probe(self, caps: ServerCapabilities) -> RequestRecord:
        """One probe; a transient failure (429, 5xx, reset) is retried, so it cannot abort a run."""
        for attempt in range(PROBE_ATTEMPTS):
            rec = await self._stream(-1, Prompt(text="Hello"), 1, caps, {}, None)
            transient = rec.http_status in (429, 500, 502, 503, 504) or rec.error_kind in (
                ErrorKind.RESET,
                ErrorKind.SERVER,
                ErrorKind.TIMEOUT,
            )
            if rec.ok or not transient:
                break
            await asyncio.sleep(0.25 * 2**attempt)
        return rec

    # ----------------------------------------------------------------- streaming

    async def stream(
        self,
        request_id: int,
        prompt: Prompt | str | list[dict[str, str]],
        output_tokens: int,
        *,
        step: int = 0,
        concurrency: int | None = None,
        rate: float | None = None,
        warmup: bool = False,
        prompt_tokens_requested: int | None = None,
        task: str | None = None,
        keep_text: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        on_cancel: Callable[[RequestRecord], None] | None = None,
    ) -> RequestRecord:
        """Send one streaming request and measure it; failures come back as records.

        ``prompt`` is a ``Prompt``, plain text, or chat messages (``[{"role", "content"}]``).
        ``extra_body`` adds request fields (e.g. ``{"temperature": 0}`` for quality probes).

        If the task is cancelled, ``on_cancel`` receives the partial record (kind
        ``cancelled``) and the cancellation propagates.
        """
        if isinstance(prompt, str):
            prompt = Prompt(text=prompt)
        elif isinstance(prompt, list):
            prompt = Prompt(messages=tuple((m.get("role", "user"), m["content"]) for m in prompt))
        caps = self.capabilities or await self.detect_capabilities()

        def label(rec: RequestRecord) -> RequestRecord:
            return replace(
                rec,
                step=step,
                concurrency=concurrency,
                rate=rate,
                warmup=warmup,
                prompt_tokens_requested=prompt_tokens_requested,
                task=task,
            )

        report_cancel = None if on_cancel is None else (lambda partial: on_cancel(label(partial)))
        rec = await self._stream(
            request_id,
            prompt,
            output_tokens,
            caps,
            extra_body or {},
            report_cancel,
            keep_text=keep_text,
        )
        return label(rec)

    def _body(
        self, prompt: Prompt, max_tokens: int, caps: ServerCapabilities, extra: Mapping[str, Any]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "stream": True}
        if self.params.endpoint == "chat":
            body["messages"] = prompt.as_messages()
        else:
            body["prompt"] = prompt.as_text()
        if caps.stream_options:
            body["stream_options"] = {"include_usage": True}
        if caps.vllm_fields and self.params.ignore_eos:
            body["ignore_eos"] = True
            body["min_tokens"] = max_tokens
        body.update(extra)
        return body

    async def _stream(
        self,
        request_id: int,
        prompt: Prompt,
        max_tokens: int,
        caps: ServerCapabilities,
        extra: Mapping[str, Any],
        on_cancel: Callable[[RequestRecord], None] | None,
        keep_text: bool = False,
    ) -> RequestRecord:
        body = self._body(prompt, max_tokens, caps, extra)
        content = json.dumps(body).encode()
        asked = body.get("max_tokens")
        st = StreamState(
            keep_text,
            self.params.max_event_bytes,
            asked if isinstance(asked, int) and not isinstance(asked, bool) else None,
            self.meter if request_id >= 0 else None,
        )
        st.scrub = self.scrub
        clock = self._clock
        status: int | None = None
        retry_after: str | None = None
        sent = clock.now()
        headers = {
            "Content-Type": "application/json",
            "X-Request-Id": f"{self.request_id_prefix}{request_id}",
        }
        try:
            if self._wire is not None:
                exchange = await unless_stalled(  # no new chunk for --stall-timeout: cut
                    self._wire.post(self._path, content, headers, st),
                    lambda: len(st.times),
                    self.params.stall_timeout_s,
                )
                status, error_body, retry_after = exchange
                if not is_success(status):
                    raise StreamFailure(
                        ErrorKind.HTTP, self._error_message(status, error_body, self._path)
                    )
                st.finish(clock.now())
            else:
                async with httpx_post(self._http, clock.now, self._path, content, headers) as resp:
                    status, retry_after = resp.status, resp.retry_after
                    if not is_success(status):
                        raise StreamFailure(
                            ErrorKind.HTTP,
                            self._error_message(status, await resp.read_body(), self._path),
                        )
                    stall_s = self.params.stall_timeout_s
                    await unless_stalled(_consume(resp, st, clock), lambda: len(st.times), stall_s)
            check_complete(st)
            st.settle_usage()
        except asyncio.CancelledError:
            rec = self._record(
                request_id, sent, st, status, ErrorKind.CANCELLED, "cancelled at shutdown"
            )
            if on_cancel is not None:
                on_cancel(rec)
            raise
        except StreamFailure as exc:
            rec = self._record(request_id, sent, st, status, exc.kind, str(exc))
            return _with_retry_after(rec, retry_after)
        except SSEEventTooLarge as exc:
            return self._record(
                request_id, sent, st, status or st.status, ErrorKind.OVERSIZED_EVENT, str(exc)
            )
        except SSEError as exc:
            return self._record(request_id, sent, st, status, ErrorKind.PROTOCOL, str(exc))
        except httpx.HTTPError as exc:
            kind, msg = self._classify(exc)
            return self._record(request_id, sent, st, status, kind, msg)
        except WireError as exc:
            return self._record(
                request_id, sent, st, status or st.status, exc.kind, self.scrub(str(exc))
            )
        return self._record(request_id, sent, st, status, None, None)

    def _record(
        self,
        request_id: int,
        sent: float,
        st: StreamState,
        status: int | None,
        kind: str | None,
        message: str | None,
    ) -> RequestRecord:
        tokens = tuple(st.tokens) if st.tokens and min(st.tokens) >= 0 else ()
        ok = kind is None
        if st.meter is not None:  # the meter counted a token a chunk; usage says how many
            st.meter.correct(st.counted_tokens(), st.output_tokens if ok else None)
        return RequestRecord(
            request_id=request_id,
            sent_s=sent,
            chunk_times_s=tuple(st.times),
            end_s=self._clock.now(),
            chunk_tokens=tokens,
            prompt_tokens=st.prompt_tokens,
            output_tokens=st.output_tokens,
            finish_reason=st.finish_reason,
            http_status=status,
            error_kind=kind,
            error_message=clean(self.scrub(message), 600) if message else None,
            output_text=st.kept_text(),
            usage_rejected=st.usage_problem if ok else None,
            server=st.server_timing if ok else None,
        )

    # ----------------------------------------------------------------- errors

    def _error_message(self, status: int, body: bytes, path: str) -> str:
        """One clean line from an error answer (the key scrubbed before anything is cut)."""
        text = self.scrub(body[: 64 * 1024].decode("utf-8", "replace"))
        try:
            detail = error_text(loads_json(text))
        except ValueError:  # not JSON (or a number over Python's digit limit)
            detail = clean(" ".join(text.split()), 200)
        hint = {
            401: " (check --api-key)",
            403: " (check --api-key)",
            404: " (is this an OpenAI-compatible server and endpoint?)",
        }.get(status, "")
        text = f"HTTP {status} from {path}{hint}" + (f": {detail}" if detail else "")
        return self.scrub(text)

    def _classify(self, exc: httpx.HTTPError) -> tuple[str, str]:
        """Map an httpx exception to (error kind, one-line message without secrets)."""
        reason = " ".join(str(exc).split())[:200] or exc.__class__.__name__
        if isinstance(exc, httpx.ConnectTimeout):
            return ErrorKind.CONNECT, f"connect timed out after {self.params.connect_timeout_s:g}s"
        if isinstance(exc, httpx.ConnectError):
            return ErrorKind.CONNECT, self.scrub(f"cannot connect ({reason})")
        if isinstance(exc, httpx.ReadTimeout):
            return ErrorKind.TIMEOUT, f"no data for {self.params.read_timeout_s:g}s (read timeout)"
        if isinstance(exc, httpx.TimeoutException):
            return ErrorKind.TIMEOUT, self.scrub(f"timeout ({exc.__class__.__name__})")
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
            return ErrorKind.RESET, self.scrub(f"connection closed mid-stream ({reason})")
        if isinstance(exc, httpx.ProtocolError):
            return ErrorKind.PROTOCOL, self.scrub(f"HTTP protocol error ({reason})")
        return ErrorKind.OTHER, self.scrub(f"{exc.__class__.__name__}: {reason}")


async def _consume(resp: Opened, st: StreamState, clock: Clock) -> None:
    """Decode the body as it arrives; each event is stamped with the time its bytes were read
    from the socket (``Opened.read_time``), so decoding and scheduling never count as latency."""
    chunks, read_time = resp.chunks, resp.read_time
    async for chunk in chunks:
        st.feed(chunk, read_time())
        if st.done:
            await drain(chunks)
            return
    st.finish(clock.now())


def _with_retry_after(rec: RequestRecord, header: str | None) -> RequestRecord:
    """A refused request (429/503) carries the server's ``Retry-After`` for the driver."""
    if header is None or rec.http_status not in (429, 503):
        return rec
    return replace(rec, retry_after_s=parse_retry_after(header, wall_time()))

"""What a load client is built from: the server, the model and its limits (``ClientParams``),
the fields the server accepts (``ServerCapabilities``), the one way to build an httpx client for
it (headers with the API key, TLS, limits, no proxies from the environment), and the
operator-level error (``ClientError``: one clean line)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

import httpx

from infmon.config import Config
from infmon.load.sse import MAX_EVENT_BYTES
from infmon.model.base.sanitize import clean
from infmon.model.records.request import ErrorKind
from infmon.net import TLSConfigError, tls_verify


class ClientError(Exception):
    """An operator-level failure talking to the server; ``str()`` is one clean line."""

    def __init__(self, kind: str, message: str, http_status: int | None = None) -> None:
        message = clean(message, 600)
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.http_status = http_status


@dataclass(frozen=True, slots=True)
class ClientParams:
    base_url: str
    api_key: str | None = field(default=None, repr=False)
    model: str | None = None
    endpoint: str = "completions"
    ignore_eos: bool = True
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 600.0
    stall_timeout_s: float = 30.0
    max_connections: int = 2048
    ca_bundle: str | None = None
    insecure: bool = False
    max_event_bytes: int = MAX_EVENT_BYTES
    require_per_request_metrics: bool = False
    """``--per-request-metrics``: the probe fails unless the server sends them."""

    @classmethod
    def from_config(cls, config: Config, max_connections: int | None = None) -> ClientParams:
        if not config.url:
            raise ClientError(ErrorKind.OTHER, "no server URL given")
        wanted = max([*config.concurrency, config.max_concurrency, 1])
        return cls(
            base_url=config.url,
            api_key=config.api_key,
            model=config.model,
            endpoint=config.endpoint,
            ignore_eos=config.ignore_eos,
            connect_timeout_s=config.connect_timeout_s,
            read_timeout_s=config.read_timeout_s,
            stall_timeout_s=config.stall_timeout_s,
            max_connections=max_connections or max(64, 2 * wanted),
            ca_bundle=config.ca_bundle,
            insecure=config.insecure,
            max_event_bytes=config.max_event_bytes,
            require_per_request_metrics=config.per_request_metrics,
        )


@dataclass(frozen=True, slots=True)
class ServerCapabilities:
    """Which optional request fields the server accepted in the probe."""

    stream_options: bool
    vllm_fields: bool
    """``ignore_eos`` and ``min_tokens`` (vLLM only; strict servers answer 422)."""
    per_request_metrics: bool = False
    """The probe's answer carried the server's per-request ``metrics`` object (vLLM started
    with ``--enable-per-request-metrics``): every record can be split server vs client."""


def base_headers(params: ClientParams) -> dict[str, str]:
    """Headers every request to the server carries (the API key among them)."""
    headers = {"Accept-Encoding": "identity", "User-Agent": "infmon"}
    if params.api_key:
        headers["Authorization"] = f"Bearer {params.api_key}"
    return headers


def http_client(
    params: ClientParams,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    verify: ssl.SSLContext | bool | None = None,
    read_timeout_s: float | None = None,
) -> httpx.AsyncClient:
    """The one way infmon builds an httpx client for the server: base URL, API key, TLS
    (CA bundle or ``--insecure``), explicit limits and timeouts, no proxies from the env."""
    read_s = params.read_timeout_s if read_timeout_s is None else read_timeout_s
    return httpx.AsyncClient(
        base_url=params.base_url,
        headers=base_headers(params),
        timeout=httpx.Timeout(
            connect=params.connect_timeout_s, read=read_s, write=read_s, pool=None
        ),
        limits=httpx.Limits(
            max_connections=params.max_connections,
            max_keepalive_connections=params.max_connections,
            keepalive_expiry=30.0,
        ),
        verify=tls_of(params) if verify is None else verify,
        transport=transport,
        trust_env=False,
    )


def tls_of(params: ClientParams) -> ssl.SSLContext | bool:
    """The TLS verification for the server (``--ca-bundle``, ``--insecure``)."""
    try:
        return tls_verify(params.ca_bundle, params.insecure)
    except TLSConfigError as exc:
        raise ClientError(ErrorKind.OTHER, str(exc)) from None

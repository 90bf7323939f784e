"""The worker seam: the messages between the controller and its load workers, and their framing.

Control flows to a worker (``Start``, ``SetLevel``, ``Arrivals``, ``Pause``, ``Resume``,
``LimitSends``, ``Flush``, ``Ping``, ``Stop``); data flows back (``Ready``, ``Waiting``,
``RecordLines``, ``Window``, ``BudgetSpent``, ``Pong``, ``Stopped``). Every message that carries data names its
worker; every time a message carries is on the controller's clock (a worker shifts its own
stamps by the offset the controller measured). Over a pipe or socket each message is one frame:
a 4-byte big-endian length and the message pickled (both ends are infmon, started together).
"""

from __future__ import annotations

import asyncio
import pickle
import struct
from dataclasses import dataclass, field

from infmon.config import Config
from infmon.load.feed import WorkloadInfo
from infmon.model.records.window import LoadWindow

_LEN = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024
"""A frame longer than this means the stream is corrupt (a batch of records is ~1 MB at most)."""


# ---- control: controller → worker -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Start:
    worker_id: int
    rank: int
    workers: int
    config: Config
    seed: int
    retry_s: float | None = None
    """Keep retrying discovery this often while the server is unreachable (None: fail at once)."""
    window_s: float = 0.25
    urls: tuple[str, ...] = ()
    """Several endpoints: each request goes to one of them (``spread``); () is the config's."""
    spread: str = "round-robin"
    """``round-robin`` or ``least-inflight``."""


@dataclass(frozen=True, slots=True)
class SetLevel:
    """This worker's share of a level: ``value`` streams (closed) or requests/s (rate)."""

    step: int
    mode: str
    value: float
    max_concurrency: int
    arrival: str
    warmup_until_s: float
    total: float | None = None
    """The whole level across every worker (records are labelled with it); None: ``value``."""
    fed: bool = False
    """Rate mode whose arrival times the controller draws and sends (``Arrivals``)."""


@dataclass(frozen=True, slots=True)
class Arrivals:
    """Send times (controller clock) of this worker's share of a fed rate step, in order."""

    step: int
    times_s: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Pause:
    pass


@dataclass(frozen=True, slots=True)
class Resume:
    warmup_until_s: float


@dataclass(frozen=True, slots=True)
class LimitSends:
    """Send at most ``n`` more measured requests, then pause and say ``BudgetSpent``."""

    n: int | None


@dataclass(frozen=True, slots=True)
class Flush:
    """Close the current window now (a step boundary), so windows align with steps."""


@dataclass(frozen=True, slots=True)
class Ping:
    t: float


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """Worker clock minus controller clock, from the ping with the smallest round trip."""

    offset_s: float


@dataclass(frozen=True, slots=True)
class Stop:
    cancel: bool = True


# ---- data: worker → controller ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Ready:
    worker_id: int
    pid: int
    host: str
    """Host and boot id: a worker on the same boot shares the controller's monotonic clock."""
    model: str | None = None
    endpoint: str | None = None
    stream_options: bool = False
    vllm_fields: bool = False
    error_kind: str | None = None
    error: str | None = None
    """Discovery failed (unreachable server, unknown model, probe rejected): one line."""
    workload: WorkloadInfo | None = None
    """What the worker sends: workload kind, sizing (exact or approximate), seed, trace."""
    per_request_metrics: bool = False
    """The server's answers carry its own per-request timings (vLLM)."""
    load_thread: str = ""
    """How its load thread is scheduled (real-time or normal, and why), one line."""


@dataclass(frozen=True, slots=True)
class LoadThread:
    """The load thread's scheduling changed (real time given up under its own load): one line."""

    worker_id: int
    text: str
    retry_s: float | None = None
    """Seconds until it takes real time again (it left real time for a starvation beside it);
    None: it is not waiting to (back in real time, or at normal priority for good)."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """Discovery failed and will be retried (``Start.retry_s``)."""

    worker_id: int
    error: str


@dataclass(frozen=True, slots=True)
class RecordLines:
    """Finished requests in the journal's line encoding (``infmon.journal.codec``)."""

    worker_id: int
    lines: tuple[str, ...]


Window = LoadWindow
"""One window of a worker's load (``infmon.model.records.window``)."""


@dataclass(frozen=True, slots=True)
class BudgetSpent:
    worker_id: int
    step: int
    t: float


@dataclass(frozen=True, slots=True)
class ArrivalsDone:
    """The trace or schedule of a replay step has no more arrivals (this worker paused)."""

    worker_id: int
    step: int
    t: float


@dataclass(frozen=True, slots=True)
class Pong:
    worker_id: int
    t_sent: float
    t_worker: float


@dataclass(frozen=True, slots=True)
class Stopped:
    worker_id: int
    sent: int
    succeeded: int
    failed: int
    cancelled: int
    notes: tuple[str, ...] = field(default_factory=tuple)


Message = (
    Start
    | SetLevel
    | Arrivals
    | Pause
    | Resume
    | LimitSends
    | Flush
    | Ping
    | ClockOffset
    | Stop
    | Ready
    | LoadThread
    | Waiting
    | RecordLines
    | Window
    | BudgetSpent
    | Pong
    | Stopped
)


# ---- framing ----------------------------------------------------------------------------------
def frame(msg: object) -> bytes:
    body = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    return _LEN.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> object | None:
    """The next message, or None at the end of the stream."""
    try:
        head = await reader.readexactly(_LEN.size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    (n,) = _LEN.unpack(head)
    if n > MAX_FRAME:
        raise ValueError(f"frame of {n} bytes: the worker stream is corrupt")
    try:
        body = await reader.readexactly(n)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    msg: object = pickle.loads(body)
    return msg

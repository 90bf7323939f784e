"""Joining a Ray cluster as a well-behaved guest: loopback only when local, a token when the
cluster asks for one, a deadline on every wait, actors placed where the operator said, and the
same infmon everywhere.

Everything here runs in the controller. Ray is imported only through ``ray_module()`` and only
after ``prepare_environment`` has set what Ray reads at import time:

- ``local``: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray take 127.0.0.1 as the node's
  address (without it ``resolve_ip_for_localhost`` turns 127.0.0.1 into the host's reachable
  address and the GCS, raylet and workers listen on every interface), so every socket the local
  cluster opens is on loopback.
- ``--ray-token-file F``: ``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH=F`` (Ray 2.5x token
  authentication; the Ray client adds the token to its gRPC calls in that mode too).
- the driver's GCS reconnect timeout is raised: when the head goes, Ray would end this process
  after 60 s without a report; infmon notices the loss itself (``HeadWatch``) and ends the run.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Literal

Placement = Literal["spread", "pack"]
PLACEMENTS: tuple[Placement, ...] = ("spread", "pack")

CONNECT_TIMEOUT_S = 30.0
"""How long ``ray.init`` may take to join a cluster before the run gives up with one line."""
LOCAL_START_S = 180.0
"""Starting a local cluster (GCS, raylet, agents) on a busy 2-core machine takes up to a minute."""
DRIVER_GCS_RECONNECT_S = 300
"""The driver's own GCS reconnect timeout (Ray's default, 60 s, ends this process without a
report): infmon notices a lost head within seconds and ends the run itself, with reports."""


@dataclass(frozen=True, slots=True)
class RayOptions:
    address: str
    """``local``, ``auto``, a GCS ``host:port`` or ``ray://head:10001``."""
    token_file: Path | None = None
    placement: Placement = "spread"
    timeout_s: float = CONNECT_TIMEOUT_S
    """Each wait (connecting, an actor being placed and answering) ends within this."""
    restart: bool = False
    """``--ray-restart``: a lost actor is replaced by a new one (``RayReplacer``)."""


class RaySetupError(RuntimeError):
    """Ray could not be had as asked: one line for the operator."""


def prepare_environment(opts: RayOptions, environ: MutableMapping[str, str]) -> None:
    """Set what Ray reads at import (and passes to the processes it starts)."""
    if opts.address == "local":
        environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    if opts.token_file is not None:
        path = opts.token_file.expanduser()
        try:
            token = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise RaySetupError(f"--ray-token-file {path}: {exc.strerror or exc}") from None
        if not token:
            raise RaySetupError(f"--ray-token-file {path}: the file is empty")
        environ["RAY_AUTH_MODE"] = "token"
        environ["RAY_AUTH_TOKEN_PATH"] = str(path.resolve())
    environ.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", str(DRIVER_GCS_RECONNECT_S))


def ray_module() -> ModuleType:
    """The ``ray`` module, untyped (it is optional: mypy runs with and without it)."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise RaySetupError(
            "--ray needs Ray: pip install 'infmon[ray]' (on every node of the cluster)"
        ) from None


def _loopback_only() -> None:
    """Ray read its cluster flag at import: if it was imported before, set the flag it reads."""
    vars(importlib.import_module("ray._private.ray_constants"))["ENABLE_RAY_CLUSTER"] = False


def connect(opts: RayOptions) -> None:
    """``ray.init`` for the address (once), within ``opts.timeout_s``."""
    prepare_environment(opts, os.environ)
    ray = ray_module()
    if ray.is_initialized():
        return
    kwargs: dict[str, object] = {"log_to_driver": False, "configure_logging": False}
    if opts.address == "local":
        _loopback_only()
        # address="local": a cluster of its own, never one /tmp/ray/ray_current_cluster names
        kwargs.update(address="local", include_dashboard=False, _node_ip_address="127.0.0.1")
    else:
        kwargs["address"] = opts.address
        if (source := source_address(opts.address)) is not None:
            # the address this host reaches the head from: the driver joins that node's raylet
            # (Ray's own guess asks a public resolver, and on a host with several addresses
            # may join another node's)
            kwargs["_node_ip_address"] = source
    outcome: list[BaseException | None] = []
    tries = 2 if opts.address.startswith("ray://") else 1

    def init() -> None:
        for attempt in range(tries):
            try:
                ray.init(**kwargs)
                outcome.append(None)
                break
            except BaseException as exc:  # Ray raises ConnectionError, ValueError, …
                # the client server's per-client process sometimes dies as it starts
                # ("Initialization failure from server"): one more try
                if attempt == tries - 1 or "Initialization failure" not in str(exc):
                    outcome.append(exc)
                    return
        else:
            return
        # Ray starts a local cluster's processes with PR_SET_PDEATHSIG, which fires when the
        # *thread* that started them ends: this one lives as long as the process.
        threading.Event().wait()

    thread = threading.Thread(target=init, name="infmon-ray-init", daemon=True)
    thread.start()
    deadline_s = max(opts.timeout_s, LOCAL_START_S) if opts.address == "local" else opts.timeout_s
    deadline = time.monotonic() + deadline_s
    while not outcome and time.monotonic() < deadline:
        time.sleep(0.05)
    if not outcome:
        raise RaySetupError(
            f"--ray {opts.address}: no answer from the cluster within {deadline_s:g} s"
            + _auth_hint(os.environ)
        )
    exc = outcome[0]
    if exc is None:
        _messages_to_stderr(ray)
    if exc is None and opts.address == "local":
        atexit.register(reap_local_cluster, ray)  # before Ray's own atexit shutdown (LIFO)
    if exc is not None:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        text = " ".join(lines[:3]) if lines else type(exc).__name__
        raise RaySetupError(f"--ray {opts.address}: {text[:300]}" + _auth_hint(os.environ))


def _host_port(address: str) -> tuple[str, int]:
    """``host:port`` (IPv6 in brackets) as a socket address; ValueError for a bad port."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def source_address(address: str) -> str | None:
    """This host's address on the route to a GCS ``host:port`` (None for ``auto``/``ray://``)."""
    if address == "auto" or "://" in address or ":" not in address:
        return None
    with (
        contextlib.suppress(OSError, ValueError),
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s,
    ):
        s.connect(_host_port(address))  # UDP: no packet, only the route's source
        return str(s.getsockname()[0])
    return None


def _messages_to_stderr(ray: ModuleType) -> None:
    """Ray prints the cluster's error messages ("(raylet) A worker died…") on stdout, in the
    middle of bench's table: they go to stderr, one sanitised line each, prefixed ``ray:``."""
    from infmon.model.base.sanitize import clean

    def to_stderr(data: Mapping[str, object], *args: object, **kwargs: object) -> None:
        lines = data.get("lines")
        for line in lines if isinstance(lines, list) else ():
            text = clean(str(line), 300)
            if text.strip():
                print(f"ray: ({clean(str(data.get('pid', '')), 40)}) {text}", file=sys.stderr)

    with contextlib.suppress(AttributeError):
        ray._private.worker.print_to_stdstream = to_stderr


def _auth_hint(environ: Mapping[str, str]) -> str:
    if environ.get("RAY_AUTH_MODE") == "token":
        return ""
    return " (a cluster with token authentication needs --ray-token-file FILE)"


@dataclass(frozen=True, slots=True)
class NodeSlot:
    """A node of the cluster that can take actors."""

    node_id: str
    address: str
    cpus: int


def alive_nodes(ray: ModuleType) -> list[NodeSlot]:
    """The cluster's live nodes with at least one CPU, as Ray lists them."""
    nodes = []
    for n in ray.nodes():
        cpus = int(n.get("Resources", {}).get("CPU", 0))
        if n.get("Alive") and cpus >= 1:
            nodes.append(NodeSlot(str(n["NodeID"]), str(n.get("NodeManagerAddress", "?")), cpus))
    return nodes


def plan_placement(
    nodes: Sequence[NodeSlot], controller_node: str | None, workers: int, placement: Placement
) -> tuple[list[str | None], str | None]:
    """Which node each actor goes to (None: Ray chooses) and a line to say, if any.

    ``spread``: the actors go to the nodes that are not the controller's, round robin within
    their CPUs, so the load's client work never competes with the controller; the controller's
    node takes actors only when the others lack CPUs (said). ``pack``: Ray's default placement.
    """
    if placement == "pack" or not nodes:
        return [None] * workers, None
    others = [n for n in nodes if n.node_id != controller_node]
    own = [n for n in nodes if n.node_id == controller_node]
    slots: list[str] = []
    for pool in (others, own):
        left = {n.node_id: n.cpus for n in pool}
        while len(slots) < workers and any(left.values()):
            for n in pool:
                if left[n.node_id] > 0 and len(slots) < workers:
                    slots.append(n.node_id)
                    left[n.node_id] -= 1
    if len(slots) < workers:
        total = sum(n.cpus for n in nodes)
        raise RaySetupError(
            f"--workers {workers}: the Ray cluster has {total} CPUs on {len(nodes)} nodes "
            "(one per actor)"
        )
    on_own = sum(1 for s in slots if s == controller_node)
    note = None
    if on_own and others:
        note = (
            f"--ray-placement spread: {on_own} of {workers} actors on the controller's node "
            f"(the other nodes have {sum(n.cpus for n in others)} CPUs)"
        )
    return list(slots), note


def code_identity(root: Path | None = None) -> str:
    """infmon's version and a digest of its source: actors must run what the controller runs."""
    from infmon import __version__

    base = root or Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(base.rglob("*.py")):
        digest.update(str(path.relative_to(base)).encode())
        digest.update(path.read_bytes())
    py = ".".join(str(v) for v in sys.version_info[:2])
    return f"infmon {__version__} ({digest.hexdigest()[:12]}), Python {py}"


def gcs_reachable(address: str, timeout_s: float) -> bool:
    """A TCP connect to the GCS (``host:port``) within ``timeout_s``."""
    try:
        with socket.create_connection(_host_port(address), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


HEAD_PROBE_S = 1.0
HEAD_LOST_AFTER = 3
"""Consecutive failed probes (one a second) before the head counts as lost."""


class HeadWatch:
    """Probes the cluster's head (the GCS, or the Ray client server) once a second from a
    thread of its own; after ``HEAD_LOST_AFTER`` failures in a row it calls ``on_lost`` once.

    Without it a lost head is seen only when Ray ends the controller (after its GCS reconnect
    timeout), and the run ends without a report."""

    def __init__(self, address: str, on_lost: Callable[[str], None]) -> None:
        self.address, self.on_lost = address, on_lost
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="infmon-ray-head", daemon=True)

    def start(self) -> HeadWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        failures = 0
        while not self._stop.wait(HEAD_PROBE_S):
            failures = 0 if gcs_reachable(self.address, HEAD_PROBE_S) else failures + 1
            if failures >= HEAD_LOST_AFTER:
                self.lost.set()
                self.on_lost(
                    f"the Ray head at {self.address} has not answered for "
                    f"{HEAD_LOST_AFTER * HEAD_PROBE_S:g} s"
                )
                return


def head_address(ray: ModuleType, opts: RayOptions) -> str | None:
    """Where the head answers: the Ray client server for ``ray://``, else the GCS."""
    if opts.address.startswith("ray://"):
        return opts.address.removeprefix("ray://").split("/", 1)[0]
    try:
        return str(ray.get_runtime_context().gcs_address)
    except Exception:  # an older Ray without it: no watch
        return None


def reap_local_cluster(ray: ModuleType, deadline_s: float = 15.0) -> None:
    """At exit, after a ``local`` cluster: Ray's shutdown within a deadline, then every process
    of the cluster's session that is still alive (a lost GCS leaves agents orphaned)."""
    session = ""
    with contextlib.suppress(Exception):
        session = str(ray._private.worker._global_node.get_session_dir_path())
    done = threading.Event()

    def shutdown() -> None:
        with contextlib.suppress(Exception):
            ray.shutdown()
        done.set()

    threading.Thread(target=shutdown, name="infmon-ray-shutdown", daemon=True).start()
    done.wait(deadline_s)
    if session:
        for pid in _pids_naming(session):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _pids_naming(text: str) -> list[int]:
    """Processes (not this one) whose command line names ``text``."""
    found = []
    needle = text.encode()
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
    return found

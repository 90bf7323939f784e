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

import hashlib
import importlib
import os
import socket
import sys
import threading
import time
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

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


def ray_module() -> Any:
    """The ``ray`` module, untyped (it is optional: mypy runs with and without it)."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise RaySetupError(
            "--ray needs Ray: pip install 'infmon[ray]' (on every node of the cluster)"
        ) from None


def _loopback_only(ray: Any) -> None:
    """Ray read its cluster flag at import: if it was imported before, set the flag it reads."""
    constants: Any = importlib.import_module("ray._private.ray_constants")
    constants.ENABLE_RAY_CLUSTER = False
    del ray


def connect(opts: RayOptions) -> None:
    """``ray.init`` for the address (once), within ``opts.timeout_s``."""
    prepare_environment(opts, os.environ)
    ray = ray_module()
    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    if opts.address == "local":
        _loopback_only(ray)
        kwargs.update(include_dashboard=False, _node_ip_address="127.0.0.1")
    else:
        kwargs["address"] = opts.address
    outcome: list[BaseException | None] = []

    def init() -> None:
        try:
            ray.init(**kwargs)
            outcome.append(None)
        except BaseException as exc:  # Ray raises ConnectionError, ValueError, RuntimeError…
            outcome.append(exc)
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
    if exc is not None:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RaySetupError(f"--ray {opts.address}: {text[:200]}" + _auth_hint(os.environ))


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


def alive_nodes(ray: Any) -> list[NodeSlot]:
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
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False

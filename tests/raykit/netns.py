"""A Ray cluster of several nodes on this machine, each node in its own network namespace with
its own address, joined by a bridge that lives in a namespace of its own (nothing is added to
the machine's own network; the addresses exist only inside these namespaces, and every packet
stays on this machine).

    with NetnsCluster(tmp_path) as c:
        c.add_node("head", head=True, cpus=0)
        c.add_node("ctl", cpus=1)                      # the controller's node
        c.add_node("n1", cpus=2, env={SKEW_ENV: "5"})  # a load host whose clock is 5 s ahead
        c.run("ctl", ["infmon", "bench", ...])

Needs root, ``ip`` and network namespaces (``can_build()`` says why not). Each node is a
``ray start --block`` process: killing a node kills every process below it at once (SIGKILL,
as a host that loses power); ``close`` ends all of them and removes the namespaces.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

SUBNET = "10.250.0"
"""Addresses exist only inside this cluster's own namespaces (a bridge in a hub namespace)."""
GCS_PORT = 6379
CLIENT_PORT = 10001


def can_build() -> str | None:
    """None when namespaces can be made here, else the reason they cannot."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    probe = f"infprobe{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()[:120]}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def descendants(root: int) -> list[int]:
    """``root`` and every process below it, parents first."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (d / "stat").read_text()
                parent[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    order, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, pp in parent.items() if pp in frontier and pid not in order]
        order += frontier
    return order


@dataclass
class Node:
    name: str
    ns: str
    address: str
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    pids: list[int] = field(default_factory=list)


class NetnsCluster:
    def __init__(self, tmp: Path, env: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.tag = uuid.uuid4().hex[:6]
        self.hub = f"inf{self.tag}hub"
        self.nodes: dict[str, Node] = {}
        self.env = {**os.environ, **(env or {})}
        # a busy 2-core machine starts a raylet slowly: Ray's default wait is 30 s
        self.env.setdefault("RAY_raylet_start_wait_time_s", "180")
        self.env.pop("RAY_ADDRESS", None)
        # set by infmon's --ray local in this process (a test before): a multi-node cluster
        # must not inherit it
        self.env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        self._next = 1
        self.ray = [sys.executable, "-m", "ray.scripts.scripts"]

    # ---- namespaces ---------------------------------------------------------------------------
    def __enter__(self) -> NetnsCluster:
        self._ip("netns", "add", self.hub)
        self._ip("-n", self.hub, "link", "set", "lo", "up")
        self._ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        self._ip("-n", self.hub, "link", "set", "br0", "up")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def namespace(self, name: str) -> Node:
        """A namespace with loopback up and one address on the bridge."""
        ns = f"inf{self.tag}{name}"
        address = f"{SUBNET}.{self._next}"
        self._next += 1
        self._ip("netns", "add", ns)
        self._ip("-n", ns, "link", "set", "lo", "up")
        veth = f"v{self.tag}{len(self.nodes)}"
        self._ip(
            "-n", self.hub, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns
        )
        self._ip("-n", self.hub, "link", "set", veth, "master", "br0", "up")
        self._ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        self._ip("-n", ns, "link", "set", "eth0", "up")
        node = Node(name, ns, address)
        self.nodes[name] = node
        return node

    def _ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)

    def exec_args(self, name: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.nodes[name].ns, *argv]

    # ---- Ray nodes ----------------------------------------------------------------------------
    @property
    def head_address(self) -> str:
        return f"{self.nodes['head'].address}:{GCS_PORT}"

    def add_node(
        self, name: str, *, cpus: int, head: bool = False, env: dict[str, str] | None = None
    ) -> Node:
        node = self.nodes[name] if name in self.nodes else self.namespace(name)
        argv = [
            *self.ray,
            "start",
            "--block",
            f"--node-ip-address={node.address}",
            f"--num-cpus={cpus}",
            "--disable-usage-stats",
        ]
        if head:
            argv += [
                f"--temp-dir={self.tmp / 'ray'}",  # its own: never /tmp/ray's current cluster
                "--head",
                f"--port={GCS_PORT}",
                "--include-dashboard=false",
                f"--ray-client-server-port={CLIENT_PORT}",
            ]
        else:
            argv += [f"--address={self.head_address}"]
        node.log = self.tmp / f"ray-{name}.log"
        with open(node.log, "wb") as log:
            node.proc = subprocess.Popen(
                self.exec_args(name, argv),
                env={**self.env, **(env or {})},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return node

    def start_node(
        self,
        name: str,
        count: int,
        *,
        cpus: int,
        head: bool = False,
        env: dict[str, str] | None = None,
        tries: int = 3,
    ) -> Node:
        """``add_node`` and wait until ``count`` nodes are alive; a node that gives up starting
        (Ray waits 30 s for its raylet, a busy machine can take longer) is started again."""
        for attempt in range(tries):
            node = self.add_node(name, cpus=cpus, head=head, env=env)
            try:
                self.wait_nodes(count)
                return node
            except RuntimeError:
                if attempt == tries - 1:
                    raise
                self.stop_node(name)
        raise AssertionError("unreachable")

    def stop_node(self, name: str) -> None:
        node = self.nodes[name]
        if node.proc is not None:
            for pid in reversed(descendants(node.proc.pid)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.proc.wait(5)

    def wait_nodes(self, count: int, timeout_s: float = 180.0) -> None:
        """Until ``count`` nodes are alive in the GCS (``ray status`` from the head's namespace)."""
        deadline = time.monotonic() + timeout_s
        script = (
            "import ray, sys; ray.init(address=sys.argv[1], log_to_driver=False); "
            "print(sum(1 for n in ray.nodes() if n['Alive']))"
        )
        last = ""
        while time.monotonic() < deadline:
            for node in self.nodes.values():
                if node.proc is not None and node.proc.poll() is not None:
                    raise RuntimeError(f"ray node {node.name} exited: {self.tail(node.name)}")
            got = subprocess.run(
                self.exec_args("head", [sys.executable, "-c", script, self.head_address]),
                env=self.env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            last = (got.stdout.strip().splitlines() or [""])[-1]
            if got.returncode == 0 and last.isdigit() and int(last) >= count:
                return
            time.sleep(1.0)
        raise TimeoutError(f"{count} Ray nodes not alive within {timeout_s:g} s (last: {last!r})")

    def tail(self, name: str, lines: int = 15) -> str:
        log = self.nodes[name].log
        if log is None or not log.exists():
            return ""
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def kill_node(self, name: str) -> list[int]:
        """Every process of the node at once, with SIGKILL (a host that loses power)."""
        node = self.nodes[name]
        assert node.proc is not None
        pids = descendants(node.proc.pid)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        node.pids = pids
        return pids

    def kill_process(self, name: str, comm: str) -> int:
        """The one process named ``comm`` on the node (e.g. the head's ``gcs_server``)."""
        node = self.nodes[name]
        assert node.proc is not None
        for pid in descendants(node.proc.pid):
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                    os.kill(pid, signal.SIGKILL)
                    return pid
        raise LookupError(f"no {comm} on node {name}")

    def close(self) -> None:
        for name in self.nodes:
            self.stop_node(name)
        # agents a dying raylet left orphaned (re-parented to init) still name this cluster's dir
        needle = str(self.tmp).encode()
        for d in Path("/proc").iterdir():
            if d.name.isdigit() and int(d.name) != os.getpid():
                with contextlib.suppress(OSError):
                    if needle in (d / "cmdline").read_bytes():
                        os.kill(int(d.name), signal.SIGKILL)
        for node in self.nodes.values():
            subprocess.run(["ip", "netns", "del", node.ns], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.hub], capture_output=True)

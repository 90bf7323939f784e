"""Issue 31, without a cluster: a Ray actor's output brought into the session (found from its
own file descriptors, bounded, sanitised) and where ``--ray-restart`` places a new actor."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from infmon.engine.ray_link import RayLink
from infmon.engine.ray_logs import log_file, read_tails, write_worker_log
from infmon.engine.ray_restart import RayReplacer
from infmon.engine.ray_setup import NodeSlot, RayOptions


def test_a_process_finds_the_files_its_output_goes_to(tmp_path: Path) -> None:
    out, err = tmp_path / "w.out", tmp_path / "w.err"
    code = (
        "import sys; from infmon.engine.ray_logs import own_log_paths; "
        "print('hello'); print(list(own_log_paths()), file=sys.stderr)"
    )
    with out.open("wb") as o, err.open("wb") as e:
        subprocess.run([sys.executable, "-c", code], stdout=o, stderr=e, check=True, timeout=60)
    assert err.read_text().strip() == repr([str(out), str(err)])


def test_tails_are_bounded_and_the_file_is_sanitised(tmp_path: Path) -> None:
    log = tmp_path / "worker.err"
    log.write_bytes(b"x" * 5000 + b"\nTraceback: \x1b[31mred\x1b[0m \xff end\n")
    (path, text), (missing, why) = read_tails([str(log), str(tmp_path / "gone")], max_bytes=64)
    assert path == str(log) and text.startswith("(its first 4,967 bytes left out)\n")
    assert text.endswith("end\n") and len(text.split("\n", 1)[1]) <= 64
    assert missing.endswith("gone") and why.startswith("(unreadable:")
    written = write_worker_log(
        tmp_path, "worker 1 (Ray actor on 10.0.0.2)", "10.0.0.2", 4242, [(path, text)]
    )
    assert written == tmp_path / "workers" / "10.0.0.2-4242.log"
    body = written.read_text()
    assert "\x1b" not in body and "Traceback: \\x1b[31mred" in body and "\ufffd end" in body
    assert body.startswith("# worker 1 (Ray actor on 10.0.0.2)\n# ---- ")
    assert log_file(tmp_path, "fe80::1%eth0/../x", 7).name == "fe80__1_eth0_.._x-7.log"


def _link(worker: int, node: str, alive: bool = True) -> RayLink:
    link = RayLink(worker, RayOptions("auto"), node)
    link.actor = object()  # placed
    if not alive:
        link.closed.set()
    return link


def test_a_replacement_goes_where_the_live_actors_leave_a_cpu_off_the_controllers_node() -> None:
    nodes = [
        NodeSlot("ctl", "10.0.0.1", 4),
        NodeSlot("n1", "10.0.0.2", 2),
        NodeSlot("n2", "10.0.0.3", 2),
    ]
    links = [_link(0, "n1"), _link(1, "n2", alive=False), _link(2, "n1")]
    spread = RayReplacer(RayOptions("auto", placement="spread"), links, "ctl", print)
    assert spread.node(nodes) == "n2"  # the lost actor's CPU is free again; n1 is full
    # but its node may be the one that died (listed alive for a while): the controller's first
    assert spread.node(nodes, avoid="n2") == "ctl"
    assert spread.node(nodes[1:], avoid="n2") == "n2"  # last: Ray says if it cannot place it
    links += [_link(3, "n2"), _link(4, "n2")]
    spread = RayReplacer(RayOptions("auto", placement="spread"), links, "ctl", print)
    assert spread.node(nodes[1:]) is None  # no free CPU: Ray places it (or says it cannot)
    assert spread.node(nodes) == "ctl"  # the controller's node only when no other has room

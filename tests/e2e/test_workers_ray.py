"""Issue 16, must show 3: must show 2's test with the workers as Ray actors on a local Ray
cluster (``ray.init(num_cpus=2)``, loopback only).

Optional: skipped when Ray is not installed, and marked ``ray`` so the fast suite leaves it out
even when it is (``pip install -e '.[ray]'`` then ``pytest -m ray tests/e2e/test_workers_ray.py``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from infmon.engine.ray_setup import RayOptions, connect
from infmon.engine.runner import StepSpec
from infmon.model.shape.lengths import parse_lengths
from infmon.report import build_summary
from tests.conftest import running_sim
from tests.e2e.test_workers import PLAN, same
from tests.enginekit.scale import journal_counts, merge_into_one_file, run_plan

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")

pytestmark = [pytest.mark.e2e, pytest.mark.ray]


LOCAL = RayOptions("local")


@pytest.fixture(scope="module")
def ray_cluster():
    connect(LOCAL)  # infmon's own: loopback only
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def fast_sim():
    with running_sim("--scenario", "baseline", "--seed", "3") as url:
        yield url


def links(n: int, log_dir: Path | None = None):
    from infmon.engine.ray_link import ray_links

    # joins the cluster the fixture started
    return list(ray_links(LOCAL, n, say=print, log_dir=log_dir))


def worker_logs(session: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((session / "workers").glob("*.log"))}


async def test_two_ray_actors_live_counters_journal_and_a_report_from_shards(
    ray_cluster, fast_sim: str, tmp_path: Path
) -> None:
    session = tmp_path / "s"
    ls = links(2, session)
    run = await run_plan(fast_sim, session, PLAN, links=ls, output_tokens=parse_lengths("24"))
    assert {w.worker_id for w in run.windows} == {0, 1}
    # issue 31: each actor's own output is in the session, not left in /tmp/ray on its node
    logs = worker_logs(session)
    assert sorted(logs) == sorted(f"127.0.0.1-{link.pid}.log" for link in ls), logs
    for link in ls:
        text = logs[f"127.0.0.1-{link.pid}.log"]
        assert f"infmon load worker (Ray actor) on 127.0.0.1, pid {link.pid}" in text
        assert "\x1b" not in text  # sanitised: an escape sequence is shown, not kept
    assert (session / "journal.w1.sqlite").exists()
    live, journal = run.live_counts(), journal_counts(session)
    assert journal["ok"] > 50 and journal["failed"] == 0
    for key in ("ok", "failed", "cancelled"):
        assert live[key] == journal[key], key
    assert live["sent"] == run.totals.sent == sum(journal[k] for k in ("ok", "failed", "cancelled"))
    for result, _ in run.results:
        s = result.stats
        assert abs(s.achieved_concurrency - result.span.level.value) < 0.2 * result.span.level.value

    one = merge_into_one_file(session, tmp_path / "one")
    from_shards, from_one = build_summary(session), build_summary(one)
    for summary in (from_shards, from_one):  # a run is named by its directory
        summary["session"].pop("dir")
        summary["session"].pop("label")
    same(from_shards, from_one)


async def test_a_ray_actor_killed_mid_step_is_an_event_and_the_run_finishes(
    ray_cluster, fast_sim: str, tmp_path: Path
) -> None:
    session = tmp_path / "s"
    ls = links(2, session)
    plan = [
        StepSpec(concurrency=8, duration_s=4.0, warmup_s=0.5),
        StepSpec(concurrency=8, duration_s=3.0, warmup_s=0.5),
    ]

    async def kill_one(engine) -> None:
        await asyncio.sleep(2.5)  # inside step 1's measured time
        ray.kill(ls[1].actor)

    run = await run_plan(
        fast_sim, session, plan, links=ls, during=kill_one, output_tokens=parse_lengths("64")
    )
    (loss,) = run.losses
    assert loss.worker_id == 1 and loss.step == 1 and loss.inflight > 0
    assert "the Ray actor died" in loss.reason
    text = next(e for e in run.events if "worker 1 lost" in e)
    assert "counted as `worker_lost`" in text and "re-split over 1 worker" in text
    (first, _), (second, _) = run.results
    assert first.stats.failed > 0 and second.stats.failed == 0
    assert abs(second.stats.achieved_concurrency - 8) < 1.2  # worker 0 took the whole level
    assert second.stats.completed > 0
    assert journal_counts(session)["worker_lost"] == loss.inflight
    assert not loss.replacing and not run.joins  # no --ray-restart: the share stays re-split
    # worker 0 took the whole level: where that saturated it, the step is client-bound
    for result, _ in run.results:
        bound = [n for n in result.stats.client_notes if n.startswith("client-bound")]
        assert not bound or result.stats.client_late
    logs = worker_logs(session)
    lost_log = logs[f"127.0.0.1-{ls[1].pid}.log"]
    assert "the actor was lost: its output stays on its node, in /" in lost_log
    assert "infmon load worker (Ray actor)" in logs[f"127.0.0.1-{ls[0].pid}.log"]


async def test_a_killed_ray_actor_is_replaced_with_ray_restart(
    ray_cluster, fast_sim: str, tmp_path: Path
) -> None:
    """Issue 31: ``--ray-restart``: a new actor (placed, version-checked, its clock measured)
    takes the lost one's share back; the events and the report say both."""
    from dataclasses import replace

    from infmon.engine.ray_restart import ray_replacer
    from infmon.report import write_reports

    session = tmp_path / "s"
    ls = links(2, session)
    plan = [  # a new actor starts a Python worker and finds the model: seconds on a busy host
        StepSpec(concurrency=8, duration_s=4.0, warmup_s=0.5),
        StepSpec(concurrency=8, duration_s=15.0, warmup_s=0.5),
    ]

    async def kill_one(engine) -> None:
        await asyncio.sleep(2.5)  # inside step 1's measured time
        ray.kill(ls[1].actor)

    run = await run_plan(
        fast_sim, session, plan, links=ls, during=kill_one, output_tokens=parse_lengths("64"),
        replacement=ray_replacer(replace(LOCAL, restart=True), ls, print),
    )  # fmt: skip
    (loss,) = run.losses
    assert loss.worker_id == 1 and loss.replacing
    assert "re-split over 1 worker until its replacement joins" in loss.text
    assert len(run.joins) == 1, run.events
    (join,) = run.joins
    print(f"the replacement took load {join.t - loss.t:.1f} s after the loss was seen")
    assert join.error is None and (join.worker_id, join.replaces) == (2, 1), join.text
    assert join.text.startswith("worker 2 (Ray actor on 127.0.0.1) replaces worker 1: c=8")
    assert join.text.endswith("re-split over 2 workers")
    # it took load: its windows after it joined hold about half the level, as worker 0's do
    end = run.results[-1][0].span.end_s
    assert join.t < end - 3, (join.t, end)  # it joined with time to spare in step 2
    after = [w for w in run.windows if w.t0 >= join.t + 0.5 and w.t1 <= end]
    for worker in (0, 2):
        mine = [w.inflight for w in after if w.worker_id == worker]
        assert mine and 2.5 <= sum(mine) / len(mine) <= 5.5, (worker, mine)
    assert journal_counts(session)["worker_lost"] == loss.inflight
    write_reports(session)
    report = (session / "report.md").read_text()
    assert "worker 1 lost" in report and "replaces worker 1" in report
    assert len(worker_logs(session)) == 3  # the two first actors' and the new one's


def test_more_actors_than_the_local_cluster_has_cpus_is_one_line(ray_cluster) -> None:
    from infmon.engine.ray_link import ray_links

    with pytest.raises(RuntimeError, match="--workers 3: the Ray cluster has 2 CPUs on 1 nodes"):
        ray_links(LOCAL, 3, say=print)


def _descendants(root: int) -> set[int]:
    """``root`` and every process below it (Ray's GCS, raylet, agents and workers)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            parent[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, grew = {root}, True
    while grew:
        more = {pid for pid, pp in parent.items() if pp in found and pid not in found}
        found |= more
        grew = bool(more)
    return found


def _listening() -> list[tuple[str, int, str]]:
    """(local address, pid, process name) of every listening TCP socket, from ``ss``."""
    import re
    import subprocess

    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        cols = line.split()
        for name, pid in re.findall(r'\("([^"]+)",pid=(\d+)', line):
            rows.append((cols[3], int(pid), name))
    return rows


async def test_every_socket_ray_and_infmon_listen_on_is_loopback(
    ray_cluster, fast_sim: str, tmp_path: Path
) -> None:
    """Issue 31, must show 1: ``ss -ltnp`` while actors run load: Ray's GCS, raylet, agents,
    the actors and infmon listen on 127.0.0.1 only."""
    import os

    seen: list[tuple[str, int, str]] = []

    async def look(engine) -> None:
        await asyncio.sleep(1.5)
        mine = _descendants(os.getpid())
        seen.extend(row for row in _listening() if row[1] in mine)

    ls = links(2)
    plan = [StepSpec(concurrency=4, duration_s=2.5, warmup_s=0.2)]
    await run_plan(fast_sim, tmp_path / "s", plan, links=ls, during=look)
    names = {name for _, _, name in seen}
    assert {"gcs_server", "raylet"} <= names, names
    assert any(n.startswith("ray::") for n in names), names
    off = [row for row in seen if not row[0].rsplit(":", 1)[0].strip("[]").endswith("127.0.0.1")]
    assert not off, off
    for link in ls:  # the same host: the measured offset is near zero, within its round trip
        assert link.clock_offset is not None
        assert abs(link.clock_offset.offset_s) <= link.clock_offset.uncertainty_s + 1e-3


def _actor_pids(root: int) -> list[int]:
    """The Ray actors (``ray::RayWorker…`` process titles) below ``root``."""
    found = []
    for pid in _descendants(root):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if title.startswith(b"ray::RayWorker"):
            found.append(pid)
    return sorted(found)


def test_bench_on_ray_local_an_actor_killed_keeps_ray_lines_out_of_the_table(
    fast_sim: str, tmp_path: Path
) -> None:
    """Issue 31: ``infmon bench --ray local --workers 2``, one actor's process killed mid-step:
    bench's table (stdout) holds no Ray line (Ray's "(raylet) A worker died…" goes to stderr as
    ``ray: …``), the loss is an event, each actor's output is in ``workers/``."""
    import json
    import os
    import signal
    import subprocess
    import sys

    from tests.conftest import REPO, infmon_cmd, poll_until

    session, out = tmp_path / "s", tmp_path / "out.json"
    argv = infmon_cmd(
        "bench", fast_sim, "--ray", "local", "--workers", "2", "--concurrency", "6,6",
        "--step-duration", "5", "--warmup", "0.5", "--output-tokens", "32",
        "--session-dir", str(session), "--json", str(out), "--no-server-metrics",
    )  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        poll_until(lambda: (session / "journal.w1.sqlite").exists(), 240, "actors running", proc)
        actors = poll_until(lambda: a if len(a := _actor_pids(proc.pid)) == 2 else None, 30, "2")
        os.kill(actors[-1], signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    sys.stdout.write(stdout + stderr)
    assert proc.returncode in (0, 1), stderr[-3000:]
    assert "lost (the Ray actor died" in stderr, stderr[-3000:]
    assert "(raylet)" not in stdout and "\x1b[" not in stdout, stdout
    raylet = [line for line in stderr.splitlines() if "(raylet)" in line]
    assert all(line.startswith("ray: (") for line in raylet), raylet
    print(f"Ray's own lines on stderr: {len(raylet)}")
    steps = json.loads(out.read_text())["steps"]
    assert steps[1]["completed"] > 0 and steps[1]["failed"] == 0
    logs = {p.name: p.read_text() for p in (session / "workers").glob("*.log")}
    assert len(logs) == 2 and all(name.startswith("127.0.0.1-") for name in logs), sorted(logs)
    assert sum("the actor was lost" in text for text in logs.values()) == 1

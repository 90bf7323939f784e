"""``--workers``, ``--ray``, ``--url``, ``--metrics-port``: parsed and checked; Ray is never
imported unless asked, and its absence is one line."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from infmon.commands import CliError
from infmon.commands.scale import (
    add_scale_arguments,
    auto_workers,
    make_links,
    make_replacement,
    scale_from_args,
)
from infmon.engine.link import ProcessLink
from tests.conftest import REPO


def parse(*argv: str, url: str | None = "http://a:8000") -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    add_scale_arguments(ap)
    ap.add_argument("--in-process", action="store_true")
    args = ap.parse_args(list(argv))
    args.url = url
    args.ca_bundle, args.insecure = None, False
    return args


def test_workers_count_auto_and_bounds() -> None:
    assert scale_from_args(parse()).workers is None
    assert scale_from_args(parse("--workers", "3")).workers == 3
    assert scale_from_args(parse("--workers", "auto")).workers == auto_workers() >= 1
    for bad in ("0", "x", "2000"):
        with pytest.raises(CliError, match="--workers"):
            scale_from_args(parse("--workers", bad))
    with pytest.raises(CliError, match="--in-process runs one worker"):
        scale_from_args(parse("--workers", "2", "--in-process"))


def test_several_urls_the_first_is_the_run_url() -> None:
    args = parse("--url", "http://b:8000", "--url", "http://c:8000/", url=None)
    s = scale_from_args(args)
    assert s.urls == ("http://b:8000", "http://c:8000") and args.url == "http://b:8000"
    one = scale_from_args(parse("--url", "http://a:8000"))  # the same endpoint twice is one
    assert one.urls == ()


def test_metrics_port_host_and_port() -> None:
    assert scale_from_args(parse("--metrics-port", "9400")).metrics_addr == ("127.0.0.1", 9400)
    assert scale_from_args(parse("--metrics-port", "0.0.0.0:9")).metrics_addr == ("0.0.0.0", 9)
    with pytest.raises(CliError, match="--metrics-port"):
        scale_from_args(parse("--metrics-port", "70000"))


def test_local_worker_links(tmp_path) -> None:
    assert make_links(scale_from_args(parse()), tmp_path, False) is None
    links = make_links(scale_from_args(parse("--workers", "2")), tmp_path, False)
    assert [type(x) for x in links] == [ProcessLink, ProcessLink]
    assert links[1].log_path == tmp_path / "worker-1.log"


def test_ray_restart_needs_ray_and_is_off_by_default() -> None:
    assert scale_from_args(parse()).ray_restart is False
    assert scale_from_args(parse("--ray", "local", "--ray-restart")).ray_restart is True
    with pytest.raises(CliError, match="--ray-restart replaces lost Ray actors: it needs --ray"):
        scale_from_args(parse("--ray-restart"))
    assert make_replacement(scale_from_args(parse("--workers", "2")), None) is None


def test_ray_missing_is_one_line(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(CliError, match=r"--ray needs Ray: pip install 'infmon\[ray\]'"):
        make_links(scale_from_args(parse("--ray", "local")), None, False)


def test_bench_and_monitor_never_import_ray() -> None:
    code = (
        "import sys, infmon.cli, infmon.commands.bench, infmon.commands.monitor, "
        "infmon.engine.controller; print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.stdout.strip() == "False", out.stderr

"""Secrets and TLS: `quality` takes its key from the same Config as every command (env, config
file, key file), a server echoing the key gets ``<redacted>`` back on screen, the process title
never shows it; certificates are verified by default by every client (load, /metrics,
Prometheus), ``--ca-bundle`` and ``--insecure`` work for all."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd
from tests.hostile.kit import KEY, assert_clean_run, bench, clean_env, run_infmon
from tests.hostile.server import serve

pytestmark = pytest.mark.e2e


def _probes(tmp_path: Path) -> Path:
    path = tmp_path / "probes.jsonl"
    path.write_text(json.dumps({"id": "one", "prompt": "say 1", "expect": "1"}) + "\n")
    return path


@pytest.mark.parametrize("how", ["env", "config-file", "key-file"])
def test_quality_key_from_config_and_an_echoed_key_is_redacted(tmp_path: Path, how: str) -> None:
    """Each way of giving the key reaches the server; the server quotes it back in a 401 on
    every probe; the one-line error shows ``<redacted>``, never the key."""
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    args, env = ["quality"], {}
    if how == "env":
        env["INFMON_API_KEY"] = KEY
    elif how == "config-file":
        (tmp_path / "xdg" / "infmon").mkdir(parents=True)
        (tmp_path / "xdg" / "infmon" / "config.toml").write_text(f'api_key_file = "{key_file}"\n')
    else:
        args += ["--api-key-file", str(key_file)]
    with serve("echo-key") as (url, srv):
        ran = run_infmon(*args, url, "--probes", str(_probes(tmp_path)), home=tmp_path, **env)
    assert f"Bearer {KEY}" in srv.log.auth  # the key was sent
    assert ran.returncode == 2, ran.show()  # no probe got an answer
    assert_clean_run(ran)
    assert KEY not in ran.output and "<redacted>" in ran.stderr
    assert ran.stderr.count("\n") == 1


def test_the_process_title_never_shows_the_key(tmp_path: Path) -> None:
    with serve("benign") as (url, srv):
        srv.ttft_s = 1.0
        cmd = infmon_cmd("quality", url, "--api-key", KEY, "--probes", str(_probes(tmp_path)))
        proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=clean_env(tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 20
            while not srv.log.generations() and time.monotonic() < deadline:
                time.sleep(0.05)  # the first request is on the wire: the title is set by now
            cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        finally:
            proc.wait(30)
    assert srv.log.generations() and KEY.encode() not in cmdline, cmdline
    assert f"Bearer {KEY}" in srv.log.auth


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ssl.SSLContext]]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    crt, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key)),
            *("-out", str(crt), "-days", "1", "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(crt, key)
    yield crt, ctx


@pytest.mark.parametrize("command", ["scrape", "prometheus", "quality", "bench"])
def test_tls_verified_by_default_ca_bundle_and_insecure_honoured(
    tmp_path: Path, cert: tuple[Path, ssl.SSLContext], command: str
) -> None:
    crt, ctx = cert
    probes = str(_probes(tmp_path))
    with serve("prom-escape" if command == "prometheus" else "benign", tls=ctx) as (url, _):

        def run(*extra: str) -> object:
            if command == "bench":
                return bench(url, tmp_path / f"s{len(extra)}", *extra, home=tmp_path)
            if command == "prometheus":
                return run_infmon("scrape", "--prometheus", url, *extra, home=tmp_path)
            if command == "quality":
                return run_infmon("quality", url, "--probes", probes, *extra, home=tmp_path)
            return run_infmon("scrape", url, *extra, home=tmp_path)

        refused, trusted, insecure = run(), run("--ca-bundle", str(crt)), run("--insecure")
    assert refused.returncode == 2, refused.show()
    assert "certificate" in refused.stderr.lower() and refused.stderr.count("\n") == 1
    for r in (refused, trusted, insecure):
        assert_clean_run(r)
    assert trusted.returncode == 0 and insecure.returncode == 0
    assert "TLS certificate verification is OFF" in insecure.stderr

"""The API key never leaves infmon's memory, and untrusted text stays text.

A server that reflects the key back (in error bodies, inside streams, in generated text) cannot
get it into the session record, the reports, the CSV, the terminal output or the process title,
whichever way the key was given. A model name and outputs carrying ``<script>`` and ``[bold]``
come out escaped in HTML and Markdown.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn

from infmon.journal import JournalWriter, SessionReader
from infmon.report import write_reports
from tests.conftest import REPO, infmon_cmd, running_sim
from tests.e2e.faultkit import KEY, assert_no_crash, bench_args, bench_env

pytestmark = pytest.mark.e2e
HOSTILE = "<script>alert(1)</script>[bold red]x[/]"


def _reflecting_app():
    """Every third request: 401 quoting the key; then an in-stream error quoting it; then text with it."""
    counter = {"n": 0}

    async def app(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        auth = dict(scope["headers"]).get(b"authorization", b"").decode()
        while (await receive()).get("more_body"):
            pass
        if scope["path"] == "/v1/models":
            return await _reply(
                send, 200, {"object": "list", "data": [{"id": "m", "object": "model"}]}
            )
        if scope["path"] == "/metrics":
            page = f'vllm:num_requests_running{{model_name="m",note="{auth}"}} 1\n'.encode()
            return await _reply(send, 200, page, b"text/plain")
        if scope["path"] != "/v1/completions":
            return await _reply(send, 404, {"detail": "Not Found"})
        counter["n"] += 1
        n = counter["n"]
        if n % 3 == 0 and n > 3:  # the capability probe (first requests) must get through
            return await _reply(send, 401, {"error": {"message": f"invalid key in header {auth}"}})
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        first = {"choices": [{"index": 0, "text": f"echo {auth}", "finish_reason": None}]}
        await send(
            {
                "type": "http.response.body",
                "body": b"data: " + json.dumps(first).encode() + b"\n\n",
                "more_body": True,
            }
        )
        last = (
            {"error": {"message": f"upstream rejected {auth}"}}
            if n % 3 == 1
            else {"choices": [{"index": 0, "text": auth, "finish_reason": "length"}]}
        )
        body = b"data: " + json.dumps(last).encode() + b"\n\ndata: [DONE]\n\n"
        await send({"type": "http.response.body", "body": body})

    return app


async def _reply(send, status: int, obj, ctype: bytes = b"application/json") -> None:
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", ctype)]}
    )
    await send({"type": "http.response.body", "body": data})


@contextmanager
def reflecting_server() -> Iterator[str]:
    server = uvicorn.Server(
        uvicorn.Config(
            _reflecting_app(),
            host="127.0.0.1",
            port=0,
            log_level="critical",
            lifespan="off",
            loop="asyncio",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not (server.started and server.servers):
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _files_with_key(root: Path) -> list[str]:
    """Files under ``root`` holding the key, except the operator's own key and config files."""
    given = {root / "key", root / "xdg" / "infmon" / "config.toml"}
    return [
        str(p)
        for p in root.rglob("*")
        if p.is_file() and p not in given and KEY.encode() in p.read_bytes()
    ]


def _run_with_key(url: str, tmp_path: Path, how: str, *extra: str) -> tuple[str, str, bytes]:
    """Run bench with the key given ``how``; returns stdout, stderr and the live process title."""
    args = bench_args(
        url,
        tmp_path / "session",
        "--concurrency",
        "3",
        "--step-duration",
        "1.5",
        "--json",
        str(tmp_path / "out.json"),
        *extra,
    )
    env = bench_env(tmp_path)
    if how == "cli":
        args += ["--api-key", KEY]
    elif how == "cli=":
        args += [f"--api-key={KEY}"]
    elif how == "env":
        env["OPENAI_API_KEY"] = KEY
    elif how == "file":
        (tmp_path / "key").write_text(KEY + "\n")
        args += ["--api-key-file", str(tmp_path / "key")]
    else:
        (tmp_path / "xdg" / "infmon").mkdir(parents=True)
        (tmp_path / "xdg" / "infmon" / "config.toml").write_text(f'api_key = "{KEY}"\n')
    proc = subprocess.Popen(
        args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # "session: …": arguments are parsed by now
    while not (line := proc.stdout.readline()).startswith("target:") and line:
        first += line
    title = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    out, err = proc.communicate(timeout=60)
    assert_no_crash((out, err))
    return first + line + out, err, title


@pytest.mark.parametrize("how", ["cli", "cli=", "env", "file", "config"])
def test_the_key_is_nowhere_in_what_a_session_produces(tmp_path: Path, how: str) -> None:
    with reflecting_server() as url:
        out, err, title = _run_with_key(url, tmp_path, how)
    session = tmp_path / "session"
    assert {
        "journal.sqlite",
        "report.md",
        "report.html",
        "requests.csv",
        "report.json",
    } <= {p.name for p in session.iterdir()}
    records = [r.error_message or "" for r in SessionReader(session).iter_records()]
    assert any("<redacted>" in m for m in records)  # reflected by the server, then scrubbed
    assert SessionReader(session).read_columns().sent_s.size > 0
    assert list(SessionReader(session).iter_scrapes())
    assert _files_with_key(tmp_path) == []
    assert KEY not in out and KEY not in err
    assert KEY.encode() not in title and b"infmon" in title


def test_key_against_the_simulator_and_hostile_model_name(tmp_path: Path) -> None:
    """The sim serves a model whose name is markup; the key given on the command line."""
    with running_sim("--served-model-name", HOSTILE, "--seed", "4") as url:
        out, err, title = _run_with_key(url, tmp_path, "cli")
    assert _files_with_key(tmp_path) == [] and KEY not in out + err and KEY.encode() not in title
    html = (tmp_path / "session" / "report.html").read_text()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;[bold red]" in html
    md = (tmp_path / "session" / "report.md").read_text()
    assert "<script>" not in md and "&lt;script&gt;" in md


def test_model_output_and_labels_in_reports_are_escaped(tmp_path: Path) -> None:
    """Quality outputs (model text) and metric-derived labels are data in both report formats."""
    session = tmp_path / "s"
    with JournalWriter(session) as j:
        j.write_config({"label": "[bold]run</h1>", "api_key": KEY})
        j.write_event("target", url="http://x", model=HOSTILE, endpoint="completions")
        j.write_event("mark", label="<img src=x onerror=alert(1)>[blink]")
        j.write_quality(
            {
                "probes": 1,
                "accuracy": 0.0,
                "results": [
                    {
                        "id": "[bold]p1",
                        "expect": "<b>42</b>",
                        "correct": False,
                        "output": "</pre><script>steal()</script>",
                    }
                ],
            }
        )
    write_reports(session)
    html = (session / "report.html").read_text()
    assert "<script>" not in html and "<img" not in html and "</pre><script>" not in html
    assert "&lt;/pre&gt;&lt;script&gt;steal()&lt;/script&gt;" in html
    assert "Content-Security-Policy" in html
    md = (session / "report.md").read_text()
    assert "<script>" not in md and "<img" not in md
    assert _files_with_key(session) == []


def test_insecure_warns_and_a_bad_ca_bundle_is_a_clear_error(tmp_path: Path) -> None:
    with reflecting_server() as url:
        r = subprocess.run(
            bench_args(url, tmp_path / "s", "--step-duration", "0.5", "--insecure"),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            env=bench_env(tmp_path),
        )
        assert "TLS certificate verification is OFF" in r.stderr
        r = subprocess.run(
            bench_args(url, tmp_path / "s2", "--ca-bundle", str(tmp_path / "missing.pem")),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            env=bench_env(tmp_path),
        )
    assert r.returncode == 2 and "cannot load CA bundle" in r.stderr and "Traceback" not in r.stderr


def test_model_output_with_markup_from_the_simulator(tmp_path: Path) -> None:
    """The sim answers a probe with ``<script>`` and ``[bold]``; the session's reports show it as text."""
    probes = tmp_path / "probes.jsonl"
    answer = "<script>alert(2)</script>[bold]yes[/bold]"
    probes.write_text(
        json.dumps({"id": "xss", "prompt": "Say the tag.", "expect": answer, "match": "exact"})
        + "\n"
    )
    session = tmp_path / "session"
    with running_sim("--probes", str(probes), "--seed", "6") as url:
        env = bench_env(tmp_path, OPENAI_API_KEY=KEY)
        q = subprocess.run(
            infmon_cmd("quality", url, "--probes", str(probes), "--session-dir", str(session)),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    assert q.returncode == 0, q.stderr
    assert json.loads((session / "quality.json").read_text())["results"][0]["output"] == answer
    r = subprocess.run(
        infmon_cmd("report", str(session)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    page = (session / "report.html").read_text()
    assert (
        "<script>alert(2)" not in page
        and "&lt;script&gt;alert(2)&lt;/script&gt;[bold]yes[/bold]" in page
    )
    assert _files_with_key(tmp_path) == [] and KEY not in q.stdout + q.stderr

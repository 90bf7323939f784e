"""Config layers: CLI > env > file > defaults; clear errors; the key never leaks."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infmon.commands import CliError
from infmon.commands.load_args import add_load_arguments, config_from_args
from infmon.config import SLO, Config, build_config, config_path
from infmon.config_values import ConfigError, parse_duration_s, parse_slo
from infmon.model.shape.lengths import Lengths, fixed


def write(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "infmon"
    d.mkdir(exist_ok=True)
    (d / "config.toml").write_text(text)
    return d / "config.toml"


def test_defaults() -> None:
    c = build_config({}, environ={"XDG_CONFIG_HOME": "/nonexistent"})
    assert c.endpoint == "completions" and c.prompt_tokens == fixed(128) and c.ignore_eos
    assert c.read_timeout_s == 600.0 and c.effective_warmup_s == 2.0 and c.slo.empty


def test_precedence_cli_over_env_over_file(tmp_path: Path) -> None:
    write(tmp_path, 'model = "from-file"\nprompt_tokens = 11\noutput_tokens = "5-9"\nlabel = "f"\n')
    env = {
        "XDG_CONFIG_HOME": str(tmp_path),
        "INFMON_MODEL": "from-env",
        "INFMON_PROMPT_TOKENS": "22",
    }
    c = build_config({"model": "from-cli"}, environ=env)
    assert (c.model, c.prompt_tokens, c.output_tokens, c.label) == (
        "from-cli",
        fixed(22),
        Lengths("uniform", 5, 9, source="5-9"),
        "f",
    )
    assert config_path(env) == tmp_path / "infmon" / "config.toml"


def test_api_key_sources_and_redaction(tmp_path: Path) -> None:
    keyfile = tmp_path / "key"
    keyfile.write_text("sk-file-key\n")
    assert build_config({}, environ={"OPENAI_API_KEY": "sk-openai"}).api_key == "sk-openai"
    env = {"OPENAI_API_KEY": "sk-openai", "INFMON_API_KEY": "sk-infmon"}
    assert build_config({}, environ=env).api_key == "sk-infmon"
    c = build_config({"api_key_file": str(keyfile)}, environ=env)
    assert c.api_key == "sk-file-key"
    assert "sk-file-key" not in repr(c) and "sk-file-key" not in str(c.to_public_dict())
    assert c.to_public_dict()["api_key"] == "<redacted>"


def test_values_parse() -> None:
    assert (
        parse_duration_s("500ms") == 0.5
        and parse_duration_s("2m") == 120
        and parse_duration_s("3") == 3
    )
    assert parse_slo("ttft=500ms,tpot=50ms,e2el=10s") == SLO(0.5, 0.05, 10.0)
    c = build_config(
        {
            "concurrency": "1,4,16",
            "rate": "0.5,2",
            "url": "localhost:8000/v1/",
            "ignore_eos": False,
            "step_duration": "30s",
        },
        environ={},
    )
    assert c.concurrency == (1, 4, 16) and c.rate == (0.5, 2.0) and c.url == "http://localhost:8000"
    assert not c.ignore_eos and c.step_duration_s == 30.0


@pytest.mark.parametrize(
    ("cli", "message"),
    [
        ({"slo": "ttft=fast"}, "duration"),
        ({"slo": "foo=1s"}, "bad --slo"),
        ({"output_tokens": "9-3"}, "bad length"),
        ({"prompt_tokens": "normal:5"}, "bad normal length"),
        ({"schedule": "ramp:x"}, "not a schedule part"),
        ({"trace": "t.csv", "schedule": "burst:5@1s"}, "give one"),
        ({"concurrency": "1,x"}, "integers"),
        ({"url": "ftp://x"}, "http"),
        ({"endpoint": "embeddings"}, "not one of"),
        ({"api_key_file": "/nonexistent/key"}, "cannot read API key file"),
        ({"api_key_file": "\x00"}, "cannot read API key file"),
        ({"step_requests": float("inf")}, "not an integer"),  # hypothesis found it (TOML inf)
        ({"step_requests": 2.7}, "not an integer"),  # not truncated to 2
        ({"seed": True}, "not an integer seed"),
    ],  # hypothesis found a NUL once
)
def test_bad_values_are_one_line_errors(cli: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        build_config(cli, environ={})
    assert "\n" not in str(info.value)


def test_bad_file_is_a_clear_error(tmp_path: Path) -> None:
    path = write(tmp_path, "model = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        build_config({"config": str(path)}, environ={})
    write(tmp_path, "colour = 'blue'\n")
    with pytest.raises(ConfigError, match="unknown key"):
        build_config({}, environ={"XDG_CONFIG_HOME": str(tmp_path)})
    with pytest.raises(ConfigError, match="not found"):
        build_config({"config": str(tmp_path / "missing.toml")}, environ={})


def test_cli_options_reach_the_config(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    p = argparse.ArgumentParser()
    p.add_argument("url")
    add_load_arguments(p)
    args = p.parse_args(
        [
            "h:1",
            "--concurrency",
            "2,4",
            "--no-ignore-eos",
            "--insecure",
            "--slo",
            "ttft=1s",
            "--read-timeout",
            "30s",
            "--api-key",
            "sk-cli",
        ]
    )
    c = config_from_args(args)
    assert c.concurrency == (2, 4) and not c.ignore_eos and c.insecure and c.read_timeout_s == 30.0
    assert c.slo.ttft_s == 1.0 and c.api_key == "sk-cli" and c.url == "http://h:1"
    assert "TLS certificate verification is OFF" in capsys.readouterr().err
    with pytest.raises(CliError, match="prompt-tokens"):
        config_from_args(p.parse_args(["h:1", "--prompt-tokens", "0"]))


def test_config_is_frozen() -> None:
    with pytest.raises(AttributeError):
        Config().model = "x"  # type: ignore[misc]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_fuzzed_config_files_raise_only_config_errors(text: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c.toml"
        path.write_text(text, encoding="utf-8")
        with contextlib.suppress(ConfigError):
            build_config({"config": str(path)}, environ={})


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "slo",
                "output_tokens",
                "concurrency",
                "rate",
                "warmup",
                "seed",
                "prompt_tokens",
                "arrival",
                "insecure",
                "url",
            ]
        ),
        st.text(max_size=20),
    )
)
def test_fuzzed_values_raise_only_config_errors(cli: dict) -> None:
    with contextlib.suppress(ConfigError):
        build_config(cli, environ={})

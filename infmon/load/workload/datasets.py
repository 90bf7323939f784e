"""Prompts read from a file: JSONL with ``prompt`` (text) or ``messages`` (chat) per line, or
ShareGPT JSON (the first human turn of each conversation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infmon.load.workload.items import Prompt
from infmon.model.base.sanitize import loads_json
from infmon.model.shape.files import read_error

MAX_DATASET_BYTES = 512 * 1024 * 1024
"""A dataset file larger than this is refused (it is read whole)."""


class DatasetError(ValueError):
    """A dataset file that cannot be used; the message is one line naming file and line."""


def load_dataset(path: str | Path) -> list[Prompt]:
    """Read a JSONL (``prompt`` / ``messages``) or ShareGPT JSON file of prompts."""
    p = Path(path).expanduser()
    try:
        if p.stat().st_size > MAX_DATASET_BYTES:
            raise DatasetError(f"dataset {p} is larger than {MAX_DATASET_BYTES >> 20} MiB")
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read dataset {p}: {read_error(exc)}") from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = loads_json(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{p}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
        return _from_sharegpt(data, p)
    return _from_jsonl(text, p)


def _from_jsonl(text: str, path: Path) -> list[Prompt]:
    prompts: list[Prompt] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = loads_json(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
        prompts.append(_prompt_from_obj(obj, f"{path}:{lineno}"))
    if not prompts:
        raise DatasetError(f"{path}: no prompts found")
    return prompts


def _prompt_from_obj(obj: Any, where: str) -> Prompt:
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected an object with 'prompt' or 'messages'")
    if isinstance(obj.get("prompt"), str):
        return Prompt(text=obj["prompt"])
    messages = obj.get("messages")
    if isinstance(messages, list) and messages:
        pairs = []
        for m in messages:
            if not (isinstance(m, dict) and isinstance(m.get("content"), str)):
                raise DatasetError(f"{where}: each message needs a string 'content'")
            pairs.append((str(m.get("role", "user")), m["content"]))
        return Prompt(messages=tuple(pairs))
    raise DatasetError(f"{where}: expected a string 'prompt' or a non-empty 'messages' list")


def _from_sharegpt(data: Any, path: Path) -> list[Prompt]:
    if not isinstance(data, list):
        raise DatasetError(f"{path}: ShareGPT JSON must be a list of conversations")
    prompts: list[Prompt] = []
    for conv in data:
        turns = conv.get("conversations") if isinstance(conv, dict) else None
        if not isinstance(turns, list):
            continue
        for turn in turns:
            if (
                isinstance(turn, dict)
                and turn.get("from") in ("human", "user")
                and isinstance(turn.get("value"), str)
                and turn["value"].strip()
            ):
                prompts.append(Prompt(text=turn["value"]))
                break
    if not prompts:
        raise DatasetError(f"{path}: no conversation with a human turn found")
    return prompts

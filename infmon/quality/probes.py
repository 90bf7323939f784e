"""Quality probes: the built-in set and user JSONL files (``prompt``, ``expect``, ``match``)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from infmon.model.base.sanitize import loads_json

MATCH_KINDS = ("exact", "normalised", "regex")


@dataclass(frozen=True, slots=True)
class Probe:
    id: str
    prompt: str
    expect: str
    match: str = "normalised"


class ProbeFileError(ValueError):
    """A probe file that cannot be used (the message names the line)."""


def parse_probes(text: str, source: str = "probes") -> list[Probe]:
    out: list[Probe] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = loads_json(line)
            prompt, expect = str(row["prompt"]), str(row["expect"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ProbeFileError(
                f"{source}:{n}: need a JSON object with prompt and expect ({type(exc).__name__})"
            ) from None
        match = row.get("match", "normalised")
        if match not in MATCH_KINDS:
            raise ProbeFileError(f"{source}:{n}: match must be one of {', '.join(MATCH_KINDS)}")
        out.append(Probe(str(row.get("id") or f"p{n}"), prompt, expect, match))
    if not out:
        raise ProbeFileError(f"{source}: no probes")
    return out


def builtin_probes() -> list[Probe]:
    text = resources.files("infmon.quality").joinpath("probes.jsonl").read_text("utf-8")
    return parse_probes(text, "built-in probes")


def load_probes(path: Path | None = None) -> list[Probe]:
    """The probes of ``path`` (JSONL), or the built-in set."""
    if path is None:
        return builtin_probes()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ProbeFileError(f"{path}: {exc.strerror or exc}") from None
    return parse_probes(text, str(path))

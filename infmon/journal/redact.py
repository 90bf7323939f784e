"""Remove secrets from a configuration before it is written anywhere.

Keys that name a secret (``api_key``, ``authorization``, ``token``, ``password``, …) lose their
value; ``Authorization: …`` header strings, ``Bearer …`` values and passwords inside URLs are
masked too. Keys that merely count tokens (``max_tokens``, ``prompt_tokens``) are kept.
"""

from __future__ import annotations

import re
from typing import Any

from infmon.model.base.sanitize import REDACTED, redact_url

_SECRET_KEYS = frozenset(
    {
        "api_key",
        "apikey",
        "x_api_key",
        "authorization",
        "proxy_authorization",
        "token",
        "access_token",
        "refresh_token",
        "auth_token",
        "bearer",
        "password",
        "passwd",
        "secret",
        "client_secret",
        "cookie",
        "set_cookie",
        "credentials",
        "private_key",
    }
)
_SECRET_SUFFIXES = ("_api_key", "_password", "_secret", "_token", "_passwd", "_credentials")
_HEADER_RE = re.compile(r"(?i)\b((?:proxy-)?authorization|x-api-key|cookie)\s*[:=]\s*\S.*")
_BEARER_RE = re.compile(r"(?i)\b(bearer|basic)\s+\S+")


def is_secret_key(key: str) -> bool:
    k = key.strip().lower().replace("-", "_")
    return k in _SECRET_KEYS or k.endswith(_SECRET_SUFFIXES)


def redact_text(text: str) -> str:
    text = _HEADER_RE.sub(lambda m: f"{m.group(1)}: {REDACTED}", text)
    text = _BEARER_RE.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    return redact_url(text)


def redact(value: Any) -> Any:
    """A copy of ``value`` (dicts, lists, strings, scalars) with secrets masked."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            secret = isinstance(k, str) and is_secret_key(k) and v not in (None, "")
            out[k] = REDACTED if secret else redact(v)
        return out
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value

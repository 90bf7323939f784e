"""The one type of a JSON value, for what the core writes or reads as JSON and knows no more
of: a journal payload whose fields vary with its kind, a configuration carried through.

``JSON`` is a true JSON value (null, a boolean, a number, a string, an array, an object with
string keys), not ``Any``: a reader must check a value's type before it uses it. Arrays and
objects are read-only (``Sequence``, ``Mapping``) so a ``list[float]`` or a ``dict[str, int]``
is one. Where the fields are known, a ``TypedDict`` or a dataclass says them instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

JSON: TypeAlias = bool | int | float | str | Sequence["JSON"] | Mapping[str, "JSON"] | None

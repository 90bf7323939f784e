"""The keys: one table for the bindings, the footer, the help screen and the command palette.

The footer is worded for the state (``space start`` before anything ran, ``space pause``
while it runs, ``space resume`` when paused; ``w sweep`` / ``w stop sweep``) and shows every
key the width allows, dropping the least needed first (``?`` and ``q`` stay). The palette
lists infmon's own commands only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.app import SystemCommand
from textual.binding import Binding

if TYPE_CHECKING:
    from infmon.ui.app import InfmonApp


@dataclass(frozen=True)
class Key:
    binding: str
    """Textual key names (comma-separated)."""
    shown: str
    action: str
    description: str
    """What ``?`` and the palette say."""
    labels: tuple[tuple[str, str], ...]
    """(variant, footer label): the action is run as ``action('variant')``."""
    rank: int
    """Footer priority: when the width runs out, the highest rank goes first."""


KEYS: tuple[Key, ...] = (
    Key("plus,equals_sign", "+", "load_up", "concurrency +1 (rate +1 req/s in rate mode)",
        (("", "+1"),), 4),
    Key("minus", "-", "load_down", "concurrency −1 (rate −1 req/s in rate mode)",
        (("", "−1"),), 5),
    Key("right_square_bracket", "]", "load_double", "double the load", (("", "×2"),), 6),
    Key("left_square_bracket", "[", "load_halve", "halve the load", (("", "÷2"),), 7),
    Key("r", "r", "toggle_mode", "switch closed loop ↔ rate mode",
        (("closed", "rate mode"), ("rate", "closed loop")), 11),
    Key("space", "space", "toggle_pause", "start / pause / resume the load",
        (("start", "start"), ("pause", "pause"), ("resume", "resume")), 2),
    Key("w", "w", "toggle_sweep", "start / stop the automatic sweep 1, 2, 4, … to the knee",
        (("start", "sweep"), ("stop", "stop sweep")), 3),
    Key("m", "m", "mark", "add a mark with a note", (("", "mark"),), 8),
    Key("b", "b", "baseline", "set the current step as the baseline", (("", "baseline"),), 9),
    Key("s", "s", "snapshot_report", "write the session report now (+ screenshot)",
        (("", "report"),), 10),
    Key("t", "t", "next_theme", "next theme", (("", "theme"),), 12),
    Key("a", "a", "toggle_anatomy", "latency anatomy: each step split by the server's own "
        "per-request times (queue, prefill, decode, client-side)", (("", "anatomy"),), 13),
    Key("q", "q", "quit", "write the final report and quit", (("", "quit"),), 1),
    Key("question_mark", "?", "help", "show the keys", (("", "help"),), 0),
)  # fmt: skip


FOOTER = "footer"
"""The variant name of a key that has one label."""


def bindings() -> list[Binding]:
    """Each key twice: its footer entries (``action('variant')``, shown only while
    ``check_action`` says the variant is current and there is room) and a hidden binding
    that always runs, so a key the footer has no room for still works."""
    out = []
    for k in KEYS:
        for variant, label in k.labels:
            out.append(
                Binding(
                    k.binding,
                    f"{k.action}('{variant or FOOTER}')",
                    label,
                    key_display=k.shown,
                    tooltip=k.description,
                )
            )
        out.append(Binding(k.binding, k.action, k.labels[0][1], show=False))
    return out


def footer_width(key: Key, label: str) -> int:
    """Columns a footer key takes (Textual's FooterKey: padding 1 around the key, 1 after)."""
    return len(key.shown) + len(label) + 3


def footer_keys(width: int, variants: dict[str, str]) -> set[str]:
    """The actions shown in a footer ``width`` columns wide: the lowest ranks first, each key
    with the label of its current variant (``variants``: action → variant)."""
    room, shown = width, set()
    for k in sorted(KEYS, key=lambda k: k.rank):
        label = dict(k.labels).get(variants.get(k.action, ""), k.labels[0][1])
        need = footer_width(k, label)
        if need <= room:
            shown.add(k.action)
            room -= need
    return shown


def help_rows() -> list[tuple[str, str]]:
    return [(k.shown, k.description) for k in KEYS]


def system_commands(app: InfmonApp) -> Iterable[SystemCommand]:
    """The palette: every key's action and nothing else (no second Quit, no theme picker)."""
    for k in KEYS:
        title = f"{k.description[0].upper()}{k.description[1:]}"
        yield SystemCommand(title, f"key: {k.shown}", lambda a=k.action: app.run_action(a))

"""The keys: one table for the bindings, the footer, the help screen and the command palette.

The footer is worded for the state (``space start`` before anything ran, ``space pause``
while it runs, ``space resume`` when paused; ``w sweep`` / ``w stop sweep``, or ``w search slo``
/ ``w stop search`` with ``--search``) and shows every
key the width allows, dropping the least needed first (``?`` and ``q`` stay). The palette
lists infmon's own commands only, and sets a level outright: "set concurrency 64" or
"set rate 5" (``LevelCommands``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from textual.app import SystemCommand
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

from infmon.model.search.frontier import SEARCHES_FOR
from infmon.model.steps.span import CLOSED, RATE, Level

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
        (("start", "sweep"), ("stop", "stop sweep"), ("search-slo", "search slo"),
         ("search-goodput", "search goodput"), ("search-knee", "search knee"),
         ("stop-search", "stop search")), 3),
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


def w_variant(search: str | None, running: bool) -> str:
    """The footer's ``w``: the sweep, or (``--search``) the search of that goal."""
    if search is None:
        return "stop" if running else "start"
    return "stop-search" if running else f"search-{search}"


def described(k: Key, search: str | None) -> str:
    """What a key does; ``w`` with ``--search`` runs the search, not the sweep."""
    if k.action != "toggle_sweep" or search is None:
        return k.description
    finds = SEARCHES_FOR.get(search, search)
    return f"start / stop the search for {finds} (--search {search}): its frontier in the knee pane"


def help_rows(search: str | None = None) -> list[tuple[str, str]]:
    return [(k.shown, described(k, search)) for k in KEYS]


def system_commands(app: InfmonApp) -> Iterable[SystemCommand]:
    """The palette: every key's action and nothing else (no second Quit, no theme picker)."""
    snap = app.last_snapshot
    search = snap.header.search if snap is not None else None
    for k in KEYS:
        text = described(k, search)
        title = f"{text[0].upper()}{text[1:]}"
        yield SystemCommand(title, f"key: {k.shown}", lambda a=k.action: app.run_action(a))


LEVEL_QUERY = re.compile(
    r"^\s*(?:set\s+)?(?:(?P<mode>concurrency|c|rate|r)\b\s*(?:to\b|=)?\s*)?"
    r"(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>req/s|/s|rps)?\s*$",
    re.IGNORECASE,
)
MAX_CONCURRENCY = 100_000
"""A level the palette refuses above (a typo's extra zeros)."""
SET_LEVEL = "Set concurrency to N (or a rate in req/s)"
SET_LEVEL_HELP = "type it: set concurrency 64 · set rate 5 · c=32"


def parse_level(text: str, bare: str = CLOSED) -> Level | None:
    """ "set concurrency 64", "concurrency 64", "c=64", "set rate 2.5", "5 req/s" as a level;
    a bare number is ``bare``'s mode. None when the text is not a level."""
    m = LEVEL_QUERY.match(text)
    if m is None:
        return None
    mode_word, unit = (m["mode"] or "").lower(), m["unit"]
    mode = RATE if mode_word in ("rate", "r") or unit else CLOSED if mode_word else bare
    value = float(m["value"])
    if mode == CLOSED:
        if value != int(value) or not 1 <= value <= MAX_CONCURRENCY:
            return None
        return Level(CLOSED, int(value))
    return Level(RATE, value) if value > 0 else None


class LevelCommands(Provider):
    """The palette's "set concurrency N": what is typed becomes the level (the operator's,
    as a key press is; a running sweep stops). Offered only where a load can be set."""

    def _app(self) -> InfmonApp | None:
        from infmon.ui.app import InfmonApp

        app = self.app
        return app if isinstance(app, InfmonApp) and app.controller is not None else None

    async def discover(self) -> Hits:
        if (app := self._app()) is not None:
            yield DiscoveryHit(SET_LEVEL, app.action_set_level, help=SET_LEVEL_HELP)

    async def search(self, query: str) -> Hits:
        app = self._app()
        if app is None:
            return
        level = parse_level(query)
        if level is not None and re.search(r"[a-z=]", query, re.IGNORECASE):
            what = "concurrency" if level.mode == CLOSED else "rate"
            title = f"Set {what} to {level.value:g}" + (" req/s" if level.mode == RATE else "")
            yield Hit(1.0, title, partial(app.set_level, level), help="the operator's level")
            return
        matcher = self.matcher(query)
        if (score := matcher.match(SET_LEVEL)) > 0:
            yield Hit(
                score, matcher.highlight(SET_LEVEL), app.action_set_level, help=SET_LEVEL_HELP
            )

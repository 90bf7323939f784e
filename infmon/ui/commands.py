"""The command palette lists every key's action, so nothing needs to be remembered."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from textual.app import SystemCommand

if TYPE_CHECKING:
    from infmon.ui.app import InfmonApp

KEYS: tuple[tuple[str, str, str, str, str], ...] = (
    # (binding key, shown key, action, footer label, description)
    ("plus,equals_sign", "+", "load_up", "+1", "concurrency +1 (rate +1 req/s in rate mode)"),
    ("minus", "-", "load_down", "−1", "concurrency −1 (rate −1 req/s in rate mode)"),
    ("right_square_bracket", "]", "load_double", "×2", "double the load"),
    ("left_square_bracket", "[", "load_halve", "÷2", "halve the load"),
    ("r", "r", "toggle_mode", "mode", "switch closed loop ↔ rate mode"),
    ("space", "space", "toggle_pause", "pause", "pause / resume the load"),
    ("w", "w", "toggle_sweep", "sweep", "start / stop the automatic sweep 1, 2, 4, …"),
    ("m", "m", "mark", "mark", "add a mark with a note"),
    ("b", "b", "baseline", "baseline", "set the current step as the baseline"),
    ("s", "s", "snapshot_report", "report", "write the session report now (+ screenshot)"),
    ("t", "t", "next_theme", "theme", "next theme"),
    ("q", "q", "quit", "quit", "write the final report and quit"),
    ("question_mark", "?", "help", "help", "show the keys"),
)
FOOTER_KEYS = {"+", "-", "]", "[", "space", "w", "s", "q", "?"}


def system_commands(app: InfmonApp) -> Iterable[SystemCommand]:
    for _binding, shown, action, _label, description in KEYS:
        title = f"{description[0].upper()}{description[1:]}"
        yield SystemCommand(title, f"key: {shown}", lambda a=action: app.run_action(a))

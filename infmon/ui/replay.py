"""The monitor on a recorded session: the same app and panes, the session rebuilt from the
journal up to a time cursor instead of fed live (``infmon.model.live.session_replay``).

Keys: ``←``/``→`` one second (``shift``: ten), ``[``/``]`` the previous/next step start or
mark, ``space`` play/stop at real speed, ``q`` quit. The load keys do nothing here.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from infmon.model.live.session_replay import Replay
from infmon.ui import format as f
from infmon.ui.app import InfmonApp
from infmon.ui.panes import KneePane
from infmon.ui.screens import HelpScreen

REPLAY_ACTIONS = {"cursor", "jump", "play", "quit", "help", "next_theme"}
"""The actions a replay runs; every other key (the load's) is switched off."""
REPLAY_KEYS = (
    ("←", "back one second (shift+←: ten)"),
    ("→", "forward one second (shift+→: ten)"),
    ("[", "the previous step start or mark"),
    ("]", "the next step start or mark"),
    ("space", "play / stop at real speed"),
    ("t", "next theme"),
    ("q", "quit"),
    ("?", "show the keys"),
)
"""What ``?`` lists in a replay: its own keys (the load keys do nothing here)."""
NO_STEP_YET = "no step held yet at this time (→ or ] moves on)"


class _Cursor:
    """The app's clock: the replay's cursor."""

    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


class ReplayApp(InfmonApp):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "cursor(-1)", "−1 s", key_display="←"),
        Binding("right", "cursor(1)", "+1 s", key_display="→"),
        Binding("shift+left", "cursor(-10)", "−10 s", show=False),
        Binding("shift+right", "cursor(10)", "+10 s", show=False),
        Binding("left_square_bracket", "jump(-1)", "prev step/mark", key_display="["),
        Binding("right_square_bracket", "jump(1)", "next step/mark", key_display="]"),
        Binding("space", "play", "play/stop", key_display="space"),
    ]

    def __init__(self, replay: Replay, at_s: float, **kw: Any) -> None:
        self.replay = replay
        self.cursor = _Cursor(min(max(at_s, replay.start_s), replay.end_s))
        self.playing = False
        self._played_at = 0.0
        kw.setdefault("ui_hz", 4.0)
        super().__init__(replay.at(self.cursor.t), clock=self.cursor, **kw)
        self.title = "infmon replay"

    # ---- keys ---------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return action in REPLAY_ACTIONS

    def action_cursor(self, seconds: float) -> None:
        self.playing = False
        self.move_to(self.cursor.t + float(seconds))

    def action_jump(self, direction: int) -> None:
        self.playing = False
        t = self.cursor.t
        self.move_to(self.replay.next_stop(t) if direction > 0 else self.replay.previous_stop(t))

    def action_play(self) -> None:
        self.playing = not self.playing and self.cursor.t < self.replay.end_s
        self._played_at = time.monotonic()
        self.render_tick()

    def move_to(self, t: float) -> None:
        self.cursor.t = min(max(t, self.replay.start_s), self.replay.end_s)
        self.render_tick()

    def action_help(self, _variant: str = "") -> None:
        self.push_screen(HelpScreen(REPLAY_KEYS))

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(KneePane).empty_hint = NO_STEP_YET

    # ---- drawing ------------------------------------------------------------------------------
    def render_tick(self) -> None:
        if self.playing:
            now = time.monotonic()
            self.cursor.t = min(self.replay.end_s, self.cursor.t + now - self._played_at)
            self._played_at = now
            self.playing = self.cursor.t < self.replay.end_s
        self.session = self.replay.at(self.cursor.t)
        self.session.set_hint(self.hint())
        super().render_tick()

    def hint(self) -> str:
        r, t = self.replay, self.cursor.t
        where = f"replay {f.clock(t - r.start_s)} / {f.clock(r.end_s - r.start_s)}"
        state = "playing" if self.playing else "← → 1 s · [ ] steps and marks · space plays"
        return f"{where} · {state}"

    def _update_footer(self, width: int | None = None) -> None:
        """The replay's own bindings are the footer (no load keys to word for a state)."""

    def run(self, *args: Any, **kwargs: Any) -> None:
        """No closing summary or report: nothing ran."""
        return App.run(self, *args, **kwargs)

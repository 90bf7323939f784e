"""The key row: Textual's ``Footer``, redrawn whether or not the terminal has focus.

Textual's footer skips its redraw while the app is blurred (``App.app_focus`` false), so that a
focus change it caused does not flash the row. infmon's keys are the app's own, not a focused
widget's, so there is nothing to flash; and in a browser (``infmon serve``) the page's terminal
reports a blur as soon as it loads without the keyboard (a headless browser, a tab opened in the
background), which left the row empty for the whole session.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class KeyFooter(Footer):
    def bindings_changed(self, screen: Screen) -> None:
        self._bindings_ready = True
        if self.is_attached and screen is self.screen:
            self.call_after_refresh(self.recompose)

"""UI fixtures: an app wired to the real session and controller, the engine a recorder, the
timers off and a fixed clock."""

from __future__ import annotations

import pytest

from infmon.clock import FakeClock
from infmon.model.live.session import Session
from infmon.ui.app import InfmonApp
from tests.ui.fakes import FakeRecorder, make_controller, new_session


def make_app(
    session: Session | None = None,
    clock: FakeClock | None = None,
    *,
    controller_kw: dict | None = None,
    **kw,
) -> InfmonApp:
    clock = clock or FakeClock(0.0)
    session = session or new_session(clock)
    kw.setdefault("controller", make_controller(session, clock, **(controller_kw or {})))
    kw.setdefault("recorder", FakeRecorder())
    return InfmonApp(session, clock=clock, ui_hz=0, handle_signals=False, user_theme_dir=None, **kw)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(0.0)

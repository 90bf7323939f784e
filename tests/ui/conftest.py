"""UI fixtures: an app wired to fakes with the timers off and a fixed clock."""

from __future__ import annotations

import pytest

from infmon.clock import FakeClock
from infmon.model.session import Session, SessionConfig
from infmon.ui.app import InfmonApp
from tests.ui.fakes import FakeDriver, FakeRecorder


def make_app(session: Session | None = None, clock: FakeClock | None = None, **kw) -> InfmonApp:
    clock = clock or FakeClock(0.0)
    session = session or Session(
        SessionConfig(endpoint="http://127.0.0.1:8000"), start_s=clock.now()
    )
    kw.setdefault("driver", FakeDriver())
    kw.setdefault("recorder", FakeRecorder())
    return InfmonApp(session, clock=clock, ui_hz=0, handle_signals=False, user_theme_dir=None, **kw)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(0.0)

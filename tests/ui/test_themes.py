"""Palettes are TOML data: the built-ins load, user themes join (or replace), bad files are skipped."""

from __future__ import annotations

from pathlib import Path

from infmon.ui.themes import APP_VARIABLES, builtin_theme_dir, load_themes, resolve_theme_name
from tests.ui.conftest import make_app


def test_builtins_ship_as_the_infmon_themes_package():
    d = builtin_theme_dir()
    assert d.resolve() == (Path(__file__).parents[2] / "themes").resolve()
    themes, problems = load_themes(None)
    names = {t.name for t in themes}
    assert {"infmon-dark", "infmon-light", "infmon-contrast"} <= names and problems == []
    light = next(t for t in themes if t.name == "infmon-light")
    assert not light.dark and set(APP_VARIABLES) <= set(light.variables)


def test_user_themes_load_and_bad_ones_are_reported(tmp_path):
    (tmp_path / "mine.toml").write_text(
        'name = "mine"\nprimary = "#ff00ff"\n[variables]\nclient = "#00ff00"\n'
    )
    (tmp_path / "broken.toml").write_text("name = [\n")
    (tmp_path / "nameless.toml").write_text('primary = "#000000"\n')
    themes, problems = load_themes(tmp_path)
    mine = next(t for t in themes if t.name == "mine")
    assert (
        mine.variables["client"] == "#00ff00"
        and mine.variables["server"] == APP_VARIABLES["server"]
    )
    assert len(problems) == 2 and any("broken.toml" in p for p in problems)


def test_short_names_resolve():
    assert resolve_theme_name("light", ["infmon-light"]) == "infmon-light"
    assert resolve_theme_name("nope", ["infmon-light"]) is None


async def test_user_theme_is_selectable_in_the_app(tmp_path, clock):
    (tmp_path / "mine.toml").write_text('name = "mine"\nprimary = "#ff00ff"\n')
    app = make_app(clock=clock, theme_name="mine")
    app2 = type(app)(
        app.session,
        clock=clock,
        ui_hz=0,
        handle_signals=False,
        user_theme_dir=tmp_path,
        theme_name="mine",
    )
    async with app2.run_test():
        assert app2.theme == "mine"
        assert app2.theme_variables["client"] == APP_VARIABLES["client"]


def test_a_skipped_themes_file_is_shown_from_home(tmp_path, monkeypatch):
    """The Events pane's line names the file as a shell would (``~/…``), short enough that
    three such lines and the run's first events fit in the pane together."""
    monkeypatch.setenv("HOME", str(tmp_path))
    themes_dir = tmp_path / ".config" / "infmon" / "themes"
    themes_dir.mkdir(parents=True)
    (themes_dir / "a.toml").write_text('name = "a"\nprimary = "notacolor"\n')
    _, problems = load_themes(themes_dir)
    assert problems == ["~/.config/infmon/themes/a.toml: `primary` is not a colour: 'notacolor'"]
    outside = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    outside.mkdir()
    (outside / "b.toml").write_text("name = [\n")
    _, problems = load_themes(outside)
    assert problems[0].startswith(f"{outside / 'b.toml'}: ")  # not under home: the whole path

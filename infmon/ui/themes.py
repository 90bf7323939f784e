"""Palettes are data: TOML files in ``themes/`` (shipped as ``infmon.themes``) and in
``~/.config/infmon/themes/``, turned into Textual ``Theme`` objects with infmon's variables."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from textual.color import Color
from textual.theme import Theme

from infmon.model.base.sanitize import clean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_THEME = "infmon-dark"
USER_THEME_DIR = Path("~/.config/infmon/themes").expanduser()
COLOR_KEYS = (
    "primary",
    "secondary",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "warning",
    "error",
    "success",
    "boost",
)
APP_VARIABLES = {
    "client": "#5fafff",
    "server": "#ffaf5f",
    "latency-p50": "#5fd787",
    "latency-p90": "#ffd75f",
    "latency-p99": "#ff5f5f",
    "slo": "#d75fd7",
    "kv-low": "#5fd787",
    "kv-high": "#ff5f5f",
    "knee": "#d75fd7",
    "muted": "#8a8a8a",
}
"""Every app variable a theme may set; a palette that leaves one out gets this default."""


class ThemeError(ValueError):
    """A theme file that cannot be used (the message names the file)."""


def builtin_theme_dir() -> Path:
    """``infmon.themes`` when installed; the checkout's top-level ``themes/`` otherwise."""
    try:
        import infmon.themes as pkg  # type: ignore[import-not-found]

        return Path(pkg.__file__).parent
    except ImportError:
        return Path(__file__).resolve().parents[2] / "themes"


def theme_from_toml(path: Path) -> Theme:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ThemeError(f"{path}: {exc}") from None
    if "name" not in data or "primary" not in data:
        raise ThemeError(f"{path}: a theme needs at least `name` and `primary`")
    extra = data.get("variables", {})
    if not isinstance(extra, dict):
        raise ThemeError(f"{path}: `variables` must be a table of colours")
    variables = {**APP_VARIABLES, **{str(k): str(v) for k, v in extra.items()}}
    colors: dict[str, Any] = {k: str(data[k]) for k in COLOR_KEYS if k in data}  # str fields
    for key, value in {**colors, **variables}.items():
        _check_colour(path, key, value)
    try:
        theme = Theme(
            name=str(data["name"]), dark=bool(data.get("dark", True)), variables=variables, **colors
        )
        theme.to_color_system().generate()  # what Textual does when the theme is applied
    except Exception as exc:  # Textual raises ColorParseError, ReprError, ValueError…
        raise ThemeError(f"{path}: not a usable theme ({type(exc).__name__}: {exc})") from None
    return theme


def _check_colour(path: Path, key: str, value: str) -> None:
    """Theme values are colours; anything else (``}`` included) would break the app's CSS."""
    try:
        Color.parse(value)
    except Exception:
        raise ThemeError(
            f"{path}: `{clean(key, 40)}` is not a colour: {clean(value, 40)!r}"
        ) from None


def home_relative(path: Path) -> str:
    """``path`` with the home directory shown as ``~``: a skipped theme's line in the Events
    pane stays short enough that three of them and the run's first events fit together (a
    160x48 screen once lost the first of three under a long home's wrapped paths)."""
    try:
        return str(Path("~") / path.relative_to(Path.home()))
    except (ValueError, RuntimeError):  # not under home, or no home to speak of
        return str(path)


def load_themes(user_dir: Path | None = USER_THEME_DIR) -> tuple[list[Theme], list[str]]:
    """Built-in palettes, then the user's (a user theme may replace a built-in by name).
    Returns the themes and the problems met (bad user files are skipped, not fatal)."""
    themes: dict[str, Theme] = {}
    problems: list[str] = []
    dirs = [builtin_theme_dir()]
    if user_dir is not None and user_dir.is_dir():
        dirs.append(user_dir)
    for directory in dirs:
        for path in sorted(directory.glob("*.toml")):
            try:
                theme = theme_from_toml(path)
            except ThemeError as exc:  # its file shown as a shell would: ~/.config/…
                problems.append(str(exc).replace(str(path), home_relative(path), 1))
                continue
            themes[theme.name] = theme
    return list(themes.values()), problems


def resolve_theme_name(name: str, available: list[str]) -> str | None:
    """``dark`` finds ``infmon-dark``; an exact name always wins."""
    for candidate in (name, f"infmon-{name}"):
        if candidate in available:
            return candidate
    return None

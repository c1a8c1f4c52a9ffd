"""Themes: the shipped TOML files, broken files, fallbacks for servewatch's own colour variables."""

from __future__ import annotations

import re
import tomllib

import pytest
from textual.color import Color

from tests.support.paths import REPO
from tui.app import ServewatchApp
from tui.core.monitor import Monitor
from tui.sources.base import MonitorSink
from tui.theming import (
    BUNDLED_THEMES,
    SW_VARIABLES,
    ThemeFileError,
    bundled_themes_dir,
    load_theme_file,
    load_themes,
    theme_from_mapping,
)
from tui.widgets.bars import VerdictBar

REPO = REPO
THEMES = REPO / "themes"


class _NoSource:
    label = "test"
    mode = "LIVE"
    status = ""
    finished = True
    in_flight = None
    controls = None

    def __init__(self) -> None:
        self.notices: list[str] = []

    def start(self, sink) -> None:
        pass

    def stop(self, timeout: float = 1.0) -> None:
        pass


def make_app(**kw) -> ServewatchApp:
    return ServewatchApp(_NoSource(), MonitorSink(Monitor()), None, **kw)


def same_colour(a: str, b: str) -> bool:
    return Color.parse(a) == Color.parse(b)


def messages(app) -> list[str]:
    return [n.message for n in app._notifications]


@pytest.mark.parametrize("name", BUNDLED_THEMES)
def test_each_shipped_theme_file_loads_with_all_servewatch_variables(name):
    path = THEMES / f"{name}.toml"
    theme = load_theme_file(path)
    assert theme.name == name
    assert set(SW_VARIABLES) <= set(theme.variables)
    for var in SW_VARIABLES:
        Color.parse(theme.variables[var])  # raises if not a colour


def test_bundled_folder_loads_in_order_without_problems():
    assert bundled_themes_dir() == THEMES
    ts = load_themes()
    assert ts.problems == []
    assert ts.names[:3] == list(BUNDLED_THEMES)


@pytest.mark.parametrize("name", BUNDLED_THEMES)
async def test_app_starts_in_each_theme_and_uses_its_variables(name):
    app = make_app(theme=name)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.theme == name
        data = tomllib.loads((THEMES / f"{name}.toml").read_text())
        for var in SW_VARIABLES:
            assert same_colour(app.theme_variables[var], data["variables"][var]), var
        assert not messages(app), "a good theme gives no notification"
        assert app.query_one(VerdictBar).region.height >= 1


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
async def test_broken_theme_file_gives_one_readable_notification_and_the_app_starts(tmp_path):
    (tmp_path / "oops.toml").write_text('name = "oops"\nprimary = "#123456"\n[variables\nsw-good = "#00ff00"\n')
    app = make_app(themes_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        msgs = messages(app)
        assert len(msgs) == 1, msgs
        assert "oops.toml" in msgs[0] and "not valid TOML" in msgs[0]
        assert app.theme == "dark"
        assert app.theme_names == list(BUNDLED_THEMES)
        await pilot.press("t")
        assert app.theme == "light", "the good themes still work"


async def test_bad_colour_names_the_file_and_key(tmp_path):
    (tmp_path / "badcolour.toml").write_text('primary = "#123456"\nsuccess = "blurple-ish"\n')
    app = make_app(themes_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        msgs = messages(app)
        assert len(msgs) == 1
        assert "badcolour.toml" in msgs[0] and "success" in msgs[0] and "not a colour" in msgs[0]


async def test_missing_servewatch_variables_fall_back_to_the_theme_colours(tmp_path):
    (tmp_path / "minimal.toml").write_text(
        'name = "minimal"\nprimary = "#3366cc"\nsuccess = "#22aa44"\nwarning = "#ddaa00"\nerror = "#cc2222"\n'
        'accent = "#aa44cc"\n'
    )
    app = make_app(theme="minimal", themes_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.theme == "minimal"
        assert not messages(app)
        v = app.theme_variables
        # each falls back to the theme's own colour (as Textual's colour system renders it)
        assert v["sw-good"] == v["success"] and same_colour(v["success"], "#22aa44")
        assert v["sw-warn"] == v["warning"] and v["sw-bad"] == v["error"]
        assert v["sw-synthetic"] == v["accent"]
        assert v["sw-na"] == v["foreground-muted"]
        assert "minimal" in app.theme_names


async def test_partial_servewatch_variables_keep_the_given_ones(tmp_path):
    (tmp_path / "partial.toml").write_text('primary = "#3366cc"\nerror = "#cc2222"\n[variables]\nsw-good = "#010203"\n')
    app = make_app(theme="partial", themes_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert same_colour(app.theme_variables["sw-good"], "#010203")
        assert app.theme_variables["sw-bad"] == app.theme_variables["error"]
        assert not same_colour(app.theme_variables["sw-bad"], "#010203")


async def test_unknown_theme_name_notifies_once_and_falls_back_to_dark():
    app = make_app(theme="no-such-theme")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        msgs = messages(app)
        assert len(msgs) == 1 and "no-such-theme" in msgs[0] and "dark" in msgs[0]
        assert app.theme == "dark"


async def test_missing_themes_dir_is_reported(tmp_path):
    app = make_app(themes_dir=tmp_path / "nowhere")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        msgs = messages(app)
        assert len(msgs) == 1 and "nowhere" in msgs[0]


def test_theme_validation_messages():
    with pytest.raises(ThemeFileError, match="missing required colour 'primary'"):
        theme_from_mapping({"success": "#00ff00"}, "x")
    with pytest.raises(ThemeFileError, match="unknown key 'primray'"):
        theme_from_mapping({"primary": "#000000", "primray": "#000000"}, "x")
    with pytest.raises(ThemeFileError, match="unknown servewatch variable 'sw-grood'"):
        theme_from_mapping({"primary": "#000000", "variables": {"sw-grood": "#00ff00"}}, "x")
    with pytest.raises(ThemeFileError, match="dark must be true or false"):
        theme_from_mapping({"primary": "#000000", "dark": "yes"}, "x")
    t = theme_from_mapping({"primary": "#000000"}, "stem")
    assert t.name == "stem" and t.dark is True


def test_no_literal_colours_in_styles_or_widget_code():
    """Styles use theme variables only: no hex / rgb() / hsl() colours in CSS or UI code."""
    literal = re.compile(r"#[0-9a-fA-F]{3,8}\b|\brgba?\(|\bhsla?\(")
    files = [REPO / "tui" / "app.tcss", REPO / "tui" / "app.py"]
    files += sorted((REPO / "tui" / "widgets").glob("*.py")) + sorted((REPO / "tui" / "screens").glob("*.py"))
    offenders = []
    for f in files:
        for i, line in enumerate(f.read_text().splitlines(), 1):
            if literal.search(line):
                offenders.append(f"{f.name}:{i}: {line.strip()}")
    assert offenders == []

"""Console themes: TOML data files turned into Textual themes.

A theme file (``themes/*.toml``) holds the Textual theme colours at the top
level and servewatch's own colour variables under ``[variables]``::

    name = "dark"            # optional, defaults to the file name without .toml
    dark = true
    primary = "#5e9ce6"      # the only required colour
    success = "#7ec27e"      # optional: secondary, accent, warning, error, success,
                             #   foreground, background, surface, panel, boost
    [variables]
    sw-good = "#7ec27e"      # optional: sw-good, sw-warn, sw-bad, sw-synthetic, sw-na

Any ``sw-*`` variable a theme leaves out falls back to the theme's own
success / warning / error / accent / muted-foreground colour
(:func:`sw_variable_defaults`), so a minimal theme still works.

Loading never raises into the app: :func:`load_themes` returns the themes it
could load plus one readable problem line per broken file.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

#: servewatch's own colour variables, and the Textual colour each defaults to.
SW_VARIABLES: dict[str, str] = {
    "sw-good": "success",
    "sw-warn": "warning",
    "sw-bad": "error",
    "sw-synthetic": "accent",
    "sw-na": "foreground-muted",
}

#: The themes shipped in ``themes/`` (and the order ``t`` cycles through them).
BUNDLED_THEMES = ("dark", "light", "high-contrast")
DEFAULT_THEME = "dark"

_COLOUR_KEYS = (
    "primary",
    "secondary",
    "accent",
    "warning",
    "error",
    "success",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
_FLOAT_KEYS = ("luminosity_spread", "text_alpha")
_KNOWN_KEYS = frozenset(("name", "dark", "variables", "description") + _COLOUR_KEYS + _FLOAT_KEYS)


class ThemeFileError(ValueError):
    """A theme file that cannot be used; the message names the file and the problem."""


def sw_variable_defaults(color_variables: Mapping[str, str]) -> dict[str, str]:
    """Fallback values for the ``sw-*`` variables, taken from a generated colour system."""
    out = {}
    for var, source in SW_VARIABLES.items():
        value = color_variables.get(source)
        if value is not None:
            out[var] = value
    return out


def _check_colour(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ThemeFileError(f"{where}: {key} must be a colour string like \"#4ebf71\", got {value!r:.40}")
    try:
        Color.parse(value)
    except ColorParseError:
        raise ThemeFileError(f"{where}: {key} = {value!r:.40} is not a colour (try \"#rrggbb\")") from None
    return value


def theme_from_mapping(data: Mapping[str, Any], default_name: str, where: str | None = None) -> Theme:
    """Build a Textual ``Theme`` from a decoded TOML table; raises ThemeFileError."""
    where = where or default_name
    if not isinstance(data, Mapping):
        raise ThemeFileError(f"{where}: a theme must be a table of keys")
    unknown = sorted(k for k in data if k not in _KNOWN_KEYS)
    if unknown:
        raise ThemeFileError(
            f"{where}: unknown key {unknown[0]!r} (known keys: name, dark, {', '.join(_COLOUR_KEYS)}, "
            f"{', '.join(_FLOAT_KEYS)}, [variables])"
        )
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name.strip():
        raise ThemeFileError(f"{where}: name must be a non-empty string")
    if "primary" not in data:
        raise ThemeFileError(f"{where}: missing required colour 'primary'")
    kwargs: dict[str, Any] = {}
    for key in _COLOUR_KEYS:
        if key in data:
            kwargs[key] = _check_colour(where, key, data[key])
    for key in _FLOAT_KEYS:
        if key in data:
            v = data[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ThemeFileError(f"{where}: {key} must be a number between 0 and 1, got {v!r:.40}")
            kwargs[key] = float(v)
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ThemeFileError(f"{where}: dark must be true or false, got {dark!r:.40}")
    variables = data.get("variables", {})
    if not isinstance(variables, Mapping):
        raise ThemeFileError(f"{where}: [variables] must be a table")
    clean_vars: dict[str, str] = {}
    for key, value in variables.items():
        if key.startswith("sw-"):
            if key not in SW_VARIABLES:
                raise ThemeFileError(
                    f"{where}: unknown servewatch variable {key!r} (known: {', '.join(SW_VARIABLES)})"
                )
            clean_vars[key] = _check_colour(where, f"variables.{key}", value)
        else:
            if not isinstance(value, str):
                raise ThemeFileError(f"{where}: variables.{key} must be a string, got {value!r:.40}")
            clean_vars[key] = value
    return Theme(name=name.strip(), dark=dark, variables=clean_vars, **kwargs)


def load_theme_file(path: str | os.PathLike) -> Theme:
    """Load one theme file; raises ThemeFileError naming the file and the problem."""
    p = Path(path)
    where = str(p)
    from tui.core.bounds import MAX_SMALL_FILE_BYTES
    from tui.sources.infiles import read_input

    try:
        raw = read_input(p, MAX_SMALL_FILE_BYTES, "theme file")  # a regular file, at most 16 MiB: never a FIFO
    except OSError as exc:
        raise ThemeFileError(f"{where}: cannot read ({exc.strerror or exc})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ThemeFileError(f"{where}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ThemeFileError(f"{where}: not valid TOML ({exc})") from None
    except RecursionError:
        raise ThemeFileError(f"{where}: not valid TOML (nested too deep)") from None
    return theme_from_mapping(data, p.stem, where)


def bundled_themes_dir() -> Path | None:
    """The ``themes/`` folder shipped with servewatch (source checkout or installed package)."""
    from tui.resources import bundled_dir

    return bundled_dir("themes")


@dataclass
class ThemeSet:
    """The outcome of loading theme files: usable themes (in cycling order) and problems."""

    themes: list[Theme] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.themes]

    def get(self, name: str) -> Theme | None:
        for t in self.themes:
            if t.name == name:
                return t
        return None


def _theme_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob("*.toml"))
    order = {name: i for i, name in enumerate(BUNDLED_THEMES)}
    return sorted(files, key=lambda p: (order.get(p.stem, len(order)), p.name))


def load_themes(themes_dir: str | os.PathLike | None = None) -> ThemeSet:
    """Load the bundled themes, then those in ``themes_dir`` (same name: the later one wins).

    Never raises: every broken file becomes one line in ``problems``.
    """
    result = ThemeSet()
    folders: list[Path] = []
    bundled = bundled_themes_dir()
    if bundled is not None:
        folders.append(bundled)
    else:
        result.problems.append("bundled themes/ folder not found: using Textual's built-in dark theme")
    if themes_dir is not None:
        extra = Path(themes_dir)
        if not extra.is_dir():
            result.problems.append(f"{extra}: --themes-dir is not a folder")
        elif bundled is None or extra.resolve() != bundled.resolve():
            folders.append(extra)
    by_name: dict[str, Theme] = {}
    for folder in folders:
        for path in _theme_files(folder):
            try:
                theme = load_theme_file(path)
            except ThemeFileError as exc:
                result.problems.append(str(exc))
                continue
            by_name[theme.name] = theme
    result.themes = list(by_name.values())
    return result


def unknown_theme_problem(name: str, themes_dir: str | os.PathLike | None = None) -> str | None:
    """The one line for ``--theme NAME`` when no theme has that name (servewatch's files, ``--themes-dir``,
    Textual's built-ins), listing the themes it knows; None when the theme exists. Checked before the UI starts."""
    themes = load_themes(themes_dir)
    if themes.get(name) is not None:
        return None
    from textual.theme import BUILTIN_THEMES

    if name in BUILTIN_THEMES:
        return None
    own = ", ".join(themes.names) or "none"
    return f"unknown theme {name!r}; servewatch themes: {own}; Textual's own: {', '.join(sorted(BUILTIN_THEMES))}"

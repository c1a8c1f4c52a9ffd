"""servewatch: is this LLM deployment ready for real traffic?

The version is the installed distribution's (``pyproject.toml`` holds the one literal); a checkout that is not
installed says so ("0+unknown") rather than guess a number."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("servewatch")
except PackageNotFoundError:  # run from a checkout that was never pip-installed
    __version__ = "0+unknown"

__all__ = ["__version__"]

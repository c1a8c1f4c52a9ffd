"""The load path's errors (the bottom of ``tui.sources.load``: every other module may raise them).

- :class:`ConfigError`: the load configuration is not usable (bad usage: the CLI exits 2);
- :class:`SetupError`: the run could not start (server unreachable, no model to use, workers that did not start).
"""

from __future__ import annotations


class ConfigError(ValueError):
    """The load configuration is not usable (bad usage: exit code 2)."""


class SetupError(RuntimeError):
    """The run could not start (server unreachable, no model to use)."""

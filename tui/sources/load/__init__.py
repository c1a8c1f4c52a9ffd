"""The live load path, split along its seams.

- :mod:`~tui.sources.load.config`: :class:`LoadConfig` (with the verdict's ``MonitorConfig``), errors;
- :mod:`~tui.sources.load.arrivals`: open-loop arrival schedules from the seed (pure);
- :mod:`~tui.sources.load.prompts`: prompts of a requested length, sized through ``/tokenize``;
- :mod:`~tui.sources.load.stream`: the stream interpreter, bytes in, token events out (pure);
- :mod:`~tui.sources.load.executor`: one request over HTTP (``tui.sources.openai_http``) and its record;
- :mod:`~tui.sources.load.steps`: step bookkeeping, lateness, saturation, the step records;
- :mod:`~tui.sources.load.generator`: :class:`LoadGenerator` and :func:`run_load`, the orchestration.

The names below are the public interface; import the submodules for the rest.
"""

from __future__ import annotations

from tui.sources.load.config import (
    ConfigError,
    LoadConfig,
    SetupError,
    default_step_cap,
    monitor_config,
)
from tui.sources.load.generator import LoadGenerator, RunSummary, run_load
from tui.sources.load.steps import SATURATION_LATENESS_MS

__all__ = [
    "SATURATION_LATENESS_MS",
    "ConfigError",
    "LoadConfig",
    "LoadGenerator",
    "RunSummary",
    "SetupError",
    "default_step_cap",
    "monitor_config",
    "run_load",
]

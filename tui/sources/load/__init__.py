"""The live load path, split along its seams (bottom to top; each module imports only those below it,
by module path, never through this ``__init__``; the import-linter ``layers`` contract in pyproject.toml holds it):

- :mod:`~tui.sources.load.errors`, :mod:`~tui.sources.load.kinds`: the errors (``ConfigError``, ``SetupError``)
  and the vocabularies (mode, arrival process, API, phase);
- :mod:`~tui.sources.load.sizing`: ``--workers auto`` and the open-file limit;
- :mod:`~tui.sources.load.trace_sessions`: what a servewatch recording replays beyond arrivals (sessions, turns,
  prefix groups, dataset rows);
- :mod:`~tui.sources.load.stream`: the stream interpreter, bytes in, token events out (pure);
- :mod:`~tui.sources.load.trace`: traces to replay (Azure, BurstGPT, Mooncake, servewatch records);
- :mod:`~tui.sources.load.prompts`: prompts of a requested length, sized through ``/tokenize``;
- :mod:`~tui.sources.load.steps`: step bookkeeping, lateness, saturation, the step records;
- :mod:`~tui.sources.load.arrivals`: open-loop arrival schedules from the seed, and planned arrivals (pure);
- :mod:`~tui.sources.load.executor`: one request over HTTP (``tui.sources.openai_http``) and its record;
- :mod:`~tui.sources.load.config`: :class:`LoadConfig` (with the verdict's ``MonitorConfig``);
- :mod:`~tui.sources.load.wire`: what travels between the coordinator and its workers;
- :mod:`~tui.sources.load.runner`: the request loop of one step (in process and in every worker);
- :mod:`~tui.sources.load.worker` / :mod:`~tui.sources.load.coordinator`: the worker's engine and the coordinator;
- :mod:`~tui.sources.load.worker_process` / :mod:`~tui.sources.load.ray_workers`: a worker as a process (``python
  -m``, imported by nothing here) and as a Ray actor;
- :mod:`~tui.sources.load.generator`: :class:`LoadGenerator` and :func:`run_load`, the orchestration.

The names below are the public interface for callers outside this package; import the submodules for the rest.
"""

from __future__ import annotations

from tui.sources.load.config import LoadConfig, default_step_cap, monitor_config
from tui.sources.load.errors import ConfigError, SetupError
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

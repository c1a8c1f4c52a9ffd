"""The load path's vocabularies (pure names, no behaviour): what a step's mode, arrival process, API and phase may be.

``Arrival`` is the arrival *process* (``--arrival``); one planned arrival of a step is
:class:`tui.sources.load.arrivals.PlannedArrival`.
"""

from __future__ import annotations

from typing import Literal

Mode = Literal["closed", "open"]  # closed: levels are concurrency; open: levels are req/s
Arrival = Literal["poisson", "constant", "gamma"]
Api = Literal["chat", "completions"]
Phase = Literal["warmup", "measure"]

MODES: tuple[Mode, ...] = ("closed", "open")
ARRIVALS: tuple[Arrival, ...] = ("poisson", "constant", "gamma")
APIS: tuple[Api, ...] = ("chat", "completions")

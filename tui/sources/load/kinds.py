"""The load path's vocabularies (pure names, no behaviour): what a step's mode, arrival process, API (and its
endpoint) and phase may be.

``Arrival`` is the arrival *process* (``--arrival``); one planned arrival of a step is
:class:`tui.sources.load.arrivals.PlannedArrival`.
"""

from __future__ import annotations

from typing import Literal

Mode = Literal["closed", "open"]  # closed: levels are concurrency; open: levels are req/s
Arrival = Literal["poisson", "constant", "gamma"]
Api = Literal["chat", "completions", "embeddings"]
Phase = Literal["warmup", "measure"]

MODES: tuple[Mode, ...] = ("closed", "open")
ARRIVALS: tuple[Arrival, ...] = ("poisson", "constant", "gamma")
APIS: tuple[Api, ...] = ("chat", "completions", "embeddings")
#: each API's path under the server's /v1 (embeddings: one JSON answer per request, no token stream)
ENDPOINTS: dict[str, str] = {"chat": "/chat/completions", "completions": "/completions", "embeddings": "/embeddings"}
#: the APIs whose answers are token streams (TTFT, TPOT and ITL measured); the others answer in one piece
STREAMED_APIS: tuple[Api, ...] = ("chat", "completions")

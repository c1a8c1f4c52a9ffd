"""One home for each default a user can override: the command-line flags, the settings dataclasses and the
library functions all read them from here, so a default is changed in one place.

Units are in the names (``_MS``, ``_S``, ``_MINUTES``); fractions are plain floats in (0, 1).
"""

from __future__ import annotations

from typing import Final

# The goal: a request is good when it completes and its time to first token is within the SLO; the deployment
# passes when at least TARGET of requests are good, judged at significance ALPHA over a window of at least
# MIN_WINDOW_MINUTES.
SLO_TTFT_MS = 1000.0
TARGET = 0.95
ALPHA = 0.05
MIN_WINDOW_MINUTES = 10.0
MIN_WINDOW_S = MIN_WINDOW_MINUTES * 60.0

# The console's rolling window (time-based unless a request count is given) and its sparkline buckets.
ROLLING_S = 60.0
BUCKET_S = 5.0
RECENT_ROWS = 500
# Shortest batch length of the dependence correction (the judge also uses x2, x4, x8).
BATCH_S = 15.0

# Comparing two runs: the largest drop in good fraction still counted as "no worse".
COMPARE_MARGIN = 0.02

# Where the console writes its exports (relative to the working directory).
EXPORT_DIR = "exports"

# The environment variable the OpenAI-compatible client reads its API key from.
API_KEY_ENV = "OPENAI_API_KEY"

# load (`run`, `live`, `sweep`: the load test's flags and tui.sources.load.config.LoadConfig)
# (the two words are Final: typed as their literal values, as the settings' Literal fields want)
LOAD_API: Final = "chat"  # /v1/chat/completions
# --api embeddings: no tokens are streamed (TTFT, TPOT and ITL cannot be judged); E2E is the SLO, at most this
EMBEDDINGS_SLO_E2E_MS = 1000.0
ARRIVAL: Final = "poisson"  # the open-loop arrival process
BURSTINESS = 1.0  # gamma arrivals: coefficient of variation of the gaps (1 = Poisson)
INPUT_TOKENS = 128  # prompt length, tokens
OUTPUT_TOKENS = 64  # max_tokens per request
WARMUP_REQUESTS = 0
ROUNDS = 1
LOAD_SEED = 0  # seed of the lengths and arrivals
LOAD_WORKERS = 1  # load processes: 1 = the coordinator itself
METRICS_INTERVAL_S = 1.0  # seconds between metrics/GPU samples
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 300.0  # the longest silence allowed, queueing included
# A step run until decided is capped at the minimum window plus this (time to also reach the minimum count).
COUNT_ALLOWANCE_S = 300.0

# `servewatch drill` (issue 39; tui.core.drill): the rolling window of the recovery rule and the step it moves by,
# how long an operator's act (--fault-manual) is awaited after the baseline, how often /health is asked during a
# fault drill, and the requests the cold-start TTFT is the median of. The baseline, hold and RTO default to the
# verdict's window and the recovery phase to twice it (tui.core.drill.settings).
DRILL_RECOVERY_WINDOW_S = 30.0
DRILL_STEP_S = 5.0
DRILL_MANUAL_WAIT_S = 600.0
DRILL_HEALTH_INTERVAL_S = 0.25
DRILL_COLD_REQUESTS = 3

# evidence/cli
# `servewatch watch`: seconds between scrapes of one metrics page, and between Prometheus queries (keep the
# latter at least twice Prometheus' own scrape interval).
WATCH_METRICS_INTERVAL_S = 5.0
WATCH_PROMETHEUS_INTERVAL_S = 30.0
# `servewatch compare`: the one-sided error level of each per-level decision.
COMPARE_ALPHA = ALPHA
# Record files are read (and digest chains verified) this many bytes at a time: memory bounded by the chunk.
READ_CHUNK_BYTES = 1 << 20
# `servewatch replay`: as recorded.
REPLAY_SPEED = 1.0

# split: the quality regression verdict (`servewatch quality`, `accept`'s quality policy): the largest drop in pass
# rate still "no worse", the error level (the verdict's), the fewest usable paired cases a PASS needs, and the seed
# sent with every deterministic request.
QUALITY_MARGIN = 0.05
QUALITY_ALPHA = ALPHA
QUALITY_MIN_CASES = 20
QUALITY_SEED = 1234
QUALITY_SUITE_CASES = 200  # the standard suite's default size (80 of them long-context)
QUALITY_SUITE_SEED = 2024  # the standard suite's generator seed (recorded in the result)
QUALITY_CONTEXT_FRACTIONS = (0.25, 0.5, 0.9)  # long-context prompt lengths, as fractions of the model's context
QUALITY_REPEAT = 1  # attempts per case (--repeat K scores the majority)

# imports (issue 21): counted tokens (`tui.core.token_counts`). A server count and a client count of one request
# disagree when they differ by more than max(TOKEN_TOLERANCE_TOKENS, floor(TOKEN_TOLERANCE_FRACTION x the server's
# count)); each length distribution is exact over up to TOKEN_EXACT_DISTINCT distinct values, then coarsened.
TOKEN_TOLERANCE_TOKENS = 1
TOKEN_TOLERANCE_FRACTION = 0.02
TOKEN_EXACT_DISTINCT = 4096

# issue 23: length distributions of --input-tokens / --output-tokens (`tui.core.lengths`). A normal or lognormal
# draw is rounded and clamped to [LENGTH_CLIP_MIN, LENGTH_CLIP_MAX] unless the form names its own bounds ([LO-HI]).
LENGTH_CLIP_MIN = 1
LENGTH_CLIP_MAX = 32768

# issue 23, datasets (`tui.core.datasets`, `tui.sources.load.dataset`): `--dataset FILE` is refused when more than
# DATASET_MAX_BAD_SHARE of its rows are bad (--dataset-max-bad-share); the server's /tokenize counts the texts of the
# first DATASET_TOKENIZE_ROWS rows exactly, DATASET_TOKENIZE_CONCURRENCY calls at once (the other rows: estimated at
# the ratio measured on those); without /tokenize, DATASET_CHARS_PER_TOKEN characters per token (labelled estimate).
DATASET_MAX_BAD_SHARE = 0.05
DATASET_TOKENIZE_ROWS = 2000
DATASET_TOKENIZE_CONCURRENCY = 8
DATASET_CHARS_PER_TOKEN = 4.0

# issue 23, REPORTING: the per-turn table of a session workload (`tui.core.turns`): turn indexes from
# TURN_ROWS_CAP up share one row ("N+"); each row keeps TURN_TTFT_EXACT TTFTs exactly, then a sketch.
TURN_ROWS_CAP = 32
TURN_TTFT_EXACT = 20_000

# issue 23, sessions (`tui.core.thinktime`, `tui.sources.load.workload`): a normal, lognormal or exponential think
# time is clamped to [0, THINK_CLIP_MAX_S] seconds unless the form names its own bounds.
THINK_CLIP_MAX_S = 600.0

# issue 25, the HTML report's charts (`tui.core.chartdata`): per level at most CHART_SAMPLE_REQUESTS requests are
# drawn one by one (an evenly spaced sample above that, said on the chart; failures kept apart, as many again); a
# time series (queue, GPU memory) keeps at most CHART_SAMPLE_POINTS samples the same way; a TTFT distribution (CDF)
# is drawn through CHART_CDF_POINTS quantiles.
CHART_SAMPLE_REQUESTS = 4000
CHART_SAMPLE_POINTS = 2000
CHART_CDF_POINTS = 200

# issue 26, `servewatch plan` (`tui.core.plan`): the demand of a trace is its arrival rate over windows of
# DEMAND_WINDOW_MINUTES; PLAN_SPARE replicas are added to those the peak needs (N+1: one can fail or be drained).
DEMAND_WINDOW_MINUTES = 5.0
PLAN_SPARE = 1

# issue 26, the capacity search (`servewatch sweep --search`, `tui.core.search`): bisect between the ladder's last
# PASS and first FAIL until the bracket is within SEARCH_PRECISION of its lower end ((high - low) / low) or the
# probes have used SEARCH_BUDGET_MINUTES (no probe is started that could run past it: a probe's cap is the step cap).
SEARCH_PRECISION = 0.10
SEARCH_BUDGET_MINUTES = 30.0

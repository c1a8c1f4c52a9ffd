"""One home for each default a user can override: the command-line flags, the settings dataclasses and the
library functions all read them from here, so a default is changed in one place.

Units are in the names (``_MS``, ``_S``, ``_MINUTES``); fractions are plain floats in (0, 1).
"""

from __future__ import annotations

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

# split: the quality regression verdict (`servewatch quality`, `accept`'s quality policy): the largest drop in pass
# rate still "no worse", the error level (the verdict's), the fewest usable paired cases a PASS needs, and the seed
# sent with every deterministic request.
QUALITY_MARGIN = 0.05
QUALITY_ALPHA = ALPHA
QUALITY_MIN_CASES = 20
QUALITY_SEED = 1234

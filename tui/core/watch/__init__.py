"""Watch mode: judge a running service from what its servers already measure.

Pure logic (standard library only). The sources (``tui/sources/watch.py``) hand in either labelled samples from
one server's ``/metrics`` (cumulative counters and histograms) or window increases already computed by Prometheus
(``increase(...[w])`` summed over replicas); everything here turns them into per-window figures and an honest
verdict:

- cumulative snapshots -> per-window deltas; a counter that went *down* means the server restarted (counter
  reset): the window restarts there and says so (``scrape``, ``windows``);
- the good fraction from histogram buckets is exact only when the SLO is a bucket bound; otherwise it is a
  bracket [pessimistic, optimistic] from the neighbouring bounds, never an interpolated point. PASS is judged on
  the pessimistic end, FAIL on the optimistic end (``histogram``, ``judge``);
- denominator = all TTFT observations plus the requests the server counts as aborted or errored (a request
  aborted after its first token is then counted twice: conservative);
- requests still queued are in neither count, so when the queue grew over the window, or queue time exceeded the
  SLO for a share that matters, the verdict cannot be PASS (``judge.queue_blocks``);
- completion is not observable from a TTFT histogram, and server-side TTFT excludes the network, TLS, proxies and
  client queueing: both are said wherever a verdict is shown (``notes``).

The per-engine metric names are ``tui.core.engines``; the watch record (``Window``, ``window_from_record``,
``window_to_record``) is ``tui.core.records.watch``, with the other record definitions. ``describe`` turns a
window into plain values, ``console`` into the console's ``Snapshot``; ``selectors`` reads label selectors.

This ``__init__`` re-exports the public names for callers outside the package (``from tui.core.watch import
WatchConfig``); the modules inside import each other by module path, never through it.
"""

from __future__ import annotations

from tui.core.engines import ENGINES, WatchMetrics, detect_engine
from tui.core.records.watch import INF, Buckets, Window, window_from_record, window_to_record
from tui.core.watch.console import (
    build_snapshot,
)
from tui.core.watch.describe import (
    WatchState,
    canary_text,
    describe_window,
)
from tui.core.watch.histogram import (
    Bracket,
    count_of,
    fmt_quantile,
    good_bracket,
    quantile_bracket,
    share_above,
)
from tui.core.watch.judge import (
    WatchConfig,
    WatchJudgement,
    WatchVerdict,
    canary_outcome,
    canary_verdict,
    judge_once,
    make_judge,
    queue_blocks,
)
from tui.core.watch.notes import (
    COMPLETION_NOTE,
    NO_TTFT_NOTE,
    NOT_EXPOSED,
    SERVER_TTFT_LABEL,
)
from tui.core.watch.scrape import (
    Cumulative,
    Sample,
    cumulative_from_samples,
)
from tui.core.watch.selectors import (
    matches,
    models_seen,
    parse_selector,
)
from tui.core.watch.windows import (
    advance,
    merge_windows,
    window_between,
)

__all__ = [
    "Bracket",
    "Buckets",
    "COMPLETION_NOTE",
    "Cumulative",
    "ENGINES",
    "INF",
    "NOT_EXPOSED",
    "NO_TTFT_NOTE",
    "SERVER_TTFT_LABEL",
    "Sample",
    "WatchConfig",
    "WatchJudgement",
    "WatchMetrics",
    "WatchState",
    "WatchVerdict",
    "Window",
    "advance",
    "build_snapshot",
    "canary_text",
    "canary_outcome",
    "canary_verdict",
    "count_of",
    "cumulative_from_samples",
    "describe_window",
    "detect_engine",
    "fmt_quantile",
    "good_bracket",
    "judge_once",
    "make_judge",
    "matches",
    "merge_windows",
    "models_seen",
    "parse_selector",
    "quantile_bracket",
    "queue_blocks",
    "share_above",
    "window_between",
    "window_from_record",
    "window_to_record",
]

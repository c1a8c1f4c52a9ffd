"""Windows: two scrapes -> the increases between them, with a counter that went down read as a server restart
(the window restarts there and says so); consecutive windows added up; Prometheus' growing ``increase()`` span
cut into the part not yet judged.
"""

from __future__ import annotations

from collections.abc import Sequence

from tui.core.records.watch import Buckets, Window
from tui.core.watch.scrape import Cumulative


def _bucket_delta(a: Buckets | None, b: Buckets | None) -> tuple[Buckets | None, bool]:
    """(b - a per bound, reset?) ; bounds must match."""
    if a is None or b is None:
        return None, False
    da, db = dict(a), dict(b)
    if set(da) != set(db):
        return None, True  # bucket layout changed: a restart with other settings
    out = []
    for le, cb in b:
        d = cb - da[le]
        if d < -1e-9:
            return None, True
        out.append((le, max(0.0, d)))
    return tuple(out), False


def window_between(a: Cumulative, b: Cumulative, source: str = "metrics") -> Window:
    """The window from scrape ``a`` to scrape ``b``. A counter that decreased is a reset: the
    returned window then starts at ``b`` (empty) and carries ``reset``."""
    gaps = list(b.missing)
    reset = False
    parts = {}
    for key in ("ttft", "e2e", "queue_time", "itl", "tpot"):
        d, r = _bucket_delta(getattr(a, key), getattr(b, key))
        reset |= r
        parts[key] = d
    scal: dict[str, float | None] = {}
    for key in ("success", "failed", "preemptions"):
        va, vb = getattr(a, key), getattr(b, key)
        if va is None or vb is None:
            scal[key] = None
            continue
        if vb + 1e-9 < va:
            reset = True
        scal[key] = max(0.0, vb - va)
    if reset:
        return Window(t_start=b.t, t_end=b.t, engine=b.engine, source=source, waiting_start=b.waiting,
                      waiting_end=b.waiting, running=b.running, kv_cache=b.kv_cache, gaps=tuple(gaps),
                      reset="counter reset between scrapes (server restarted?): the window restarts at this scrape")
    return Window(t_start=a.t, t_end=b.t, engine=b.engine, source=source, ttft=parts["ttft"], e2e=parts["e2e"],
                  queue_time=parts["queue_time"], success=scal["success"], failed=scal["failed"],
                  preemptions=scal["preemptions"], waiting_start=a.waiting, waiting_end=b.waiting,
                  running=b.running, kv_cache=b.kv_cache, gaps=tuple(gaps), itl=parts["itl"], tpot=parts["tpot"])


def merge_windows(ws: Sequence[Window]) -> Window | None:
    """Consecutive windows added up (the per-window figures of a longer span)."""
    ws = [w for w in ws if w is not None]
    if not ws:
        return None

    def add_b(x: Buckets | None, y: Buckets | None) -> Buckets | None:
        if x is None:
            return y
        if y is None:
            return x
        dx, dy = dict(x), dict(y)
        if set(dx) != set(dy):
            return None
        return tuple((le, dx[le] + dy[le]) for le in sorted(dx))

    def add_s(x: float | None, y: float | None) -> float | None:
        if x is None:
            return y
        if y is None:
            return x
        return x + y

    out = ws[0]
    for w in ws[1:]:
        out = Window(t_start=out.t_start, t_end=w.t_end, engine=w.engine, source=w.source,
                     ttft=add_b(out.ttft, w.ttft), e2e=add_b(out.e2e, w.e2e),
                     queue_time=add_b(out.queue_time, w.queue_time), success=add_s(out.success, w.success),
                     failed=add_s(out.failed, w.failed), preemptions=add_s(out.preemptions, w.preemptions),
                     waiting_start=out.waiting_start, waiting_end=w.waiting_end, running=w.running,
                     kv_cache=w.kv_cache, gaps=tuple(dict.fromkeys(out.gaps + w.gaps)), reset=out.reset or w.reset,
                     itl=add_b(out.itl, w.itl), tpot=add_b(out.tpot, w.tpot))
    return out


def advance(fed: Window | None, cur: Window) -> tuple[Window, Window]:
    """Prometheus' sequential windows: ``cur`` holds ``increase()`` over the whole span since the
    watch's anchor; ``fed`` what was already judged. Returns (the new part as a window, the new
    ``fed``). Non-overlapping ``increase()`` windows would lose every increment that falls between
    the last sample of one window and the first of the next; a growing span loses none. A count
    that shrinks (extrapolation settling) is held, never fed back negative."""
    if fed is None:
        return cur, cur
    if cur.ttft is None:
        gap = Window(t_start=fed.t_end, t_end=cur.t_end, engine=cur.engine, source=cur.source,
                     waiting_start=fed.waiting_end, waiting_end=cur.waiting_end, running=cur.running,
                     kv_cache=cur.kv_cache, gaps=cur.gaps)
        return gap, fed

    def bdiff(a: Buckets | None, b: Buckets | None) -> tuple[Buckets | None, Buckets | None]:
        if b is None:
            return None, a
        if a is None:
            return b, b
        da = dict(a)
        if set(da) != {le for le, _ in b}:
            return None, b
        held = tuple((le, max(c, da[le])) for le, c in b)
        return tuple((le, max(0.0, c - da[le])) for le, c in held), held

    def sdiff(a, b):
        if b is None:
            return None, a
        if a is None:
            return b, b
        h = max(a, b)
        return h - a, h

    t, t_f = bdiff(fed.ttft, cur.ttft)
    e, e_f = bdiff(fed.e2e, cur.e2e)
    q, q_f = bdiff(fed.queue_time, cur.queue_time)
    s, s_f = sdiff(fed.success, cur.success)
    f, f_f = sdiff(fed.failed, cur.failed)
    p, p_f = sdiff(fed.preemptions, cur.preemptions)
    i, i_f = bdiff(fed.itl, cur.itl)
    o, o_f = bdiff(fed.tpot, cur.tpot)
    delta = Window(t_start=fed.t_end, t_end=cur.t_end, engine=cur.engine, source=cur.source, ttft=t, e2e=e,
                   queue_time=q, success=s, failed=f, preemptions=p, waiting_start=fed.waiting_end,
                   waiting_end=cur.waiting_end, running=cur.running, kv_cache=cur.kv_cache, gaps=cur.gaps,
                   itl=i, tpot=o)
    new_fed = Window(t_start=fed.t_start, t_end=cur.t_end, engine=cur.engine, source=cur.source, ttft=t_f, e2e=e_f,
                     queue_time=q_f, success=s_f, failed=f_f, preemptions=p_f, waiting_start=fed.waiting_start,
                     waiting_end=cur.waiting_end, running=cur.running, kv_cache=cur.kv_cache, itl=i_f, tpot=o_f)
    return delta, new_fed

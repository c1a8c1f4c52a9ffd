"""Watch sources: read what a serving fleet already measures (no Textual here).

- ``MetricsWatcher``: scrapes ONE server's Prometheus exposition (``--metrics-url``) with
  prometheus-client's parser; judges that replica only, and only from when the watch started.
- ``PrometheusWatcher``: queries a Prometheus server's HTTP API (``--prometheus-url``,
  ``/api/v1/query``) for ``increase(...[w])`` summed over every replica the selector matches.

Neither sends anything to the model servers' inference endpoints: ``MetricsWatcher`` GETs the
metrics page only, ``PrometheusWatcher`` talks to Prometheus only. The optional canary
(``--probe-rate``) lives in ``Canary`` and reuses the load generator's request path.

Headers (API keys, ``--header`` values) are sent and never written anywhere: not in records,
notes, errors or reprs.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

import tui.core.defaults as D
from tui.core import watch as core
from tui.core.redact import redact_url
from tui.core.slos import Slos
from tui.core.textsafe import term
from tui.sources.metrics import parse_labeled  # noqa: F401 (the one parser; re-exported for callers)

__all__ = ["CANARY_DROP", "CANARY_KEEP", "MetricsWatcher", "PrometheusWatcher", "WatchError", "parse_labeled", "Canary"]

#: canary records kept in memory (the newest; tui.sources.evidence_watch reads a recording the same way)
CANARY_KEEP, CANARY_DROP = 5000, 1000


class WatchError(Exception):
    """A usage-level problem (several models and no selector, no known engine, bad URL): exit 2."""


def _describe(exc: BaseException) -> str:
    import httpx

    if isinstance(exc, httpx.ConnectError):
        return "connection refused or host unreachable"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    return type(exc).__name__


def make_client(headers: dict | None, insecure: bool = False, timeout: float = 10.0) -> Any:
    """An httpx client like the load generator's (TLS verification on unless --insecure;
    SSL_CERT_FILE / SSL_CERT_DIR honoured; no proxies from the environment)."""
    import os

    import httpx

    verify: Any = True
    if insecure:
        verify = False
    else:
        cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
        if (cafile and os.path.isfile(cafile)) or (capath and os.path.isdir(capath)):
            import ssl

            try:
                verify = ssl.create_default_context(cafile=cafile if cafile and os.path.isfile(cafile) else None,
                                                    capath=capath if capath and os.path.isdir(capath) else None)
            except (OSError, ssl.SSLError):
                verify = True
    return httpx.AsyncClient(headers=dict(headers or {}), timeout=timeout, verify=verify, trust_env=False,
                             follow_redirects=False)


# ------------------------------------------------------------------ one server's /metrics


class MetricsWatcher:
    """Scrapes one server's metrics page. ``scrape()`` -> (Cumulative | None, reason | None)."""

    kind = "metrics"

    def __init__(self, url: str, *, selector: str | None = None, client: Any = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.url = url
        self.label = redact_url(url)
        self.matchers = core.parse_selector(selector)
        self.selector = selector
        self.client = client
        self.clock = clock
        self.engine: str | None = None
        self.scrapes_ok = 0
        self.scrapes_failed = 0
        self.models: list[str] = []

    def __repr__(self) -> str:
        return f"MetricsWatcher({self.label!r}, engine={self.engine!r})"

    @property
    def scope(self) -> str:
        return ("one replica (this server's /metrics), judged only from when the watch started; "
                "for the whole fleet and the last window at once use --prometheus-url")

    async def scrape(self) -> tuple[core.Cumulative | None, str | None]:
        t = self.clock()
        try:
            resp = await self.client.get(self.url)
        except Exception as exc:
            self.scrapes_failed += 1
            return None, f"scrape failed: {_describe(exc)}"
        if resp.status_code != 200:
            self.scrapes_failed += 1
            return None, f"scrape failed: HTTP {resp.status_code}"
        try:
            text = resp.text
        except Exception:
            self.scrapes_failed += 1
            return None, "scrape failed: undecodable body"
        samples = parse_labeled(text)
        names = {s[0] for s in samples}
        engine = core.detect_engine(names)
        if engine is None:
            self.scrapes_failed += 1
            return None, "no known serving metrics on this page (vLLM, SGLang, TensorRT-LLM, Dynamo, llama.cpp, TGI)"
        if self.engine is not None and engine != self.engine:
            return None, f"the page changed engine ({self.engine} -> {engine})"
        self.engine = engine
        self.models = core.models_seen(samples, engine)
        if self.matchers:
            samples = [s for s in samples if core.matches(s[1], self.matchers)]
        elif len(self.models) > 1:
            raise WatchError(f"several models behind this endpoint ({', '.join(self.models)}): "
                             f"pick one with --selector 'model_name=\"{self.models[0]}\"'")
        self.scrapes_ok += 1
        return core.cumulative_from_samples(samples, engine, t), None


def _clock(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    return f"{s // 60}:{s % 60:02d}"


def _judgeable(c: core.Cumulative) -> str:
    """What a scrape holds to judge ("TTFT histogram, 120 finished requests"), "" when nothing matched."""
    have = []
    if c.ttft is not None:
        have.append("TTFT histogram")
    if c.e2e is not None:
        have.append("end-to-end histogram")
    if c.success is not None or c.failed is not None:
        have.append(f"{(c.success or 0) + (c.failed or 0):g} finished requests so far")
    return ", ".join(have)


def _what_missing(watcher: Any, c: core.Cumulative) -> str:
    models = getattr(watcher, "models", None) or ()
    seen = f"models on the page: {', '.join(term(m) for m in list(models)[:5])}" if models else "no model label seen"
    miss = "; ".join(term(m) for m in c.missing[:3])
    return f"{seen}{'; ' + miss if miss else ''}"


def _selector_words(watcher: Any) -> str:
    sel = getattr(watcher, "selector", None)
    return f"the selector {term(sel)}" if sel else "the engine's TTFT, end-to-end or request-count series"


# ------------------------------------------------------------------ Prometheus HTTP API


class PrometheusWatcher:
    """Windows from a Prometheus server: ``increase(x[w])`` summed over replicas, at a given time."""

    kind = "prometheus"

    def __init__(self, url: str, *, selector: str | None = None, client: Any = None,
                 clock: Callable[[], float] = time.time, engine: str | None = None) -> None:
        self.base = url.rstrip("/")
        self.label = redact_url(url)
        self.selector = (selector or "").strip().strip("{}").strip()
        self.client = client
        self.clock = clock
        self.engine = engine
        self.models: list[str] = []
        self.queries = 0

    def __repr__(self) -> str:
        return f"PrometheusWatcher({self.label!r}, engine={self.engine!r})"

    @property
    def scope(self) -> str:
        return "the whole fleet Prometheus scrapes" + (f" matching {{{self.selector}}}" if self.selector else "")

    def _sel(self, extra: str = "") -> str:
        parts = [p for p in (self.selector, extra) if p]
        return "{" + ",".join(parts) + "}" if parts else ""

    async def query(self, q: str, t: float | None = None) -> list[dict]:
        """The result vector of an instant query (raises WatchQueryError with a short reason)."""
        params = {"query": q}
        if t is not None:
            params["time"] = f"{t:.3f}"
        self.queries += 1
        try:
            resp = await self.client.get(self.base + "/api/v1/query", params=params)
        except Exception as exc:
            raise QueryError(f"query failed: {_describe(exc)}") from None
        try:
            body = resp.json()
        except Exception:
            raise QueryError(f"query failed: HTTP {resp.status_code}, not JSON") from None
        if resp.status_code != 200 or not isinstance(body, dict) or body.get("status") != "success":
            err = body.get("error") if isinstance(body, dict) else None
            raise QueryError(f"query failed: HTTP {resp.status_code}" + (f": {str(err)[:120]}" if err else ""))
        data = body.get("data") or {}
        res = data.get("result")
        if data.get("resultType") != "vector" or not isinstance(res, list):
            raise QueryError("query failed: unexpected result type")
        return res

    @staticmethod
    def _value(item: dict) -> float | None:
        try:
            v = float(item["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            return None
        return v if math.isfinite(v) else None

    async def detect(self) -> str:
        """Find the engine (and refuse several models without a selector). Raises WatchError."""
        names = sorted({n for m in core.ENGINES.values() for n in m.detect})
        alt = "|".join(n.replace(".", "\\\\.") for n in names)
        res = await self.query(f'group by (__name__) ({{__name__=~"{alt}"{"," + self.selector if self.selector else ""}}})')
        present = {r.get("metric", {}).get("__name__") for r in res}
        engine = core.detect_engine(n for n in present if n)
        if engine is None:
            raise WatchError("Prometheus has no serving metrics from a known engine"
                             + (f" matching {{{self.selector}}}" if self.selector else "")
                             + " (vLLM, SGLang, TensorRT-LLM, Dynamo, llama.cpp, TGI)")
        self.engine = engine
        m = core.ENGINES[engine]
        base = [x for x in ((m.ttft + "_count") if m.ttft else None,) if x] + list(m.waiting)
        labs = ", ".join(m.model_labels)
        alt2 = "|".join(base)
        res = await self.query(f'group by ({labs}) ({{__name__=~"{alt2}"{"," + self.selector if self.selector else ""}}})')
        models = set()
        for r in res:
            met = r.get("metric", {})
            for lab in m.model_labels:
                if met.get(lab):
                    models.add(met[lab])
                    break
        self.models = sorted(models)
        if not self.selector and len(self.models) > 1:
            raise WatchError(f"several models in this Prometheus ({', '.join(self.models)}): "
                             f"pick one with --selector '{m.model_labels[0]}=\"{self.models[0]}\"'")
        return engine

    async def _hist(self, base: str | None, w: float, t: float, gaps: list) -> core.Buckets | None:
        if base is None:
            return None
        rng = _range(w)
        try:
            res = await self.query(f"sum by (le) (increase({base}_bucket{self._sel()}[{rng}]))", t)
        except QueryError as exc:
            gaps.append(f"{base}: {exc}")
            return None
        acc = {}
        for r in res:
            le_s = r.get("metric", {}).get("le")
            v = self._value(r)
            try:
                le = float(str(le_s).replace("+Inf", "inf"))
            except ValueError:
                continue
            if v is None:
                gaps.append(f"{base}: NaN in the window")
                return None
            acc[le] = max(0.0, v)
        if not acc:
            gaps.append(f"{base}: series missing in the window (or the window is shorter than two scrape "
                        "intervals)")
            return None
        if math.inf not in acc:
            gaps.append(f"{base}: no +Inf bucket")
            return None
        out, run = [], 0.0
        for le in sorted(acc):  # extrapolated increases can break monotonicity by a hair: restore it
            run = max(run, acc[le])
            out.append((le, run))
        return tuple(out)

    async def _counter(self, spec: Any, w: float, t: float, gaps: list, zero_if_missing: bool) -> float | None:
        if not spec:
            return None
        rng = _range(w)
        total, seen = 0.0, False
        for name, label, values in spec:
            extra = f'{label}=~"{"|".join(values)}"' if label else ""
            try:
                res = await self.query(f"sum(increase({name}{self._sel(extra)}[{rng}]))", t)
            except QueryError as exc:
                gaps.append(f"{name}: {exc}")
                return None
            for r in res:
                v = self._value(r)
                if v is None:
                    gaps.append(f"{name}: NaN in the window")
                    return None
                total += max(0.0, v)
                seen = True
        if not seen:
            if zero_if_missing:
                return 0.0
            gaps.append(f"{spec[0][0]}: series missing in the window")
            return None
        return total

    async def _gauge(self, names: Any, t: float, how: str = "sum") -> float | None:
        for n in names:
            try:
                res = await self.query(f"{how}({n}{self._sel()})", t)
            except QueryError:
                return None
            for r in res:
                v = self._value(r)
                if v is not None:
                    if how == "max":
                        if 1.0 < v <= 100.0:
                            v /= 100.0
                        return v if 0.0 <= v <= 1.0 else None
                    return v
        return None

    async def window(self, seconds: float, t: float | None = None) -> core.Window:
        """The window of ``seconds`` ending at ``t`` (default now), over every matching replica."""
        engine = self.engine if self.engine is not None else await self.detect()
        t = self.clock() if t is None else t
        m = core.ENGINES[engine]
        gaps: list[str] = []
        ttft = await self._hist(m.ttft, seconds, t, gaps)
        e2e = await self._hist(m.e2e, seconds, t, gaps)
        qt = await self._hist(m.queue_time, seconds, t, gaps)
        itl = await self._first_hist(m.itl, seconds, t)
        tpot = await self._first_hist(m.tpot, seconds, t)
        succ = await self._counter(m.success, seconds, t, gaps, zero_if_missing=False)
        fail = await self._counter(m.failed, seconds, t, gaps, zero_if_missing=ttft is not None)
        pre = None
        if m.preemptions:
            pre = await self._counter(tuple((p, None, ()) for p in m.preemptions), seconds, t, [], True)
        return core.Window(
            t_start=t - seconds, t_end=t, engine=engine, source="prometheus", ttft=ttft, e2e=e2e,
            queue_time=qt, success=succ, failed=fail, preemptions=pre,
            waiting_start=await self._gauge(m.waiting, t - seconds), waiting_end=await self._gauge(m.waiting, t),
            running=await self._gauge(m.running, t), kv_cache=await self._gauge(m.kv_cache, t, "max"),
            gaps=tuple(gaps), itl=itl, tpot=tpot,
        )

    async def _first_hist(self, names: tuple[str, ...], w: float, t: float) -> core.Buckets | None:
        """The first of ``names`` (newer first) Prometheus has; None when none (an SLO needing it then says
        it is not judgeable)."""
        for base in names:
            h = await self._hist(base, w, t, [])
            if h is not None:
                return h
        return None


class QueryError(Exception):
    pass


def _range(seconds: float) -> str:
    """A PromQL range of ``seconds`` in whole milliseconds (at least 1 s): whole seconds rounded up moved a
    window's start by up to a second, onto a scrape that belongs to the window before."""
    return f"{max(1000, round(seconds * 1000.0))}ms"


# ------------------------------------------------------------------ the canary


class Canary:
    """One small streamed request every 1/rate seconds through the load generator's own request
    path (``LoadGenerator.request_once``); each record goes to ``emit`` like any load request."""

    def __init__(self, url: str, rate: float, emit: Callable[[dict], None], *, model: str | None = None,
                 api_key_env: str | None = D.API_KEY_ENV,
                 headers: Any = None, insecure: bool = False,
                 slos: Slos | None = None, output_tokens: int = 8, input_tokens: int = 16) -> None:
        from tui.sources.load import LoadConfig, LoadGenerator, monitor_config

        self.rate = float(rate)
        cfg = LoadConfig(url=url, model=model, api_key_env=api_key_env, headers=list(headers or []),
                         insecure=insecure, monitor=monitor_config(slos=slos or Slos()), output_tokens=(output_tokens, output_tokens),
                         input_tokens=(input_tokens, input_tokens), metrics=False, gpu=False, levels=[rate],
                         mode="open")
        self.gen = LoadGenerator(cfg, emit)
        self.sent = 0

    async def ensure_model(self) -> None:
        if self.gen.model:
            return
        from tui.sources.metrics import server_info

        info = await server_info(self.gen.root, headers=self.gen.headers)
        models = info.get("models") or []
        if not models:
            raise WatchError("--probe-rate needs --model (the server lists no model)")
        self.gen.model = models[0]

    async def run(self, stop: asyncio.Event) -> None:
        await self.ensure_model()
        loop = asyncio.get_running_loop()
        nxt = loop.time()
        while not stop.is_set():
            try:
                await self.gen.request_once(level=self.rate, phase="measure")
            except Exception:
                pass  # request_once records every failure itself
            self.sent += 1
            nxt += 1.0 / self.rate
            delay = max(0.0, nxt - loop.time())
            try:
                await asyncio.wait_for(stop.wait(), timeout=delay if delay > 0 else 0.001)
            except TimeoutError:
                pass


# ------------------------------------------------------------------ a watch session


class WatchSession:
    """Runs one watch: windows from a watcher into the sequential judgement, records them, and
    (optionally) runs the canary. Used by the headless command and the console source.

    ``emit(dict)`` receives every record (run header, watch windows, canary requests); pass a
    Recorder's ``write`` to keep them. Nothing here writes a header value or a key."""

    def __init__(self, watcher: Any, cfg: core.WatchConfig, *, emit: Callable[[dict], Any] | None = None,
                 interval: float = 5.0, canary: Canary | None = None, header: dict | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.watcher = watcher
        self.cfg = cfg
        self.judgement = core.WatchJudgement(cfg)
        self._emit = emit
        self.interval = float(interval)
        self.canary = canary
        self.header = header
        self.clock = clock
        self.last_window: core.Window | None = None
        self.last_gap: str | None = None
        self.windows_recorded = 0
        self.canary_records: list[dict] = []
        self.error: str | None = None
        self.started_at: float | None = None
        self._prev: core.Cumulative | None = None
        self._header_written = False
        self._t_prev: float | None = None
        self._anchor: float | None = None  # Prometheus: the start of the evidence (increase() since then)
        self._fed: core.Window | None = None  # Prometheus: the cumulative window already judged
        self.lock: Any = None  # a threading.Lock when a console thread reads the state

    # -- records -----------------------------------------------------------

    def emit(self, d: dict) -> None:
        if d.get("type") == "request":
            self.canary_records.append(d)
            if len(self.canary_records) > CANARY_KEEP:  # the report of the recording keeps them the same way
                del self.canary_records[:CANARY_DROP]
        if self._emit is not None:
            try:
                self._emit(d)
            except Exception:
                pass

    def _write_header(self) -> None:
        if self._header_written or self.header is None:
            return
        h = dict(self.header)
        h.setdefault("watch", {})
        h["watch"] = dict(h["watch"], engine=self.watcher.engine, scope=self.watcher.scope)
        self.emit(h)
        self._header_written = True

    def _add(self, w: core.Window, gap: str | None = None) -> None:
        from contextlib import nullcontext

        with self.lock if self.lock is not None else nullcontext():
            self.last_window = w
            self.last_gap = gap or ("; ".join(w.gaps) if w.ttft is None and w.gaps and not w.reset else None)
            self.judgement.add(w)
        self.emit(core.window_to_record(w))
        self.windows_recorded += 1

    def _gap(self, t0: float, t1: float, reason: str) -> None:
        """A failed scrape or query: shown and recorded as a gap, nothing invented."""
        self.last_gap = reason
        eng = self.watcher.engine
        if eng is None:
            return
        self._add(core.Window(t_start=t0, t_end=t1, engine=eng, source=self.watcher.kind, gaps=(reason,)), gap=reason)

    # -- one fixed window --------------------------------------------------

    #: `--once` on a /metrics page: scrapes finding nothing to judge after which it stops, and the time bound
    NOTHING_SCRAPES = 3
    NOTHING_S = 30.0

    async def once(self, window_s: float, sleep: Callable[[float], Any] | None = None,
                   t_end: float | None = None, progress: Callable[[str], Any] | None = None) -> core.Window | None:
        """One window of ``window_s``: from Prometheus at once (ending at ``t_end``, default now), from /metrics by
        scrapes ``interval`` apart over ``window_s`` (``sleep`` waits between them), each said through ``progress``
        (one line). A page on which no series match (the selector, or the engine's latency and count series) after
        NOTHING_SCRAPES scrapes or NOTHING_S seconds ends the wait: ``error`` says "nothing to judge: ..." and the
        result is None."""
        self.started_at = self.clock()
        if isinstance(self.watcher, PrometheusWatcher):
            await self.watcher.detect()
            self._write_header()
            try:
                w = await self.watcher.window(window_s, t_end)
            except QueryError as exc:
                self.error = str(exc)
                return None
            self._add(w)
            return w
        say = progress or (lambda line: None)
        wait = sleep or asyncio.sleep
        a, why = await self.watcher.scrape()
        if a is None:
            self.error = why
            return None
        self._write_header()
        t0 = a.t
        scrapes, empty = 1, 0
        b = a
        while True:
            matched = _judgeable(b)
            empty = 0 if matched else empty + 1
            elapsed = b.t - t0
            say(f"watch --once: scrape {scrapes} at {_clock(elapsed)} of {_clock(window_s)}: "
                + (matched if matched else f"no series match ({_what_missing(self.watcher, b)})"))
            if empty and (empty >= self.NOTHING_SCRAPES or elapsed >= self.NOTHING_S):
                self.error = (f"nothing to judge: no series match {_selector_words(self.watcher)} on "
                              f"{self.watcher.label} after {scrapes} scrapes ({_what_missing(self.watcher, b)})")
                return None
            if elapsed >= window_s and scrapes > 1:  # a window lies between two scrapes, even a 0-s one
                break
            await wait(max(0.0, min(self.interval, window_s - elapsed)))
            nxt, why = await self.watcher.scrape()
            scrapes += 1
            if nxt is None:
                self.error = why
                self._gap(t0, self.clock(), why or "scrape failed")
                return None
            b = nxt
        w = core.window_between(a, b, "metrics")
        self._add(w)
        return w

    # -- continuous --------------------------------------------------------

    async def step(self, first_window_s: float | None = None) -> None:
        """One scrape or query, judged. Raises WatchError (usage-level problems) only."""
        now = self.clock()
        if isinstance(self.watcher, PrometheusWatcher):
            try:
                if self.watcher.engine is None:
                    await self.watcher.detect()
                    self._write_header()
            except QueryError as exc:
                self.last_gap = str(exc)
                return
            if self._anchor is None:
                self._anchor = now - (first_window_s or self.interval)
            try:
                cur = await self.watcher.window(now - self._anchor, now)
            except QueryError as exc:
                self._gap(self._fed.t_end if self._fed is not None else self._anchor, now, str(exc))
                return
            delta, self._fed = core.advance(self._fed, cur)
            self._add(delta)
            self._t_prev = now
            return
        cur, why = await self.watcher.scrape()
        if cur is None:
            self._gap(self._prev.t if self._prev else now, now, why or "scrape failed")
            return
        self._write_header()
        if (cur.ttft is None and self._prev is not None and self._prev.ttft is not None
                and core.ENGINES[cur.engine].ttft):
            # the TTFT series vanished from this scrape: a gap; the next good scrape measures from the
            # last good one (cumulative counters lose nothing in between)
            self._gap(self._prev.t, now, "; ".join(m for m in cur.missing if "time_to_first_token" in m)
                      or "TTFT series missing")
            return
        if self._prev is not None:
            self._add(core.window_between(self._prev, cur, "metrics"))
        else:
            self.last_gap = None
        self._prev = cur

    async def run(self, stop: asyncio.Event, *, first_window_s: float | None = None,
                  on_update: Callable[[], Any] | None = None) -> None:
        """Judge from the start of the watch until ``stop`` is set. With Prometheus, the first
        window is the last ``first_window_s`` (the answer at once), then consecutive windows."""
        self.started_at = self.clock()
        canary_task = None
        if self.canary is not None:
            canary_task = asyncio.ensure_future(self.canary.run(stop))
        loop = asyncio.get_running_loop()
        try:
            nxt = loop.time()
            while not stop.is_set():
                await self.step(first_window_s)
                if on_update is not None:
                    try:
                        on_update()
                    except Exception:
                        pass
                nxt += self.interval
                delay = max(0.0, nxt - loop.time())
                if delay == 0.0:
                    nxt = loop.time()
                try:
                    await asyncio.wait_for(stop.wait(), timeout=delay if delay > 0 else 0.001)
                except TimeoutError:
                    pass
        finally:
            if canary_task is not None:
                stop.set()
                try:
                    await asyncio.wait_for(canary_task, timeout=30)
                except (TimeoutError, Exception):
                    pass

    # -- what to show ------------------------------------------------------

    def has_ttft(self) -> bool:
        eng = self.watcher.engine
        return bool(eng and core.ENGINES[eng].ttft)

    def verdict(self) -> core.WatchVerdict:
        if not self.has_ttft() and self.canary is not None and self.watcher.engine:
            return core.canary_verdict(self.canary_records, self.cfg)
        return self.judgement.verdict(has_ttft=self.has_ttft())

    def canary_summary(self) -> dict | None:
        """Client-side TTFT of the canary beside the server-side figure, and the difference."""
        if self.canary is None:
            return None
        recs = [r for r in self.canary_records if r.get("phase") == "measure"]
        ttfts = sorted((r["t_first_token"] - r["t_sent"]) * 1000.0 for r in recs
                       if r.get("t_first_token") is not None)
        good = sum(1 for r in recs if core.canary_outcome(r, self.cfg.slos)[0] == "good")  # the one outcome rule
        med = ttfts[(len(ttfts) - 1) // 2] if ttfts else None
        server_med = None
        w = self.judgement.span or self.last_window
        if w is not None and w.ttft is not None:
            server_med = core.quantile_bracket(w.ttft, 0.5)
        diff = None
        if med is not None and server_med is not None and not math.isinf(server_med[1]):
            diff = (med - server_med[1] * 1000.0, med - server_med[0] * 1000.0)
        return {"sent": len(recs), "good": good, "client_ttft_p50_ms": med,
                "server_ttft_p50_bucket_ms": None if server_med is None else
                [server_med[0] * 1000.0, None if math.isinf(server_med[1]) else server_med[1] * 1000.0],
                "client_minus_server_p50_ms": None if diff is None else list(diff),
                "note": "canary: client-side TTFT of the probe requests, measured like any load request"}

"""Server-side queue telemetry: scrape an inference server's Prometheus ``/metrics``.

Turns the exposition text of vLLM, SGLang, TGI and llama.cpp (llama-server) into
``queue`` record dicts (record format v1, see ``tui.core.records``)::

    {"type": "queue", "t": ..., "source": "vllm", "waiting": 3.0, "running": 8.0,
     "kv_cache_usage": 0.42, "client_in_flight": 11}

Parsing uses prometheus-client's text parser; nothing here parses exposition
text by hand. Which engine is talking is detected from the metric names.

A server without metrics is normal (metrics disabled, a proxy in front, a 404,
connection refused): the scraper emits ONE ``queue`` dict with ``source: "none"``
and a ``note`` saying why, then only client-side in-flight samples
(``source: "client"``). It never raises into its caller.

Request headers may carry credentials: they are sent, never logged, never put
into a record or a note.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import tui.core.prefix_cache as prefix_cache
from tui.core.redact import redact_url

__all__ = [
    "ENGINES",
    "EngineMetrics",
    "MetricsScraper",
    "detect_engine",
    "metrics_url_for",
    "parse_queue",
    "parse_samples",
    "redact_url",
    "server_info",
]


@dataclass(frozen=True)
class EngineMetrics:
    """Sample names (as they appear on the wire) that feed each queue field.

    Names are tried in order; the first one present wins (newer name first).
    """

    waiting: tuple[str, ...]
    running: tuple[str, ...]
    kv_cache_usage: tuple[str, ...] = ()


#: Engines in detection order. Sample names are matched exactly as the server
#: writes them (prometheus-client keeps full sample names even where it strips
#: ``_total`` from a counter's *family* name).
ENGINES: dict[str, EngineMetrics] = {
    "vllm": EngineMetrics(
        waiting=("vllm:num_requests_waiting",),
        running=("vllm:num_requests_running",),
        # kv_cache_usage_perc (V1 engine) replaced gpu_cache_usage_perc; both are 0..1 fractions.
        kv_cache_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    ),
    "sglang": EngineMetrics(
        waiting=("sglang:num_queue_reqs",),
        running=("sglang:num_running_reqs",),
        kv_cache_usage=("sglang:token_usage",),
    ),
    "tgi": EngineMetrics(
        waiting=("tgi_queue_size",),
        running=("tgi_batch_current_size",),
    ),
    "llamacpp": EngineMetrics(
        waiting=("llamacpp:requests_deferred",),
        running=("llamacpp:requests_processing",),
        # Only older llama-server builds export this gauge.
        kv_cache_usage=("llamacpp:kv_cache_usage_ratio",),
    ),
}

Samples = dict[str, list[float]]


# ------------------------------------------------------------------ parsing


def _collect(families: Iterable[Any], out: Samples) -> None:
    for fam in families:
        for s in fam.samples:
            v = s.value
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            out.setdefault(s.name, []).append(float(v))


def parse_samples(text: str) -> Samples:
    """Map sample name -> values (one per label set) using prometheus-client's parser.

    Never raises. If the whole text does not parse (one bad line makes the parser
    give up), each sample line is parsed on its own and bad lines are dropped, so
    one odd line does not hide the gauges around it.
    """
    from prometheus_client.parser import text_string_to_metric_families

    if not isinstance(text, str) or not text.strip():
        return {}
    out: Samples = {}
    try:
        _collect(text_string_to_metric_families(text), out)
        return out
    except Exception:  # parser raises ValueError and friends on malformed input
        out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            _collect(text_string_to_metric_families(line + "\n"), out)
        except Exception:
            continue
    return out


def detect_engine(samples: Samples | Iterable[str] | str) -> str | None:
    """Which engine wrote these metrics: "vllm", "sglang", "tgi", "llamacpp" or None.

    Accepts exposition text, a ``parse_samples`` result, or an iterable of sample names.
    An engine is recognised by its waiting or running gauge.
    """
    if isinstance(samples, str):
        names = set(parse_samples(samples))
    else:
        names = set(samples)
    for engine, m in ENGINES.items():
        if any(n in names for n in m.waiting + m.running):
            return engine
    return None


def _finite(values: list[float] | None) -> list[float]:
    return [v for v in (values or ()) if math.isfinite(v)]


def _sum_first(samples: Samples, names: tuple[str, ...]) -> float | None:
    for n in names:
        vals = _finite(samples.get(n))
        if vals:
            return float(sum(vals))
    return None


def _kv_usage(samples: Samples, names: tuple[str, ...]) -> float | None:
    """The fullest KV cache over all label sets (a ratio: max, not sum), as 0..1."""
    for n in names:
        vals = [v for v in _finite(samples.get(n)) if v >= 0.0]
        if not vals:
            continue
        v = max(vals)
        if v > 1.0 and v <= 100.0:  # a server that reports percent despite the docs
            v = v / 100.0
        if v > 1.0:
            return None  # not a usable ratio; leave N/A rather than guess
        return v
    return None


def parse_queue(text: str, t: float) -> dict | None:
    """A ``queue`` record dict from Prometheus exposition text, or None when no known engine.

    waiting/running are summed over all label sets (several models or engines
    behind one endpoint); kv_cache_usage is the maximum over label sets.
    ``client_in_flight`` is None here; the scraper fills it in.
    """
    samples = parse_samples(text)
    engine = detect_engine(samples)
    if engine is None:
        return None
    m = ENGINES[engine]
    return {
        "type": "queue",
        "t": float(t),
        "source": engine,
        "waiting": _sum_first(samples, m.waiting),
        "running": _sum_first(samples, m.running),
        "kv_cache_usage": _kv_usage(samples, m.kv_cache_usage),
        "client_in_flight": None,
    }


# ------------------------------------------------------------------ URLs


def server_root(base_url: str) -> str:
    """Base URL with any trailing ``/`` and ``/v1`` removed."""
    root = str(base_url).strip().rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root.rstrip("/")


def metrics_url_for(base_url: str) -> str:
    return server_root(base_url) + "/metrics"


# ------------------------------------------------------------------ scraper

Emit = Callable[[dict], "Awaitable[Any] | Any"]


async def _call_emit(emit: Emit, rec: dict) -> None:
    try:
        res = emit(rec)
        if inspect.isawaitable(res):
            await res
    except Exception:
        # A consumer bug must not kill telemetry; it is the consumer's to report.
        pass


def _describe_error(exc: BaseException) -> str:
    """Short reason without URLs or headers (which may carry secrets)."""
    import httpx

    if isinstance(exc, httpx.ConnectError):
        return "connection refused or host unreachable"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    if isinstance(exc, httpx.HTTPError):
        return type(exc).__name__
    return type(exc).__name__


class MetricsScraper:
    """Poll ``/metrics`` (and llama.cpp's ``/slots``) every ``interval`` seconds.

    ``emit(record_dict)`` is called once per sample (sync or async callable).
    ``in_flight()`` (optional) returns the client's current in-flight request count.

    States: scraping ("vllm"/"sglang"/"tgi"/"llamacpp" samples) or, after the
    metrics endpoint proved unusable, client-only ("client" samples, emitted only
    when ``in_flight`` is given). Entering client-only mode emits one
    ``source: "none"`` dict with a ``note``. While client-only, the endpoint is
    retried every ``retry_s`` seconds and scraping resumes if it starts working.
    A scraper that has worked tolerates ``max_failures - 1`` failed scrapes in a
    row (a busy server can be slow to answer) before giving up on it.
    """

    def __init__(
        self,
        base_url: str,
        metrics_url: str | None = None,
        interval: float = 1.0,
        headers: dict | None = None,
        in_flight: Callable[[], int] | None = None,
        client: Any = None,
        *,
        timeout: float = 5.0,
        retry_s: float = 30.0,
        max_failures: int = 3,
        slots: bool | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.base_url = server_root(base_url)
        self.metrics_url = metrics_url or metrics_url_for(base_url)
        self.slots_url = self.base_url + "/slots"
        self.interval = max(0.05, float(interval))
        self._headers = dict(headers or {})
        self.in_flight = in_flight
        self._client = client
        self.timeout = float(timeout)
        self.retry_s = float(retry_s)
        self.max_failures = max(1, int(max_failures))
        # None = poll /slots when the engine is llama.cpp, until it answers badly once.
        self._slots_enabled = slots
        self.clock = clock
        self.engine: str | None = None
        self.state = "starting"  # "starting" | "scraping" | "none"
        self.note: str | None = None
        self.samples_emitted = 0
        self.scrapes_ok = 0
        self.scrapes_failed = 0

    @property
    def label(self) -> str:
        return redact_url(self.metrics_url)

    def __repr__(self) -> str:  # never shows headers
        return f"MetricsScraper({self.label!r}, state={self.state!r}, engine={self.engine!r})"

    # -- one scrape -----------------------------------------------------

    async def _get(self, client: Any, url: str) -> Any:
        return await client.get(url, headers=self._headers, timeout=self.timeout)

    async def scrape_once(self, client: Any) -> tuple[dict | None, str | None]:
        """(queue dict or None, failure reason or None). Never raises."""
        t = self.clock()
        try:
            resp = await self._get(client, self.metrics_url)
        except Exception as exc:
            return None, f"{self.label}: {_describe_error(exc)}"
        if resp.status_code != 200:
            return None, f"{self.label}: HTTP {resp.status_code}"
        try:
            text = resp.text
        except Exception:
            return None, f"{self.label}: undecodable body"
        rec = parse_queue(text, t)
        if rec is None:
            return None, f"{self.label}: no known queue metrics (vLLM, SGLang, TGI, llama.cpp)"
        self.engine = rec["source"]
        if rec["source"] == "llamacpp" and self._slots_enabled is not False:
            busy, total = await self._slots(client)
            if busy is not None:
                rec["slots_busy"] = busy
                rec["slots_total"] = total
        return rec, None

    async def _slots(self, client: Any) -> tuple[int | None, int | None]:
        try:
            resp = await self._get(client, self.slots_url)
        except Exception:
            return None, None  # network trouble: try again next tick
        try:
            if resp.status_code != 200:
                raise ValueError(f"HTTP {resp.status_code}")
            data = resp.json()
            if not isinstance(data, list):
                raise ValueError("not a list")
            busy = sum(1 for s in data if isinstance(s, dict) and s.get("is_processing") is True)
            return busy, len(data)
        except Exception:
            if self._slots_enabled is None:
                self._slots_enabled = False  # endpoint off in this build/config: stop asking
            return None, None

    def _client_rec(self, t: float, source: str) -> dict:
        n = None
        if self.in_flight is not None:
            try:
                v = self.in_flight()
                n = int(v) if v is not None else None
            except Exception:
                n = None
        return {
            "type": "queue",
            "t": t,
            "source": source,
            "waiting": None,
            "running": None,
            "kv_cache_usage": None,
            "client_in_flight": n,
        }

    # -- loop -----------------------------------------------------------

    async def run(self, emit: Emit, stop_event: asyncio.Event) -> None:
        """Sample until ``stop_event`` is set. Never raises (except cancellation)."""
        own = self._client is None
        client = self._client
        try:
            if own:
                import httpx

                client = httpx.AsyncClient(follow_redirects=False)
            await self._loop(client, emit, stop_event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # last resort: telemetry never takes the caller down
            self.state = "none"
            self.note = f"metrics scraper stopped: {type(exc).__name__}"
        finally:
            if own and client is not None:
                try:
                    await client.aclose()
                except Exception:
                    pass

    async def _loop(self, client: Any, emit: Emit, stop_event: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        next_tick = loop.time()
        failures = 0
        next_retry = 0.0
        while not stop_event.is_set():
            now = loop.time()
            if self.state != "none" or now >= next_retry:
                rec, reason = await self.scrape_once(client)
            else:
                rec, reason = None, None
            if rec is not None:
                self.scrapes_ok += 1
                failures = 0
                self.state = "scraping"
                self.note = None
                if self.in_flight is not None:
                    rec["client_in_flight"] = self._client_rec(rec["t"], "client")["client_in_flight"]
                await _call_emit(emit, rec)
                self.samples_emitted += 1
            else:
                if reason is not None:
                    self.scrapes_failed += 1
                    failures += 1
                    next_retry = loop.time() + self.retry_s
                give_up = reason is not None and self.state != "none" and (
                    self.state == "starting" or failures >= self.max_failures
                )
                if give_up:
                    self.state = "none"
                    self.note = f"no server queue metrics: {reason}"
                    none_rec = self._client_rec(self.clock(), "none")
                    none_rec["note"] = self.note
                    await _call_emit(emit, none_rec)
                    self.samples_emitted += 1
                elif self.in_flight is not None:
                    await _call_emit(emit, self._client_rec(self.clock(), "client"))
                    self.samples_emitted += 1
            next_tick += self.interval
            delay = next_tick - loop.time()
            if delay < 0:  # fell behind (slow server): do not burst to catch up
                next_tick = loop.time()
                delay = 0.0
            try:
                await asyncio.wait_for(stop_event.wait(), timeout=delay if delay > 0 else 0.001)
            except TimeoutError:
                pass


# ------------------------------------------------------------------ server info


async def server_info(base_url: str, headers: dict | None = None, client: Any = None, timeout: float = 5.0) -> dict:
    """Engine, build and model facts from ``/props``, ``/version``, ``/info`` and ``/v1/models``.

    Only what the server actually answered goes in; ``{}`` when nothing answered.
    Never raises and never includes the request headers.
    """
    root = server_root(base_url)
    hdrs = dict(headers or {})
    info: dict = {}
    own = client is None
    try:
        if own:
            import httpx

            client = httpx.AsyncClient(follow_redirects=False)

        async def get_json(path: str) -> Any:
            try:
                r = await client.get(root + path, headers=hdrs, timeout=timeout)
                if r.status_code != 200:
                    return None
                return r.json()
            except Exception:
                return None

        props, version, tgi_info, models = await asyncio.gather(
            get_json("/props"), get_json("/version"), get_json("/info"), get_json("/v1/models")
        )

        if isinstance(props, dict):  # llama.cpp
            if "build_info" in props or "default_generation_settings" in props:
                info["engine"] = "llamacpp"
            if isinstance(props.get("build_info"), str):
                info["build"] = props["build_info"]
            if isinstance(props.get("model_path"), str):
                info["model"] = props["model_path"]
            if isinstance(props.get("model_ftype"), str):
                info["quantization"] = props["model_ftype"]
            if isinstance(props.get("total_slots"), int):
                info["slots"] = props["total_slots"]
            dgs = props.get("default_generation_settings")
            if isinstance(dgs, dict) and isinstance(dgs.get("n_ctx"), int):
                info["n_ctx_per_slot"] = dgs["n_ctx"]
        if isinstance(version, dict) and isinstance(version.get("version"), str):
            info.setdefault("build", version["version"])
        if isinstance(tgi_info, dict) and isinstance(tgi_info.get("model_id"), str):  # TGI
            info.setdefault("engine", "tgi")
            info.setdefault("model", tgi_info["model_id"])
            if isinstance(tgi_info.get("version"), str):
                info.setdefault("build", tgi_info["version"])
        if isinstance(models, dict) and isinstance(models.get("data"), list):
            ids = [m.get("id") for m in models["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)]
            if ids:
                info["models"] = ids
                info.setdefault("model", ids[0])
            owners = {m.get("owned_by") for m in models["data"] if isinstance(m, dict)}
            for owner, engine in (("vllm", "vllm"), ("sglang", "sglang"), ("llamacpp", "llamacpp")):
                if owner in owners:
                    info.setdefault("engine", engine)
            max_len = [m.get("max_model_len") for m in models["data"] if isinstance(m, dict)]
            if max_len and isinstance(max_len[0], int):
                info.setdefault("max_model_len", max_len[0])
    except Exception:
        return info
    finally:
        if own and client is not None:
            try:
                await client.aclose()
            except Exception:
                pass
    return info


# ------------------------------------------------------------------ latency histograms at step boundaries (issue 21)

#: the step record's histogram keys -> the engine field that names them (tui.core.engines.WatchMetrics)
HIST_FIELDS = (("ttft", "ttft"), ("itl", "itl"), ("tpot", "tpot"), ("e2e", "e2e"), ("queue", "queue_time"))


def parse_labeled(text: str) -> list[tuple[str, dict, float]]:
    """(sample name, labels, value) triples via prometheus-client's parser. Never raises: if the
    whole text does not parse, each line is parsed alone and bad lines are dropped."""
    from prometheus_client.parser import text_string_to_metric_families

    out: list[tuple[str, dict, float]] = []

    def collect(fams: Any) -> None:
        for fam in fams:
            for s in fam.samples:
                v = s.value
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    continue
                out.append((s.name, dict(s.labels), float(v)))

    if not isinstance(text, str) or not text.strip():
        return out
    try:
        collect(text_string_to_metric_families(text))
        return out
    except Exception:
        out.clear()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            collect(text_string_to_metric_families(line + "\n"))
        except Exception:
            continue
    return out


def _one_histogram(samples: list[tuple[str, dict, float]], base: str, model_labels: tuple[str, ...],
                   model: str | None) -> tuple[dict | None, str | None]:
    """One histogram summed over its series (by ``le``) as the step record writes it, or (None, why). With
    ``model`` given and series labelled with it, only those series."""
    rows = [(n, lab, v) for n, lab, v in samples if n in (base + "_bucket", base + "_count", base + "_sum")]
    if not rows:
        return None, None
    if model:
        mine = [r for r in rows if any(r[1].get(k) == model for k in model_labels)]
        if mine:
            rows = mine
    acc: dict[float, float] = {}
    count = total = 0.0
    for n, lab, v in rows:
        if not math.isfinite(v):
            return None, f"{base}: NaN in a series"
        if n.endswith("_bucket"):
            try:
                le = float(str(lab.get("le", "nan")).replace("+Inf", "inf"))
            except ValueError:
                return None, f"{base}: a bucket without a usable le"
            if math.isnan(le):
                return None, f"{base}: a bucket without a usable le"
            acc[le] = acc.get(le, 0.0) + v
        elif n.endswith("_count"):
            count += v
        else:
            total += v
    if math.inf not in acc:
        return None, f"{base}: no +Inf bucket"
    les = sorted(acc)
    return {"name": base, "le": ["+Inf" if math.isinf(le) else le for le in les], "counts": [acc[le] for le in les],
            "count": count, "sum": total}, None


def parse_histograms(text: str, model: str | None = None) -> dict | None:
    """``{"engine", "hists": {"ttft"|"itl"|"e2e"|"queue": {...}}, "problems": [...]}`` (and ``prefix_cache``:
    ``tui.core.prefix_cache.counters``, when the page has them) from exposition text, or
    None when no known engine wrote it. A histogram the engine does not export is left out; one it should
    export and the page lacks is a problem, said."""
    from tui.core.engines import ENGINES as WATCHED
    from tui.core.engines import detect_engine as detect_watched

    samples = parse_labeled(text)
    engine = detect_watched(n for n, _l, _v in samples)
    if engine is None:
        return None
    m = WATCHED[engine]
    hists: dict[str, dict] = {}
    problems: list[str] = []
    for key, fname in HIST_FIELDS:
        val = getattr(m, fname)
        names = tuple(x for x in ((val,) if isinstance(val, str) or val is None else val) if x)
        if not names:
            continue
        why_first: str | None = None
        for base in names:
            h, why = _one_histogram(samples, base, m.model_labels, model)
            if h is not None:
                hists[key] = h
                break
            why_first = why_first or why
        else:
            problems.append(why_first or f"{names[0]}: series missing")
    out: dict[str, Any] = {"engine": engine, "hists": hists, "problems": problems}
    pc = prefix_cache.counters(samples, model)  # issue 23: vLLM's prefix-cache counters, same scrape
    if pc is not None:
        out["prefix_cache"] = pc
    return out


class StepHistograms:
    """Scrapes the server's latency histograms at a step's start and end (``snapshot``) and makes the step end
    record's ``server_histograms`` of the two (``combine``). Never raises. A server whose page is missing, or
    that exports no latency histogram (llama.cpp), is asked once and then left alone: its steps carry none."""

    def __init__(self, base_url: str, metrics_url: str | None = None, headers: dict | None = None,
                 *, timeout: float = 5.0, clock: Callable[[], float] = time.time) -> None:
        root = server_root(base_url)
        self.urls = [metrics_url] if metrics_url else [root + "/metrics", root + "/prometheus/metrics"]
        self._headers = dict(headers or {})
        self.timeout = float(timeout)
        self.clock = clock
        self.enabled = True
        self.engine: str | None = None

    async def snapshot(self, client: Any, model: str | None = None) -> dict | None:
        """``{"t", "engine", "hists", "problems"}`` now; ``{"t", "problem"}`` when a scrape that worked before
        fails; None when disabled (never worked)."""
        if not self.enabled or client is None:
            return None
        t = self.clock()
        last = "no metrics page"
        for url in list(self.urls):
            try:
                resp = await client.get(url, headers=self._headers, timeout=self.timeout)
                if resp.status_code != 200:
                    last = f"{redact_url(url)}: HTTP {resp.status_code}"
                    continue
                got = parse_histograms(resp.text, model)
            except Exception as exc:  # noqa: BLE001 (a side channel must not stop the run)
                last = f"{redact_url(url)}: {_describe_error(exc)}"
                continue
            if got is None or not got["hists"]:
                last = f"{redact_url(url)}: no latency histograms"
                continue
            self.urls = [url]  # found: ask only this page from now on
            self.engine = got["engine"]
            return {"t": t, **got}
        if self.engine is None:
            self.enabled = False  # never worked: stop asking
            return None
        return {"t": t, "problem": last}

    @staticmethod
    def combine(start: dict | None, end: dict | None) -> dict | None:
        """The step end record's ``server_histograms`` from two snapshots (None when there is nothing)."""
        if start is None and end is None:
            return None
        problems: list[str] = []
        out: dict[str, Any] = {"engine": None, "t_start": None, "t_end": None, "start": None, "end": None}
        for key, snap in (("start", start), ("end", end)):
            if snap is None:
                problems.append(f"no scrape at the step's {key}")
                continue
            out[f"t_{key}"] = snap.get("t")
            if "problem" in snap:
                problems.append(f"scrape at the step's {key} failed: {snap['problem']}")
                continue
            out["engine"] = out["engine"] or snap.get("engine")
            out[key] = snap.get("hists")
            problems.extend(p for p in snap.get("problems") or () if p not in problems)
        out["problems"] = problems
        return out

    @staticmethod
    def prefix_cache(start: dict | None, end: dict | None) -> dict | None:
        """The step end record's ``prefix_cache`` (``tui.core.prefix_cache.step_block``) from two snapshots; None
        when neither carried the counters."""
        if not any(snap and "prefix_cache" in snap for snap in (start, end)):
            return None
        pick = [None if snap is None else {"problem": snap["problem"]} if "problem" in snap
                else snap.get("prefix_cache") for snap in (start, end)]
        return prefix_cache.step_block(pick[0], pick[1])

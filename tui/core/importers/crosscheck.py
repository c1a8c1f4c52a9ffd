"""An imported file held against its own tool's summary: the request, completed and error counts per level.

Another tool's per-request export is a claim like any record file. Each tool also writes its own counts (where:
each tool's ``IMPORTER.summary.where``, e.g. AIPerf's ``profile_export_aiperf.json`` beside the file). A
per-request file whose error entries were deleted (or whose requests were written twice, or relabelled to another
level) no longer adds up to them.

The converters put the tool's counts, normalised, in the run header (``source.tool_summary``, built with ``entry``
and ``summary``); ``problems`` compares them with what the records hold (``tally_records`` over record dicts at
import time, the Monitor's own counts when a file is judged) and returns the sentences that forbid PASS, each with
both numbers. A tool that always writes a summary but whose summary is absent (``missing``) forbids PASS too:
without it nothing shows whether per-request entries are missing.

The legitimate differences are part of each entry (never a tolerance; ``DIFFERENCES``, and each tool's
``IMPORTER.summary.differences`` names the ones its entries carry):

- ``errors_include_cancelled``: the tool counts its own cancellations as errors (AIPerf: code 499);
- ``warmup_counted``: the tool lists (and counts) its warmup requests with the measured ones (GuideLLM); without
  it the summary counts the measured phase only (warmup records are not compared);
- ``unlisted_cancelled_ok``: the tool counts requests cancelled before they were sent, which it does not list;
- ``sample``: a reservoir sample lists at most ``size`` requests of each status (``source.sample`` is already
  labelled and gets no verdict; the sample is still held to its totals);
- entries the importer could not use (reported with file and line, held against the verdict as unreadable
  requests) may explain a shortfall, never a surplus.

Pure, standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COUNT_KEYS", "DIFFERENCES", "FLAGS", "Counts", "Tally", "describe", "entry", "is_missing", "level_label", "missing", "problems", "summary", "tally_records"]

COUNT_KEYS = ("requests", "completed", "errors", "cancelled")
#: the legitimate differences an entry may carry (each tool's ``IMPORTER.summary.differences`` names its own)
FLAGS = ("errors_include_cancelled", "warmup_counted", "unlisted_cancelled_ok")
DIFFERENCES = FLAGS + ("sample",)


def _int(v: Any) -> int | None:
    """A whole number >= 0 (an int, or a float with no fraction: JSON summaries write 29.0), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if v != v or v in (float("inf"), float("-inf")) or v < 0 or v != int(v):
        return None
    return int(v)


def entry(*, level: float | None, round_: int | None = None, scope: str = "level", label: str = "",
          requests: Any = None, completed: Any = None, errors: Any = None, cancelled: Any = None,
          errors_include_cancelled: bool = False, warmup_counted: bool = False, unlisted_cancelled_ok: bool = False,
          sample: dict | None = None) -> dict:
    """One group of the tool's counts: a level (and round) or, ``scope="run"``, the whole run. A count the tool does
    not give is None (not compared)."""
    d: dict[str, Any] = {"scope": scope, "level": level, "round": round_, "label": label,
                         "requests": _int(requests), "completed": _int(completed), "errors": _int(errors),
                         "cancelled": _int(cancelled)}
    if errors_include_cancelled:
        d["errors_include_cancelled"] = True
    if warmup_counted:
        d["warmup_counted"] = True
    if unlisted_cancelled_ok:
        d["unlisted_cancelled_ok"] = True
    if sample is not None:
        d["sample"] = dict(sample)
    return d


def level_label(level: float | None, mode: str | None, what: str = "") -> str:
    """How a summary names a level: "concurrency 2", "rate 1.5 req/s", "level 4", or what the tool calls it."""
    if level is None:
        return f"{what} (no fixed level)" if what else "an unnamed level"
    if mode == "closed":
        return f"concurrency {level:g}"
    if mode == "open":
        return f"rate {level:g} req/s"
    return f"level {level:g}"


def summary(tool: str, where: str, entries: list[dict]) -> dict:
    """``source.tool_summary``: the tool's name, where its counts were read (``where``) and the groups."""
    return {"tool": tool, "from": where, "entries": entries}


def missing(tool: str, why: str) -> dict:
    """``source.tool_summary`` of a file whose tool writes a summary that is not there (``why`` says where it
    should be)."""
    return {"tool": tool, "missing": why}


@dataclass
class Counts:
    """Requests of one phase: all of them, completed (no error), errors (an error other than a cancellation, or not
    complete), cancelled."""

    requests: int = 0
    completed: int = 0
    errors: int = 0
    cancelled: int = 0

    def add(self, other: Counts) -> None:
        self.requests += other.requests
        self.completed += other.completed
        self.errors += other.errors
        self.cancelled += other.cancelled


@dataclass
class Tally:
    """What the records hold per (level, round): measured and warmup counts, and the entries the reader could not use
    (they may have been requests of any level)."""

    measured: dict[tuple, Counts] = field(default_factory=dict)
    warmup: dict[tuple, Counts] = field(default_factory=dict)
    unusable: int = 0

    def count(self, key: tuple, warmup: bool, complete: bool, error: Any) -> None:
        book = self.warmup if warmup else self.measured
        c = book.get(key)
        if c is None:
            c = book[key] = Counts()
        c.requests += 1
        if error == "cancelled":
            c.cancelled += 1
        elif error is None and complete:
            c.completed += 1
        else:
            c.errors += 1


def tally_records(records: Iterable[Mapping], unusable: int = 0) -> Tally:
    """The Tally of record dicts (an ``ImportResult``'s); a request id seen again is counted once (as the Monitor
    does: the duplicate rule names it)."""
    t = Tally(unusable=unusable)
    seen: set = set()
    for r in records:
        if r.get("type") != "request":
            continue
        rid = r.get("id")
        if rid in seen:
            continue
        seen.add(rid)
        t.count((r.get("level"), r.get("round", 1)), r.get("phase") != "measure", bool(r.get("complete")),
                r.get("error"))
    return t


# ---------------------------------------------------------------------------------------------------- the check

def _level_text(level: Any) -> str:
    return "an unnamed level" if level is None else f"level {level:g}" if isinstance(level, (int, float)) else str(level)


def _where(e: Mapping) -> str:
    if e.get("scope") == "run":
        return "in the whole run"
    lab = e.get("label") or _level_text(e.get("level"))
    rnd = e.get("round")
    return f"at {lab}" + (f" (round {rnd})" if isinstance(rnd, int) and rnd > 1 else "")


def _parts(ok: int | None, err: int | None, canc: int | None, incl: bool) -> str:
    """"27 completed, 3 errors, 0 cancelled" (the counts given)."""
    parts = []
    if ok is not None:
        parts.append(f"{ok} completed")
    if err is not None:
        parts.append(f"{err} error{'s' if err != 1 else ''}" + (" (cancellations included)" if incl else ""))
    if canc is not None and not incl:
        parts.append(f"{canc} cancelled")
    return ", ".join(parts)


def _said(req: int | None, ok: int | None, err: int | None, canc: int | None, incl: bool) -> str:
    """"30 requests: 27 completed, 3 errors"."""
    rest = _parts(ok, err, canc, incl)
    head = f"{req} requests" if req is not None else "requests"
    return head + (f": {rest}" if rest else "")


def _observed(e: Mapping, tally: Tally) -> tuple[Counts, list[tuple]]:
    """The records' counts for one entry, and the (level, round) keys it covers."""
    scope_run = e.get("scope") == "run"
    keys = set(tally.measured) | (set(tally.warmup) if e.get("warmup_counted") else set())
    covered = [k for k in keys if scope_run or (k[0] == e.get("level") and (e.get("round") is None
                                                                          or k[1] == e.get("round")))]
    got = Counts()
    for k in covered:
        if k in tally.measured:
            got.add(tally.measured[k])
        if e.get("warmup_counted") and k in tally.warmup:
            got.add(tally.warmup[k])
    return got, covered


def _self_check(e: Mapping, tool: str) -> str | None:
    """The summary against itself: requests = completed + errors (+ cancelled when counted apart)."""
    req, ok, err, canc = (e.get(k) for k in COUNT_KEYS)
    if req is None or ok is None or err is None:
        return None
    parts = ok + err + (0 if e.get("errors_include_cancelled") else (canc or 0))
    if parts == req:
        return None
    said = _parts(ok, err, canc, bool(e.get("errors_include_cancelled")))
    return f"{tool}'s summary contradicts itself {_where(e)}: {req} requests but {said} add up to {parts}: no PASS"


def _allowed(name: str, tool_n: int, got_n: int, e: Mapping) -> bool:
    """Whether the records' count agrees with the tool's for one count (exactly, or by the entry's own rule)."""
    sample = e.get("sample")
    if isinstance(sample, Mapping):  # a reservoir sample of each status list
        size = _int(sample.get("size"))
        if name in ("completed", "errors") and size is not None:
            return got_n == min(size, tool_n)
        return got_n <= tool_n
    if name == "cancelled" and e.get("unlisted_cancelled_ok"):
        return got_n <= tool_n  # cancelled before being sent: counted by the tool, never listed
    if name == "requests" and e.get("unlisted_cancelled_ok"):
        return got_n <= tool_n  # the same requests; completed and errors are held exactly
    return got_n == tool_n


def is_missing(tool_summary: Mapping | None) -> bool:
    """The tool writes a summary and it is not there (its counts cannot be checked: PASS is refused all the same)."""
    return isinstance(tool_summary, Mapping) and bool(tool_summary.get("missing"))


def describe(tool_summary: Mapping | None) -> list[str]:
    """The tool's own counts, one line per group ("at concurrency 2: 30 requests: 29 completed, 1 error
    (cancellations included)"); [] when there is no summary block."""
    if not isinstance(tool_summary, Mapping):
        return []
    tool = str(tool_summary.get("tool") or "the tool")
    if tool_summary.get("missing"):
        return [f"{tool}'s own summary: not there ({tool_summary['missing']})"]
    out = [f"{tool}'s own summary ({tool_summary.get('from') or 'its summary'}):"]
    raw = tool_summary.get("entries")
    for e in (_clean(x) for x in (raw if isinstance(raw, list) else []) if isinstance(x, Mapping)):
        out.append(f"  {_where(e)}: " + _said(e.get("requests"), e.get("completed"), e.get("errors"),
                                                e.get("cancelled"), bool(e.get("errors_include_cancelled")))
                   + (" (a sample is listed)" if e.get("sample") else ""))
    return out


def _clean(e: Mapping) -> dict:
    """An entry as read back from a header (a file may have been edited): counts that are not whole numbers >= 0
    are not counts (None), a level that is not a number is no level this file's records can have, a round that is
    not a whole number is every round, a sample size that is not a count is unknown."""
    d: dict[str, Any] = {k: _int(e.get(k)) for k in COUNT_KEYS}
    lv = e.get("level")
    d["level"] = float(lv) if isinstance(lv, (int, float)) and not isinstance(lv, bool) else (None if lv is None
                                                                                             else str(lv)[:40])
    rnd = e.get("round")
    d["round"] = rnd if isinstance(rnd, int) and not isinstance(rnd, bool) else None
    d["scope"] = "run" if e.get("scope") == "run" else "level"
    d["label"] = str(e.get("label") or "")[:120]
    for k in FLAGS:
        d[k] = e.get(k) is True
    sample = e.get("sample")
    d["sample"] = {"size": _int(sample.get("size"))} if isinstance(sample, Mapping) else None
    return d


def problems(tool_summary: Mapping | None, tally: Tally) -> tuple[list[str], list[str]]:
    """(problems, notes): each problem forbids PASS and names both numbers; a note says what was checked (or why a
    shortfall is the unusable entries already held against the verdict). No summary block at all (servewatch's own
    files, a converter that has none): nothing to say."""
    if not isinstance(tool_summary, Mapping):
        return [], []
    tool = str(tool_summary.get("tool") or "the tool")
    if tool_summary.get("missing"):
        return [f"{tool}'s own summary is not there ({tool_summary['missing']}): nothing shows whether per-request "
                "entries are missing or added, so no PASS"], []
    raw = tool_summary.get("entries")
    entries = [_clean(e) for e in (raw if isinstance(raw, list) else []) if isinstance(e, Mapping)]
    if not entries:
        return [f"{tool}'s own summary holds no counts: nothing shows whether per-request entries are missing or "
                "added, so no PASS"], []
    where = tool_summary.get("from") or "its summary"
    out: list[str] = []
    notes: list[str] = []
    covered_all: set = set()
    short_total = run_short = 0
    explained: list[str] = []
    for e in entries:
        if all(e.get(k) is None for k in COUNT_KEYS):
            out.append(f"{tool}'s summary ({where}) gives no counts {_where(e)}: nothing shows whether per-request "
                       "entries are missing or added there, so no PASS")
            continue
        own = _self_check(e, tool)
        if own:
            out.append(own)
        got, covered = _observed(e, tally)
        if e.get("scope") != "run":
            covered_all.update(covered)
        incl = bool(e.get("errors_include_cancelled"))
        got_err = got.errors + (got.cancelled if incl else 0)
        have = {"requests": got.requests, "completed": got.completed, "errors": got_err,
                "cancelled": None if incl else got.cancelled}
        bad: list[str] = []
        short: list[str] = []
        for name in COUNT_KEYS:
            tn, gn = e.get(name), have[name]
            if tn is None or gn is None or _allowed(name, tn, gn, e):
                continue
            (short if 0 < tn - gn <= tally.unusable and not e.get("sample") else bad).append(name)
        if short and not bad:
            gap = max(0, (e.get("requests") or 0) - got.requests)
            if e.get("scope") == "run":  # the whole run: the levels' shortfalls again, not more of them
                run_short = max(run_short, gap)
            else:
                short_total += gap
            explained.append(_where(e))
            continue
        if bad or short:
            tools = _said(e.get("requests"), e.get("completed"), e.get("errors"), e.get("cancelled"), incl)
            mine = _said(got.requests, got.completed, got_err, None if incl else got.cancelled, incl)
            what = ("more than its summary: requests added or duplicated" if got.requests > (e.get("requests") or 0)
                    and e.get("requests") is not None else "requests missing, added or altered")
            out.append(f"{tool}'s own summary ({where}) counts {tools} {_where(e)}; the file holds {mine}: {what}, "
                       "so no PASS")
    short_total = max(short_total, run_short)
    if short_total > tally.unusable:
        out.append(f"{tool}'s own summary ({where}) counts {short_total} more requests than the file holds, more than "
                   f"the {tally.unusable} entries that could not be read: requests missing, so no PASS")
    elif explained:
        notes.append(f"{tool}'s own summary ({where}) counts more requests {', '.join(explained)} than were "
                     f"converted: the {tally.unusable} unusable entries reported (held against the verdict as "
                     "unreadable requests)")
    if any(e.get("scope") != "run" for e in entries):
        stray = sorted((k for k in set(tally.measured) if k not in covered_all), key=lambda k: (k[0] is None, str(k)))
        for k in stray:
            c = tally.measured[k]
            out.append(f"the file holds {c.requests} measured requests at {_level_text(k[0])} (round {k[1]}), a level "
                       f"{tool}'s own summary ({where}) does not name: requests added or relabelled, so no PASS")
    if not out and not notes:
        notes.append(f"counts agree with {tool}'s own summary ({where})")
    return out, notes

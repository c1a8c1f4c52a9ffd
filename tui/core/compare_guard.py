"""What `compare` refuses before any statistic: a run compared with itself, and two runs that measured different
things (issue 35, "compare knows what it compares").

- **The same run on both sides** (never allowed): the same file (the caller says how: the same path, the same file
  through a link, byte-identical content), the same run id in both headers (``run_id``; an import: the same source
  file digest), or the same request data: requests of one side whose send, first-token and end times are exactly
  the other side's (``shared_requests``; also after moving one side's clock, so a copy whose times were shifted is
  the same data). Two runs measured apart never share a request's three times to the microsecond; a copy does, under
  any header. Comparing a run with itself can only show no difference: NOT ENOUGH EVIDENCE with the reason.
- **Different things measured** (refused unless allowed): the served model and the engine (``tui.core.identity``,
  read one way for every command) and the workload (``tui.core.workload``: the header's workload, else the lengths
  the importer received). ``--allow-different FIELD[,FIELD]`` (``ALLOWABLE``) compares anyway, and the output says
  which difference was allowed beside the verdict. Build, GPU and host are printed for both sides, never refused
  (comparing builds or GPUs is what compare is for).

Pure, standard library only.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from tui.core.identity import Identity, differences, identity_of
from tui.core.records.request import RequestRecord
from tui.core.runs import run_identity
from tui.core.textsafe import term

__all__ = ["ALLOWABLE", "REFUSED_FIELDS", "identity_block", "parse_allow", "same_run", "shared_requests"]

#: the differences ``--allow-different`` can allow (each is otherwise a refusal)
ALLOWABLE = ("model", "engine", "workload")
#: the identity fields whose difference is refused (the rest are printed only)
REFUSED_FIELDS = ("model", "engine")
#: a share of the smaller side's measured requests found with identical times on the other side that makes the two
#: runs one run's data (and never fewer than ``SHARED_MIN`` requests, unless a side has fewer)
SHARED_SHARE = 0.01
SHARED_MIN = 3


def parse_allow(values: Iterable[str] | None, allowable: tuple[str, ...] = ALLOWABLE) -> frozenset[str]:
    """The fields of ``--allow-different`` (each value a comma-separated list); raises ValueError with one line
    naming an unknown field. ``allowable``: the command's fields (`compare`'s by default; `select` has its own,
    ``tui.core.select_guard``)."""
    out: set[str] = set()
    for v in values or ():
        for f in str(v).split(","):
            f = f.strip().lower()
            if not f:
                continue
            if f not in allowable:
                raise ValueError(f"--allow-different: unknown field {f!r} (one of {', '.join(allowable)})")
            out.add(f)
    return frozenset(out)


def _key(r: RequestRecord, origin: float) -> tuple:
    tf = r.t_first_token
    return (round(r.t_sent - origin, 6), None if tf is None else round(tf - origin, 6), round(r.t_end - origin, 6))


def _measured(reqs: Iterable[RequestRecord]) -> list[RequestRecord]:
    return [r for r in reqs if r.phase == "measure"]


def shared_requests(base: Iterable[RequestRecord], cand: Iterable[RequestRecord]) -> tuple[int, int, int]:
    """(shared, n_base, n_cand): measured requests of one side whose send, first-token and end times are exactly (to
    the microsecond) a request of the other, counted once each; on the clocks as recorded, or with each side's clock
    started at its first send (a copy with its times shifted). Ids, levels and outcomes are not compared: a copy
    relabelled is the same data."""
    b, c = _measured(base), _measured(cand)
    if not b or not c:
        return 0, len(b), len(c)
    best = 0
    for ob, oc in ((0.0, 0.0), (min(r.t_sent for r in b), min(r.t_sent for r in c))):
        kb = Counter(_key(r, ob) for r in b)
        kc = Counter(_key(r, oc) for r in c)
        best = max(best, sum((kb & kc).values()))
    return best, len(b), len(c)


def _source_digest(header: Mapping | None) -> str | None:
    src = (header or {}).get("source")
    if isinstance(src, Mapping) and src.get("kind") == "import":
        sha = src.get("sha256")
        return str(sha) if isinstance(sha, str) and sha else None
    return None


def _run_id(header: Mapping | None) -> str | None:
    """The run's id when it names one: ``run_id``; an import: its source file's digest; an older servewatch header:
    its start time, target and model (only when it has a start time)."""
    if not header:
        return None
    sha = _source_digest(header)
    if sha is not None:
        return f"imported from a file with sha256 {sha[:12]}"
    rid = header.get("run_id")
    if isinstance(rid, str) and rid:
        return f"run_id {rid}"
    if isinstance(header.get("started_at"), (int, float)) and not isinstance(header.get("started_at"), bool):
        return run_identity(header)
    return None


def same_run(base: Mapping, cand: Mapping, same_file: str | None = None) -> str | None:
    """Why the two sides are one run (None: they are not). ``base``/``cand``: {"header", "requests"};
    ``same_file``: how the caller found the two paths to be one file ("same path as X", "identical content as X")."""
    if same_file:
        return f"the same file on both sides ({term(same_file)})"
    rb, rc = _run_id(base.get("header")), _run_id(cand.get("header"))
    if rb is not None and rb == rc:
        return f"the same run on both sides ({term(rb)})"
    shared, nb, nc = shared_requests(base.get("requests") or (), cand.get("requests") or ())
    small = min(nb, nc)
    if shared and shared >= min(SHARED_MIN, small) and shared >= math.ceil(SHARED_SHARE * small):
        how = ("every measured request" if shared == nb == nc else
               f"{shared} of the candidate's {nc} and the base's {nb} measured requests")
        return (f"the same request data on both sides: {how} with identical send, first-token and end times (a run "
                "copied, whatever its header says)")
    return None


def _ident_json(ident: Identity) -> dict[str, Any]:
    return {"claimed_model": ident.claimed_model, "served_model": ident.served_model, "engine": ident.engine,
            "build": ident.build, "gpu": ident.gpu, "host": ident.host, "line": ident.line()}


def identity_block(base_header: Mapping | None, cand_header: Mapping | None, allow: frozenset[str]) -> dict[str, Any]:
    """Both sides' identity (``tui.core.identity``), the fields that differ, those refused (the served model and the
    engine, unless allowed) and those allowed."""
    ib, ic = identity_of(base_header), identity_of(cand_header)
    diff = differences(ib, ic)
    refused = [f for f in diff if f in REFUSED_FIELDS and f not in allow]
    allowed = [f for f in diff if f in REFUSED_FIELDS and f in allow]
    reasons = []
    for f in refused:
        what = "served model" if f == "model" else f
        reasons.append(f"not comparable: the {what} differs (base {term(ib.value(f))}, candidate "
                       f"{term(ic.value(f))}); --allow-different {f} compares them anyway")
    return {"base": _ident_json(ib), "candidate": _ident_json(ic), "differences": diff, "refused": refused,
            "allowed": allowed, "reasons": reasons}

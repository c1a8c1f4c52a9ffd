"""The tamper fuzzer (issue 35): no edit of the evidence makes the verdict better unless the edit is detected.

Starting from committed honest files (the bundled real run, a recorded multi-level fixture, the bundled run signed
with a test key, an AIPerf export with its summary beside it, a `vllm bench serve` result), a seeded generator applies
random edits from a grammar that follows the threat model, runs the readers in process (``report``, ``accept``,
``compare`` edited vs honest, ``plan``) and checks the property for each:

- the outcome is never more favourable than the honest one (FAIL (1) < not enough evidence (3) < PASS (0); then a
  higher measured capacity; then fewer replicas) unless the output names a problem the honest output does not;
- no edit exits 70 (an internal error).

The grammar: on unsigned files, structural edits (delete, duplicate, swap, truncate lines or bytes, relabel level /
round / phase / mode / id, change a field's type, remove a field, edit the header's settings and planned levels, add
or remove a run, remove the step records or the seal) with or without recomputing the digest chain, and value edits
(a numeric field up or down) without recomputing it; on signed files judged with the key, every edit, rechained
without the key (the MACs left as they were). A failing case prints its seed and its edit list, so it can be replayed
(``Case.replay``).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.core.chain import ChainWriter, seal_line

REPO = Path(__file__).resolve().parents[2]
KEY_ENV = "SW_TAMPER_TEST_KEY"
KEY = b"tamper-fuzzer-test-key-not-a-secret"

# ---------------------------------------------------------------------------------------------- the digest chain


def _loads(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _dump_chained(obj: dict, chain: dict) -> bytes:
    """A checkpoint line as the recorder writes it: compact JSON, the ``chain`` key last."""
    body = {k: v for k, v in obj.items() if k != "chain"}
    text = json.dumps(body, separators=(",", ":"))
    return (text[:-1] + ("," if body else "") + '"chain":' + json.dumps(chain, separators=(",", ":")) + "}\n").encode()


def rechain(lines: list[bytes], key: bytes | None = None, keep_macs: bool = True) -> list[bytes]:
    """Recompute every digest of every chained run as a writer would (what someone who understands the format does
    after an edit). ``key``: sign the checkpoints with it (an honest signed file); without it, a signed file's MACs
    are kept as they were (``keep_macs``) or dropped: what an editor without the key can do."""
    out: list[bytes] = []
    writer: ChainWriter | None = None
    for raw in lines:
        if not raw.endswith(b"\n"):
            out.append(raw)  # a cut last line: nothing to recompute
            continue
        obj = _loads(raw)
        if isinstance(obj, dict) and obj.get("type") == "run":
            ch = obj.get("chain")
            if isinstance(ch, dict) and ch.get("format"):
                writer = ChainWriter(key)
                if key is not None:
                    obj["chain"] = writer.header_field()
                    raw = _dump_chained(obj, obj["chain"])
                writer.start()
                writer.add(raw)
            else:
                writer = None
            out.append(raw)
            continue
        if writer is not None and isinstance(obj, dict) and isinstance(obj.get("chain"), dict) \
                and "digest" in obj["chain"]:
            old = obj["chain"]
            cp = writer.checkpoint()
            if key is None and keep_macs and "mac" in old:
                cp["mac"] = old["mac"]
            raw = seal_line(cp) if obj.get("type") == "seal" and set(obj) == {"type", "chain"} else _dump_chained(obj, cp)
        if writer is not None:
            writer.add(raw)
        out.append(raw)
    return out


# ---------------------------------------------------------------------------------------------- the edit grammar

Lines = list[bytes]


def _records(lines: Lines, kind: str | None = None) -> list[int]:
    out = []
    for i, raw in enumerate(lines):
        if kind is None:
            out.append(i)
        elif f'"type":"{kind}"'.encode() in raw or f'"type": "{kind}"'.encode() in raw:
            out.append(i)
    return out


def _rewrite(lines: Lines, i: int, fn: Callable[[dict], None]) -> bool:
    obj = _loads(lines[i])
    if not isinstance(obj, dict):
        return False
    fn(obj)
    ch = obj.pop("chain", None)
    lines[i] = _dump_chained(obj, ch) if isinstance(ch, dict) else (json.dumps(obj, separators=(",", ":")) + "\n").encode()
    return True


def _pick(rng: random.Random, xs: list[int]) -> int | None:
    return rng.choice(xs) if xs else None


def _numeric_paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out: list[tuple] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _numeric_paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for k, v in enumerate(obj[:8]):
            out += _numeric_paths(v, prefix + (k,))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        out.append(prefix)
    return out


def _get(obj: Any, path: tuple) -> Any:
    for k in path:
        obj = obj[k]
    return obj


def _set(obj: Any, path: tuple, v: Any) -> None:
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = v


Edit = Callable[[random.Random, Lines], str | None]  # edits the list in place; the description, or None: not applicable


def e_delete(rng: random.Random, lines: Lines) -> str | None:
    i = _pick(rng, list(range(len(lines))))
    if i is None:
        return None
    del lines[i]
    return f"delete line {i + 1}"


def e_delete_type(rng: random.Random, lines: Lines) -> str | None:
    kind = rng.choice(["request", "step", "seal", "queue", "budget"])
    idx = _records(lines, kind)
    if not idx:
        return None
    which = rng.choice(["all", "some"])
    drop = set(idx) if which == "all" else set(rng.sample(idx, max(1, len(idx) // 3)))
    lines[:] = [ln for i, ln in enumerate(lines) if i not in drop]
    return f"delete {len(drop)} {kind} lines ({which})"


def e_duplicate(rng: random.Random, lines: Lines) -> str | None:
    i = _pick(rng, list(range(len(lines))))
    if i is None:
        return None
    n = rng.choice([1, 1, 5, 50])
    lines[i + 1:i + 1] = [lines[i]] * n
    return f"duplicate line {i + 1} x{n}"


def e_copy_requests_new_ids(rng: random.Random, lines: Lines) -> str | None:
    idx = _records(lines, "request")
    if not idx:
        return None
    extra = []
    for i in idx:
        obj = _loads(lines[i])
        if isinstance(obj, dict):
            obj["id"] = f"{obj.get('id')}-copy"
            extra.append((json.dumps(obj, separators=(",", ":")) + "\n").encode())
    at = max(idx) + 1
    lines[at:at] = extra
    return f"copy {len(extra)} request records under new ids"


def e_swap(rng: random.Random, lines: Lines) -> str | None:
    if len(lines) < 2:
        return None
    i, j = rng.sample(range(len(lines)), 2)
    lines[i], lines[j] = lines[j], lines[i]
    return f"swap lines {i + 1} and {j + 1}"


def e_truncate_lines(rng: random.Random, lines: Lines) -> str | None:
    steps = _records(lines, "step")
    cut = (rng.choice(steps) + 1) if steps and rng.random() < 0.7 else rng.randrange(1, max(2, len(lines)))
    del lines[cut:]
    return f"cut the file after line {cut}"


def e_truncate_bytes(rng: random.Random, lines: Lines) -> str | None:
    if not lines:
        return None
    i = rng.randrange(len(lines))
    k = rng.randrange(1, max(2, len(lines[i])))
    lines[i] = lines[i][:k]
    del lines[i + 1:]
    return f"cut the file inside line {i + 1} (byte {k})"


def e_relabel(rng: random.Random, lines: Lines) -> str | None:
    kind = rng.choice(["request", "step"])
    idx = _records(lines, kind)
    if not idx:
        return None
    fld = rng.choice(["level", "round", "phase", "mode", "id"] if kind == "request" else ["level", "round", "mode"])
    values = {"level": [1, 1.0, 2, 32, 64, 0.5], "round": [1, 2, 3], "phase": ["measure", "warmup", "other"],
              "mode": ["closed", "open", "sideways", None], "id": ["x", "r1"]}[fld]
    v = rng.choice(values)
    many = rng.random() < 0.5
    chosen = idx if many else [rng.choice(idx)]
    for i in chosen:
        _rewrite(lines, i, lambda o: o.__setitem__(fld, v))
    return f"relabel {fld}={v!r} on {'all' if many else 'one'} {kind} record(s)"


def e_change_type(rng: random.Random, lines: Lines) -> str | None:
    kind = rng.choice(["request", "step", "run"])
    i = _pick(rng, _records(lines, kind))
    if i is None:
        return None
    obj = _loads(lines[i])
    if not isinstance(obj, dict) or not obj:
        return None
    keys = [k for k in obj if k not in ("type", "chain")]
    if not keys:
        return None
    k = rng.choice(keys)
    new = rng.choice([str(obj[k]), [obj[k]], None, True, {"v": obj[k]}])
    _rewrite(lines, i, lambda o: o.__setitem__(k, new))
    return f"line {i + 1}: {kind} field {k!r} becomes {type(new).__name__}"


def e_remove_field(rng: random.Random, lines: Lines) -> str | None:
    kind = rng.choice(["request", "step", "run"])
    i = _pick(rng, _records(lines, kind))
    if i is None:
        return None
    obj = _loads(lines[i])
    keys = [k for k in (obj or {}) if k not in ("type", "chain")]
    if not keys:
        return None
    k = rng.choice(keys)
    _rewrite(lines, i, lambda o: o.pop(k, None))
    return f"line {i + 1}: remove {kind} field {k!r}"


def e_header_settings(rng: random.Random, lines: Lines) -> str | None:
    i = _pick(rng, _records(lines, "run"))
    if i is None:
        return None
    choice = rng.choice(["slo", "target", "levels", "rounds", "stop_on_fail", "mode", "verdict_settings",
                         "synthetic"])

    def edit(o: dict) -> None:
        load = o.setdefault("load", {}) if isinstance(o.get("load", {}), dict) else {}
        if choice == "slo":
            o["slo"] = {"ttft_ms": rng.choice([50.0, 5000.0, 100000.0]), "target": rng.choice([0.5, 0.99])}
        elif choice == "target":
            o.setdefault("slo", {})["target"] = rng.choice([0.5, 0.6, 0.999])
        elif choice == "levels":
            lv = list(load.get("levels") or [1])
            load["levels"] = lv[:1] if rng.random() < 0.5 else lv[:-1]
        elif choice == "rounds":
            load["rounds"] = rng.choice([1, 2, 5])
        elif choice == "stop_on_fail":
            load["stop_on_fail"] = rng.choice([True, False])
        elif choice == "mode":
            load["mode"] = rng.choice(["closed", "open", "sideways", None])
        elif choice == "verdict_settings":
            vs = o.get("verdict_settings") if isinstance(o.get("verdict_settings"), dict) else {}
            vs = dict(vs)
            vs[rng.choice(["target", "min_window_s", "min_window_minutes", "alpha"])] = rng.choice([0.5, 1.0, 0.0001])
            o["verdict_settings"] = vs
        else:
            o["synthetic"] = False
    _rewrite(lines, i, edit)
    return f"header: edit {choice}"


def e_add_run(rng: random.Random, lines: Lines) -> str | None:
    hdr = _pick(rng, _records(lines, "run"))
    reqs = _records(lines, "request")
    if hdr is None or not reqs:
        return None
    block = [lines[hdr]] + [lines[i] for i in rng.sample(reqs, min(len(reqs), rng.choice([5, 50, 500])))]
    if rng.random() < 0.5:
        lines[0:0] = block
        return f"prepend a run of {len(block) - 1} copied requests"
    lines.extend(block)
    return f"append a run of {len(block) - 1} copied requests"


def e_remove_header(rng: random.Random, lines: Lines) -> str | None:
    idx = _records(lines, "run")
    if not idx:
        return None
    del lines[idx[0]]
    return "remove the run header"


def e_value(rng: random.Random, lines: Lines) -> str | None:
    kind = rng.choice(["request", "request", "step", "queue", "run"])
    i = _pick(rng, _records(lines, kind))
    if i is None:
        return None
    obj = _loads(lines[i])
    paths = [p for p in _numeric_paths(obj) if p and p[0] != "chain"]
    if not paths:
        return None
    p = rng.choice(paths)
    v = _get(obj, p)
    factor = rng.choice([0.0, 0.5, 0.9, 0.999, 1.001, 1.1, 2.0, 10.0])
    nv = type(v)(v * factor) if isinstance(v, int) else v * factor
    if p[-1] in ("t_first_token", "t_end", "t_sent", "t_intended", "t_last_token", "t_first_answer"):
        nv = v + rng.choice([-5.0, -0.5, -0.01, 0.01, 0.5, 5.0])
    _rewrite(lines, i, lambda o: _set(o, p, nv))
    return f"line {i + 1}: {kind} {'.'.join(map(str, p))} {v!r} -> {nv!r}"


STRUCTURAL: list[Edit] = [e_delete, e_delete_type, e_duplicate, e_copy_requests_new_ids, e_swap, e_truncate_lines,
                          e_truncate_bytes, e_relabel, e_change_type, e_remove_field, e_header_settings, e_add_run,
                          e_remove_header]
VALUE: list[Edit] = [e_value]


def edit_records(rng: random.Random, lines: Lines, signed: bool) -> tuple[Lines, list[str]]:
    """One to three edits of a record file, and how the chain was treated afterwards."""
    out = list(lines)
    done: list[str] = []
    structural = True
    for _ in range(rng.choice([1, 1, 2, 3])):
        if rng.random() < 0.75:
            e = rng.choice(STRUCTURAL)
        else:
            e = rng.choice(VALUE)
            structural = False
        what = e(rng, out)
        if what is not None:
            done.append(what)
    if signed:
        out = rechain(out, key=None, keep_macs=rng.random() < 0.7)
        done.append("rechained without the key")
    elif structural and rng.random() < 0.5:
        out = rechain(out)
        done.append("digest chain recomputed")
    return out, done


# ---------------------------------------------------------------------------------------------- JSON-document edits

def edit_vllm(rng: random.Random, doc: dict) -> tuple[dict, list[str]]:
    """A `vllm bench serve` result: entries removed in lockstep, summary counts changed, values moved."""
    d = json.loads(json.dumps(doc))
    lists = [k for k, v in d.items() if isinstance(v, list) and len(v) == len(d.get("ttfts") or [])]
    done = []
    for _ in range(rng.choice([1, 2])):
        what = rng.choice(["drop_failed", "drop_any", "count", "ttft", "concurrency", "dup"])
        n = len(d.get("ttfts") or [])
        if what == "drop_failed" and n:
            keep = [i for i in range(n) if not (d.get("errors") or [""] * n)[i]]
            for k in lists:
                d[k] = [d[k][i] for i in keep]
            done.append(f"drop the {n - len(keep)} failed entries")
        elif what == "drop_any" and n:
            i = rng.randrange(n)
            for k in lists:
                del d[k][i]
            done.append(f"drop entry {i}")
        elif what == "count":
            k = rng.choice(["completed", "failed", "num_prompts"])
            d[k] = max(0, int(d.get(k) or 0) + rng.choice([-3, -1, 1, 5]))
            done.append(f"summary {k} -> {d[k]}")
        elif what == "ttft" and n:
            i = rng.randrange(n)
            d["ttfts"][i] = d["ttfts"][i] * rng.choice([0.1, 0.5, 2.0])
            done.append(f"ttfts[{i}] changed")
        elif what == "concurrency":
            d["max_concurrency"] = rng.choice([1, 2, 4, 64])
            done.append(f"max_concurrency -> {d['max_concurrency']}")
        elif what == "dup" and n:
            for k in lists:
                d[k] = d[k] + d[k]
            done.append("every entry twice")
    return d, done


def edit_aiperf_summary(rng: random.Random, doc: dict) -> tuple[dict, list[str]]:
    d = json.loads(json.dumps(doc))
    paths = [p for p in _numeric_paths(d) if any(s in ".".join(map(str, p)) for s in ("request_count", "error"))]
    if not paths:
        return d, []
    p = rng.choice(paths)
    v = _get(d, p)
    nv = type(v)(v * rng.choice([0, 0.5, 2])) if isinstance(v, (int, float)) else v
    _set(d, p, nv)
    return d, [f"summary {'.'.join(map(str, p))} {v!r} -> {nv!r}"]


# ---------------------------------------------------------------------------------------------- the readers

FAVOUR = {1: 0, 3: 1, 0: 2}  # FAIL < not enough evidence < PASS


@dataclass
class Outcome:
    code: int
    problems: frozenset[str] = frozenset()
    capacity: float | None = None
    replicas: float | None = None
    text: str = ""

    def rank(self) -> tuple:
        cap = -1e18 if self.capacity is None else self.capacity
        rep = -1e18 if self.replicas is None else -self.replicas
        return (FAVOUR.get(self.code, -1), cap, rep)


#: the JSON keys under which the readers name a detected problem (a list of sentences, or one), and the counters
#: of refused input; notes, advice and the conclusion's lines are not detections
PROBLEM_LISTS = ("problems", "evidence_problems", "examples", "mismatches", "blocked", "pass_blocked_by", "refusals")
PROBLEM_TEXTS = ("not_reached", "refused", "incomplete", "mismatch", "problem")
PROBLEM_COUNTS = ("malformed", "truncated", "unknown_types", "duplicate_request_ids", "duplicates")


def _problem_strings(doc: Any) -> set[str]:
    """Every sentence a JSON output uses to name a detected problem (evidence, integrity, input, imports...)."""
    out: set[str] = set()

    def walk(v: Any, key: str = "") -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, str(k))
        elif isinstance(v, list):
            for x in v:
                if isinstance(x, str) and key in PROBLEM_LISTS:
                    out.add(x)
                else:
                    walk(x, key)
        elif isinstance(v, str) and key in PROBLEM_TEXTS and v:
            out.add(v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and v and key in PROBLEM_COUNTS:
            out.add(f"{key}={v}")

    walk(doc)
    return out


def _run_cli(argv: list[str]) -> tuple[int, str, str]:
    from tui.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return int(code), out.getvalue(), err.getvalue()


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def report(path: Path, key: bool = False) -> Outcome:
    argv = ["report", str(path), "--json"] + (["--verify-key-env", KEY_ENV] if key else [])
    code, out, err = _run_cli(argv)
    doc = _json(out)
    if code == 2 and doc is None:  # refused as input: nothing judged (the refusal names it)
        return Outcome(code, frozenset({"refused: " + err.strip()[:200]}), text=err)
    probs = _problem_strings(doc) if doc is not None else set()
    cap = None
    if isinstance(doc, dict) and isinstance(doc.get("judged"), dict):
        c = doc["judged"].get("measured_capacity")
        cap = float(c) if isinstance(c, (int, float)) else None
    return Outcome(code, frozenset(probs), capacity=cap, text=err + out[:2000])


def accept(path: Path, key: bool = False) -> Outcome:
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["accept", "--records", str(path), "--out", tmp, "--no-html"] + (
            ["--verify-key-env", KEY_ENV] if key else [])
        code, out, err = _run_cli(argv)
        p = Path(tmp) / "acceptance.json"
        doc = _json(p.read_text()) if p.exists() else None
    if doc is None:
        return Outcome(code, frozenset({"refused: " + err.strip()[:200]}) if code == 2 else frozenset(), text=err)
    cap = (doc.get("conclusion") or {}).get("measured_capacity")
    return Outcome(code, frozenset(_problem_strings(doc)), capacity=cap if isinstance(cap, (int, float)) else None,
                   text=err + out[:2000])


def compare(honest: Path, edited: Path, key: bool = False) -> Outcome:
    argv = ["compare", str(honest), str(edited), "--json"] + (["--verify-key-env", KEY_ENV] if key else [])
    code, out, err = _run_cli(argv)
    doc = _json(out)
    probs = _problem_strings(doc) if doc is not None else ({"refused: " + err.strip()[:200]} if code == 2 else set())
    return Outcome(code, frozenset(probs), text=err + out[:2000])


def plan(path: Path, key: bool = False) -> Outcome:
    argv = ["plan", "--records", str(path), "--peak-rate", "5", "--json"] + (
        ["--verify-key-env", KEY_ENV] if key else [])
    code, out, err = _run_cli(argv)
    doc = _json(out)
    if doc is None:
        return Outcome(code, frozenset({"refused: " + err.strip()[:200]}) if code == 2 else frozenset(), text=err)
    rep = None
    for k in ("replicas", "replicas_needed"):
        v = doc.get(k)
        if isinstance(v, dict):
            v = v.get("high", v.get("value"))
        if isinstance(v, (int, float)):
            rep = float(v)
            break
    return Outcome(code, frozenset(_problem_strings(doc)), replicas=rep, text=err + out[:2000])


READERS: dict[str, Callable[..., Outcome]] = {"report": report, "accept": accept, "plan": plan}


# ---------------------------------------------------------------------------------------------- inputs and cases

@dataclass
class Honest:
    """One committed honest input: how to write an edited copy, and its honest outcomes per reader."""

    name: str
    kind: str  # "records" (JSONL record file), "aiperf" (a folder: export + summary), "vllm" (a JSON document)
    path: Path
    signed: bool = False
    readers: tuple[str, ...] = ("report", "accept", "compare", "plan")
    weight: float = 1.0
    honest: dict[str, Outcome] = field(default_factory=dict)


def honest_inputs(workdir: Path) -> list[Honest]:
    """The inputs (the signed copy of the bundled run is made here, with the test key, by the writer's rule)."""
    default = REPO / "sample_logs" / "default.jsonl"
    signed = workdir / "signed.jsonl"
    signed.write_bytes(b"".join(rechain(default.read_bytes().splitlines(keepends=True), key=KEY)))
    aiperf = workdir / "aiperf"
    shutil.copytree(REPO / "tests" / "fixtures" / "imports" / "aiperf", aiperf, ignore=shutil.ignore_patterns("variants"))
    return [
        Honest("bundled", "records", default, weight=1.0),
        Honest("sweep-fixture", "records", REPO / "tests" / "fixtures" / "gemma_sweep_short.jsonl", weight=2.0),
        Honest("signed", "records", signed, signed=True, weight=1.0),
        Honest("aiperf", "aiperf", aiperf / "profile_export.jsonl", readers=("report", "accept", "compare"),
               weight=1.5),
        Honest("vllm", "vllm", REPO / "tests" / "fixtures" / "imports" / "vllm" / "vllm_bench_c2_from_source.json",
               readers=("report", "accept", "compare"), weight=1.5),
    ]


@dataclass
class Case:
    seed: int
    input: str
    reader: str
    edits: list[str]
    honest: Outcome
    edited: Outcome

    def failed(self) -> str | None:
        """Why this case breaks the property (None: it holds)."""
        if self.edited.code == 70:
            return "exit 70 (internal error)"
        if self.edited.code == 0 and self.honest.code != 0:  # a detected problem forbids PASS: naming is not enough
            return f"PASS / ready / NOT WORSE (exit 0) where the honest evidence gives exit {self.honest.code}"
        new = self.edited.problems - self.honest.problems
        if self.edited.rank() > self.honest.rank() and not new:
            return (f"more favourable ({self.honest.code}, capacity {self.honest.capacity}, replicas "
                    f"{self.honest.replicas} -> {self.edited.code}, capacity {self.edited.capacity}, replicas "
                    f"{self.edited.replicas}) and no new problem named")
        return None

    def replay(self) -> str:
        return f"seed {self.seed}: {self.input} / {self.reader}: " + "; ".join(self.edits)


def _make_edited(h: Honest, rng: random.Random, out_dir: Path) -> tuple[Path, list[str]]:
    if h.kind == "records":
        lines = h.path.read_bytes().splitlines(keepends=True)
        edited, done = edit_records(rng, lines, h.signed)
        p = out_dir / h.path.name
        p.write_bytes(b"".join(edited))
        return p, done
    if h.kind == "aiperf":
        folder = out_dir / "aiperf"
        shutil.copytree(h.path.parent, folder)
        done: list[str] = []
        if rng.random() < 0.7:
            lines = (folder / "profile_export.jsonl").read_bytes().splitlines(keepends=True)
            edited, done = edit_records_plain(rng, lines)
            (folder / "profile_export.jsonl").write_bytes(b"".join(edited))
        if rng.random() < 0.4:
            side = folder / "profile_export_aiperf.json"
            d, more = edit_aiperf_summary(rng, json.loads(side.read_text()))
            side.write_text(json.dumps(d))
            done += more
        if rng.random() < 0.1:
            (folder / "profile_export_aiperf.json").unlink()
            done.append("remove the summary beside the export")
        return folder / "profile_export.jsonl", done
    d, done = edit_vllm(rng, json.loads(h.path.read_text()))
    p = out_dir / h.path.name
    p.write_text(json.dumps(d))
    return p, done


def edit_records_plain(rng: random.Random, lines: Lines) -> tuple[Lines, list[str]]:
    """Edits of another tool's JSON Lines (AIPerf): delete, duplicate, swap, truncate, values, copies."""
    out = list(lines)
    done = []
    for _ in range(rng.choice([1, 2])):
        what = rng.choice(["delete", "dup", "swap", "cut", "value", "drop_errors", "copy"])
        if what == "delete" and out:
            i = rng.randrange(len(out))
            del out[i]
            done.append(f"delete line {i + 1}")
        elif what == "dup" and out:
            i = rng.randrange(len(out))
            out.insert(i, out[i])
            done.append(f"duplicate line {i + 1}")
        elif what == "swap" and len(out) > 1:
            i, j = rng.sample(range(len(out)), 2)
            out[i], out[j] = out[j], out[i]
            done.append(f"swap {i + 1} {j + 1}")
        elif what == "cut" and out:
            k = rng.randrange(1, len(out) + 1)
            del out[k:]
            done.append(f"cut after line {k}")
        elif what == "drop_errors":
            before = len(out)
            out = [ln for ln in out if b'"error":null' in ln.replace(b" ", b"")]
            done.append(f"delete the {before - len(out)} error records")
        elif what == "copy":
            extra = []
            for ln in out:
                o = _loads(ln)
                if isinstance(o, dict) and isinstance(o.get("metadata"), dict):
                    o["metadata"]["x_request_id"] = str(o["metadata"].get("x_request_id")) + "-copy"
                    extra.append((json.dumps(o) + "\n").encode())
            out += extra
            done.append(f"write {len(extra)} records twice under new ids")
        elif what == "value" and out:
            i = rng.randrange(len(out))
            o = _loads(out[i])
            paths = _numeric_paths(o) if o is not None else []
            if paths:
                p = rng.choice(paths)
                v = _get(o, p)
                _set(o, p, type(v)(v * rng.choice([0, 0.5, 2])))
                out[i] = (json.dumps(o) + "\n").encode()
                done.append(f"line {i + 1}: {'.'.join(map(str, p))} changed")
    return out, done


def honest_outcome(h: Honest, reader: str) -> Outcome:
    if reader not in h.honest:
        key = h.signed
        if reader == "compare":
            h.honest[reader] = compare(h.path, h.path, key)
        else:
            h.honest[reader] = READERS[reader](h.path, key)
    return h.honest[reader]


def run_case(seed: int, inputs: list[Honest], workdir: Path) -> Case:
    rng = random.Random(seed)
    h = rng.choices(inputs, weights=[x.weight for x in inputs])[0]
    reader = rng.choice(h.readers)
    case_dir = workdir / f"case-{seed}"
    case_dir.mkdir(parents=True, exist_ok=True)
    try:
        path, done = _make_edited(h, rng, case_dir)
        base = honest_outcome(h, reader)
        if reader == "compare":
            got = compare(h.path, path, h.signed)
        else:
            got = READERS[reader](path, h.signed)
        return Case(seed, h.name, reader, done, base, got)
    finally:
        shutil.rmtree(case_dir, ignore_errors=True)


@contextlib.contextmanager
def key_in_env():
    old = os.environ.get(KEY_ENV)
    os.environ[KEY_ENV] = KEY.decode()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(KEY_ENV, None)
        else:
            os.environ[KEY_ENV] = old


def fuzz(n: int, first_seed: int, workdir: Path) -> tuple[list[Case], list[Case]]:
    """``n`` seeded cases: (every case, the failing ones)."""
    inputs = honest_inputs(workdir)
    cases, failed = [], []
    with key_in_env():
        for seed in range(first_seed, first_seed + n):
            c = run_case(seed, inputs, workdir)
            cases.append(c)
            if c.failed():
                failed.append(c)
    return cases, failed


def digest(cases: list[Case]) -> str:
    """A short fingerprint of a run's outcomes (the same seeds give the same cases on every machine)."""
    h = hashlib.sha256()
    for c in cases:
        h.update(f"{c.seed}|{c.input}|{c.reader}|{c.edits}|{c.edited.code}\n".encode())
    return h.hexdigest()[:12]

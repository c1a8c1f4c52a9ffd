"""Tamper-evident record files: the digest chain (docs/record-format.md, "Digest chain"). Standard library only.

The writer (``ChainWriter``, used by ``tui.sources.recorder.Recorder``) keeps one SHA-256 over the exact bytes of
every line of a run, from the first byte of the run header on. Each checkpoint line (a ``step`` record, and the
``seal`` record that ends the run) carries ``"chain": {"lines": N, "digest": HEX}``: the digest of the N lines
before it in the run (header included, the checkpoint line itself excluded); it is then hashed like any other line,
so the next checkpoint covers it. With a key each checkpoint also carries ``"mac"``: an HMAC-SHA256 of
``"servewatch.chain/1\\n{N}\\n{HEX}"``; the seal of a chain whose header says ``"seal_mac": "servewatch.chain/1
seal"`` also carries ``"seal_mac"``, the same over ``"servewatch.chain/1 seal\\n{N}\\n{HEX}"``, so that no step
checkpoint's MAC can be turned into the seal of a run cut there (readers that predate it still check ``"mac"``): the
plain digest shows integrity to anyone, the MAC authorship to a key holder. A seal may carry
``planned`` (the header's planned levels and rounds), which must agree with the header.

The reader (``ChainVerifier``) is fed the raw bytes of a file, block by block, in the order read: one hash update
per block of whole lines (never per parsed record); only the few lines that carry a checkpoint or a run header are
decoded (found with ``bytes.find``). It records what it found per run of the file (``RunChain``); the verdict is
per RUN (issue 36): ``run_result(first, last, header_line)`` judges the lines of the run a command judges (its span,
from ``tui.core.runs.RunSplitter``) and ``finish()`` every run of the file, each as its own span. A result
(``RecordsIntegrity``) says what was verified in the words of the threat model (an unsigned chain detects damage and
naive edits, never authorship; a signature verifies a run from its header to its seal, or nothing), where the chain
breaks, what is unverified, and the problems that forbid PASS.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import Any

from tui.core.bounds import MAX_LINE_BYTES
from tui.core.textsafe import md, md_code

FORMAT = "servewatch.chain/1"
SEAL_FORMAT = "servewatch.chain/1 seal"  # the MAC message prefix of a seal (header ``"seal_mac"``)
DIGEST = "sha256"
MAC = "hmac-sha256"
_KEY_ID_MESSAGE = b"servewatch.chain/1 key id"
_CHAIN_MARK = b'"chain":{'
_RUN_MARK = b'"type":"run"'
#: what an unsigned chain proves, in the threat model's words (docs/record-format.md, "Threat model")
NOT_AUTHORSHIP = "detects accidental damage and naive edits; not authorship"


def key_id(key: bytes) -> str:
    """A short public name of a key (16 hex digits of an HMAC of a fixed message): tells keys apart, reveals none."""
    return hmac.new(key, _KEY_ID_MESSAGE, hashlib.sha256).hexdigest()[:16]


def checkpoint_mac(key: bytes, lines: int, digest_hex: str, prefix: str = FORMAT) -> str:
    """The MAC of one checkpoint: HMAC-SHA256 over ``{prefix}\\n{lines}\\n{digest}`` (``prefix``: ``FORMAT``, or
    ``SEAL_FORMAT`` for the seal of a chain whose header says so)."""
    return hmac.new(key, f"{prefix}\n{lines}\n{digest_hex}".encode("ascii"), hashlib.sha256).hexdigest()


def planned_of(header: Any) -> dict | None:
    """The planned levels and rounds of a run header (``load.levels``, ``load.rounds``) as a seal carries them, or
    None when the header plans no levels."""
    load = header.get("load") if isinstance(header, dict) else None
    if not isinstance(load, dict):
        return None
    levels = load.get("levels")
    if not isinstance(levels, list) or not levels:
        return None
    return {"levels": levels, "rounds": load.get("rounds")}


class ChainWriter:
    """The writer's running digest of one file: ``start()`` at each run header, ``add(line)`` for every line
    written after it (the header included), ``checkpoint()`` for the value a checkpoint line carries,
    ``seal_checkpoint()`` for the seal's."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key
        self._h: Any = None
        self.lines = 0

    @property
    def active(self) -> bool:
        return self._h is not None

    def header_field(self) -> dict:
        """The run header's ``chain`` object: format and algorithms, and for a keyed chain the key id (never the key)
        and the seal's own MAC domain."""
        d: dict = {"format": FORMAT, "digest": DIGEST, "checkpoints": ["step", "seal"]}
        if self._key is not None:
            d["mac"] = MAC
            d["key_id"] = key_id(self._key)
            d["seal_mac"] = SEAL_FORMAT
        return d

    def start(self) -> None:
        self._h = hashlib.sha256()
        self.lines = 0

    def add(self, line: bytes) -> None:
        self._h.update(line)
        self.lines += 1

    def checkpoint(self, prefix: str = FORMAT) -> dict:
        """``{"lines": N, "digest": HEX[, "mac": HEX]}`` over the N lines added since ``start()``."""
        digest = self._h.hexdigest()
        d: dict = {"lines": self.lines, "digest": digest}
        if self._key is not None:
            d["mac"] = checkpoint_mac(self._key, self.lines, digest, prefix)
        return d

    def seal_checkpoint(self) -> dict:
        """The seal's checkpoint: ``checkpoint()``, and when signed ``"seal_mac"``, a MAC in the seal's own domain."""
        d = self.checkpoint()
        if self._key is not None:
            d["seal_mac"] = checkpoint_mac(self._key, d["lines"], d["digest"], SEAL_FORMAT)
        return d

    def end(self) -> None:
        self._h = None
        self.lines = 0


@dataclass
class RunChain:
    """What the verifier found for one run of the file (from its header to the next header it saw, or the end of
    the file; ``header_line`` None: the lines before any run header)."""

    header_line: int | None
    first_line: int = 1
    chained: bool = False
    keyed: bool = False
    key_id: str | None = None
    lines: int = 0  # lines of this run (header included)
    checkpoints: int = 0  # checkpoints that matched
    last_good: int | None = None  # line of the last checkpoint that matched (or the header)
    sealed_at: int | None = None
    broken: str | None = None  # the first break, in words
    broken_line: int | None = None
    key_problem: str | None = None  # --verify-key-env given and the run is not signed with that key
    tail: int = 0  # lines after the last good checkpoint (unverified when the run has no seal)
    after_seal: int = 0
    first_after_seal: int | None = None
    note: str | None = None
    planned: dict | None = None  # the header's planned levels and rounds (a seal that carries them must agree)
    seal_domain: bool = False  # the header says the seal's MAC has its own domain
    _h: Any = field(default=None, repr=False)
    _covered: int = 0  # lines hashed since the header

    @property
    def last_line(self) -> int:
        return self.first_line + self.lines - 1

    def to_dict(self) -> dict:
        return {"header_line": self.header_line, "first_line": self.first_line, "last_line": self.last_line,
                "chained": self.chained, "keyed": self.keyed, "key_id": self.key_id, "lines": self.lines,
                "checkpoints": self.checkpoints, "sealed_at": self.sealed_at, "broken": self.broken,
                "unverified_lines": self.unverified_lines(), "note": self.note}

    def unverified_lines(self) -> int:
        if not self.chained:
            return self.lines
        if self.broken:
            return 0  # broken, not merely unverified
        return self.tail if self.sealed_at is None else 0

    @property
    def unsealed(self) -> bool:
        """A chained run verified so far but without its seal (a crash, a cut file, a removed end)."""
        return self.chained and not self.broken and self.sealed_at is None


@dataclass(frozen=True)
class RecordsIntegrity:
    """The verification of one run of a record file (``span``: its first and last line), or of every run of it
    (``span`` None): ``state`` is ``intact`` (every line verified, sealed), ``partial`` (no break, some lines
    unverified: no seal), ``unverified`` (no digest at all) or ``broken`` (``problems``: each forbids PASS).
    ``summary`` is the first line every output prints: what was verified, in the threat model's words."""

    state: str
    summary: str
    short: str  # a few words for the console header
    lines: int
    problems: tuple[str, ...] = ()
    details: tuple[str, ...] = ()
    signature: str | None = None  # "verified", "failed", "not checked", None (unsigned)
    runs: tuple[dict, ...] = ()
    span: tuple[int, int] | None = None  # the judged run's first and last line; None: the whole file
    chained: bool = False  # the judged lines start a digest chain (their header carries one)
    sealed: bool = False  # ... and it ends with its seal

    def to_dict(self) -> dict:
        return {"state": self.state, "summary": self.summary, "lines": self.lines, "problems": list(self.problems),
                "details": list(self.details), "signature": self.signature, "runs": list(self.runs),
                "span": list(self.span) if self.span else None, "chained": self.chained, "sealed": self.sealed}


def _n(v: int) -> str:
    return f"{v:,}"


def _lines(a: int, b: int) -> str:
    return f"line {_n(a)}" if a == b else f"lines {_n(a)}-{_n(b)}"


def _pl(k: int, word: str = "line") -> str:
    return f"{_n(k)} {word}{'s' if k != 1 else ''}"


def seal_line(checkpoint: dict, planned: dict | None = None) -> bytes:
    """The seal record's line: ``{"type":"seal"[,"planned":{...}],"chain":{...}}``, compact JSON; readers require
    exactly these bytes."""
    obj: dict = {"type": "seal"}
    if planned is not None:
        obj["planned"] = planned
    obj["chain"] = checkpoint
    return _canonical(obj)


def _mac_ok(mac: object, want: str) -> bool:
    # compared as bytes: compare_digest refuses str with non-ASCII characters (an edited mac may carry them)
    return isinstance(mac, str) and hmac.compare_digest(mac.encode("utf-8", "replace"), want.encode("ascii"))


def _canonical(obj: dict) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")


class ChainVerifier:
    """Feed the raw bytes of a record file in order (``feed``), then ``finish()`` (every run) and/or ``run_result``
    (the run judged). ``key``: check the MACs of a keyed chain, and require every run judged to be signed with it
    (``key_name`` names where the key came from in the words shown, e.g. ``$SW_KEY``)."""

    def __init__(self, key: bytes | None = None, key_name: str = "the key given") -> None:
        self._key = key
        self._key_id = key_id(key) if key is not None else None
        self._key_name = key_name
        self._partial = b""
        self._long = False  # the partial line is longer than MAX_LINE_BYTES: hashed as it passes (``_long_part``)
        self._line = 1  # number of the next line to be scanned
        self._run = RunChain(header_line=None)
        self._runs: list[RunChain] = []
        self._finished: RecordsIntegrity | None = None
        self._closed = False
        self._header_may_follow = True  # the next line may be a run header without a chain (file start, after a seal)

    # ------------------------------------------------------------------ feeding
    def feed(self, data: bytes) -> None:
        if not data:
            return
        start = 0
        if self._long:  # inside a line longer than the readers' cap: hashed as it passes, never held
            i = data.find(b"\n")
            if i < 0:
                self._long_part(data)
                return
            self._long_part(data[:i + 1])
            self._long_end()
            start = i + 1
        elif self._partial:  # the line cut by the last block: completed and scanned alone (no copy of the block)
            i = data.find(b"\n")
            if i < 0:
                self._partial += data
                if len(self._partial) > MAX_LINE_BYTES:
                    self._long_start()
                return
            line = self._partial + data[:i + 1]
            self._partial = b""
            self._scan(line, 0, len(line))
            start = i + 1
        cut = data.rfind(b"\n", start)
        if cut < 0:
            self._partial = data[start:]
        else:
            self._partial = data[cut + 1:]
            self._scan(data, start, cut + 1)
        if len(self._partial) > MAX_LINE_BYTES:
            self._long_start()

    def _scan(self, buf: bytes, pos: int, end: int) -> None:
        """One ``find`` pass for the chain marker: chained headers and checkpoints carry it. A header without a
        chain can only start a run where one may start without breaking a chain (the first line of the file, the
        line after a seal): only that one line is looked at (``_plain``)."""
        find = buf.find
        p = find(_CHAIN_MARK, pos, end)
        while p >= 0:
            ls = buf.rfind(b"\n", pos, p) + 1 or pos
            le = find(b"\n", p, end)
            n = buf.count(b"\n", pos, ls)
            if n:
                self._plain(buf, pos, ls, n)
            self._special(buf[ls:le + 1])
            pos = le + 1
            p = find(_CHAIN_MARK, pos, end)
        n = buf.count(b"\n", pos, end)
        if n:
            self._plain(buf, pos, end, n)

    def _plain(self, buf: bytes, a: int, b: int, n: int) -> None:
        """``n`` ordinary lines ``buf[a:b]`` (whole lines) of the current run."""
        if self._header_may_follow:
            self._header_may_follow = False
            le = buf.find(b"\n", a, b) + 1
            if _RUN_MARK in buf[a:le]:  # an unchained run header here: it starts a run of its own
                self._special(buf[a:le])
                if n > 1:
                    self._plain(buf, le, b, n - 1)
                return
        run = self._run
        first = self._line
        self._line += n
        run.lines += n
        if run.sealed_at is not None:
            self._after_seal(run, first, n)
            return
        if run.chained and run.broken is None:
            run._h.update(memoryview(buf)[a:b])
            run._covered += n
        run.tail += n

    def _long_start(self) -> None:
        """The partial line outgrew ``MAX_LINE_BYTES``: an ordinary line of its run (the readers report it as a
        malformed line; no header or checkpoint is that long), hashed as it passes instead of kept."""
        self._long = True
        self._header_may_follow = False
        part, self._partial = self._partial, b""
        self._long_part(part)

    def _long_part(self, data: bytes) -> None:
        run = self._run
        if run.sealed_at is None and run.chained and run.broken is None:
            run._h.update(data)

    def _long_end(self) -> None:
        self._long = False
        run = self._run
        first = self._line
        self._line += 1
        run.lines += 1
        if run.sealed_at is not None:
            self._after_seal(run, first, 1)
            return
        if run.chained and run.broken is None:
            run._covered += 1
        run.tail += 1

    def _after_seal(self, run: RunChain, first: int, n: int) -> None:
        if run.first_after_seal is None:
            run.first_after_seal = first
        run.after_seal += n

    def _special(self, raw: bytes) -> None:
        """A line that may be a run header or a checkpoint (it holds one of the markers)."""
        self._header_may_follow = False
        lineno = self._line
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            obj = None
        if type(obj) is dict and obj.get("type") == "run":
            self._close_run()
            self._line += 1
            self._start_run(lineno, obj, raw)
            return
        ch = obj.get("chain") if type(obj) is dict else None
        if type(ch) is not dict or "digest" not in ch:  # an ordinary line that only mentions a marker
            self._plain(raw, 0, len(raw), 1)
            return
        self._line += 1
        run = self._run
        run.lines += 1
        if run.sealed_at is not None:
            self._after_seal(run, lineno, 1)
            return
        if not run.chained:
            if run.broken is None:
                where = "before any run header" if run.header_line is None else \
                    f"in the run whose header (line {_n(run.header_line)}) starts no chain"
                run.broken = (f"line {_n(lineno)}: a checkpoint {where}: the chained header was removed or lines "
                              "were merged from another file")
                run.broken_line = lineno
            return
        if run.broken is None:
            self._check(run, lineno, obj, ch, raw)
            if run.broken is None:
                run._h.update(raw)
                run._covered += 1
        if run.broken is None and obj.get("type") == "seal":
            run.sealed_at = lineno
            self._header_may_follow = True

    def _check(self, run: RunChain, lineno: int, obj: dict, ch: dict, raw: bytes) -> None:
        seal = obj.get("type") == "seal"
        kind = "seal" if seal else f"{str(obj.get('type'))[:20]} record"
        good = run.last_good if run.last_good is not None else run.header_line
        span = f"lines {_n(good or 1)}-{_n(lineno)}"
        lines, digest = ch.get("lines"), ch.get("digest")
        if seal and raw != _canonical(obj):  # nothing covers the seal itself: it must be exactly as written
            run.broken = (f"line {_n(lineno)}: the seal record is not byte for byte what servewatch writes: edited")
        elif seal and "planned" in obj and obj.get("planned") != run.planned:
            run.broken = (f"line {_n(lineno)}: the seal's planned levels and rounds ({str(obj.get('planned'))[:80]}) "
                          f"disagree with the run header's ({str(run.planned)[:80]}): the header or the seal was "
                          "edited, or the seal belongs to another run")
        elif lines != run._covered:
            diff = run._covered - lines if isinstance(lines, int) else None
            more = "" if diff is None else (f": {_n(abs(diff))} line{'s' if abs(diff) != 1 else ''} "
                                            f"{'added' if diff > 0 else 'removed'} there")
            what = "seal covers" if seal else f"{kind} at line {_n(lineno)} checkpoints"
            run.broken = (f"{span}: the {what} {lines!r:.20} lines of its run, the file holds "
                          f"{_n(run._covered)} before it{more} (the last good checkpoint is line {_n(good or 1)})")
        elif digest != run._h.hexdigest():
            run.broken = (f"{span}: the digest checkpointed in the {kind} at line {_n(lineno)} does not match: lines "
                          f"edited, removed or reordered in that range (the last good checkpoint is line {_n(good or 1)})")
        elif run.keyed and self._key is not None and run.key_id == self._key_id:
            if not _mac_ok(ch.get("mac"), checkpoint_mac(self._key, lines, digest)):
                run.broken = (f"line {_n(lineno)}: the signature of the {kind} does not verify with the key in "
                              f"{self._key_name}: not recorded by a holder of that key, or the checkpoint was "
                              "rewritten")
            elif seal and run.seal_domain and not _mac_ok(ch.get("seal_mac"), checkpoint_mac(
                    self._key, lines, digest, SEAL_FORMAT)):
                run.broken = (f"line {_n(lineno)}: the signature of the seal does not verify with the key in "
                              f"{self._key_name} as a seal's (seal_mac): a step checkpoint's signature made into a "
                              "seal (the run was cut there), or the seal was rewritten")
        if run.broken is not None:
            run.broken_line = lineno
            return
        run.checkpoints += 1
        run.last_good = lineno
        run.tail = 0

    def _start_run(self, lineno: int, obj: dict, raw: bytes) -> None:
        ch = obj.get("chain")
        run = RunChain(header_line=lineno, first_line=lineno, lines=1, planned=planned_of(obj))
        self._run = run
        keyed_check = self._key is not None
        if ch is None:
            run.note = "no digest"
        elif type(ch) is not dict or ch.get("format") != FORMAT or ch.get("digest") != DIGEST:
            fmt = ch.get("format") if type(ch) is dict else None
            run.note = f"chain format {str(fmt)[:40]!r} unknown to this reader: unverified"
        else:
            run.chained = True
            run._h = hashlib.sha256(raw)
            run._covered = 1
            run.last_good = lineno
            run.keyed = ch.get("mac") is not None
            run.key_id = str(ch.get("key_id"))[:32] if run.keyed else None
            run.seal_domain = ch.get("seal_mac") == SEAL_FORMAT
        if not keyed_check:
            return
        # --verify-key-env: every run judged must be signed with that key (checked for a header without a chain too)
        if not run.chained:
            run.key_problem = (f"line {_n(lineno)}: the run is not signed (its header starts no digest chain): "
                               f"--verify-key-env was given, its authorship cannot be verified with the key in "
                               f"{self._key_name}")
        elif not run.keyed:
            run.key_problem = (f"line {_n(lineno)}: the run is not signed (--verify-key-env was given): its "
                               "authorship cannot be verified")
            run.note = "not signed"
        elif (ch or {}).get("mac") != MAC:
            run.broken = (f"line {_n(lineno)}: signature algorithm {str((ch or {}).get('mac'))[:30]!r} unknown to this "
                          "reader")
            run.broken_line = lineno
        elif run.key_id != self._key_id:
            run.broken = (f"line {_n(lineno)}: the run was signed with another key (key id {run.key_id}), not the "
                          f"key in {self._key_name} (key id {self._key_id})")
            run.broken_line = lineno

    def _close_run(self) -> None:
        run = self._run
        if run.lines or run.header_line is not None:
            self._runs.append(run)
        self._run = RunChain(header_line=None, first_line=self._line)

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._partial or self._long:  # an unterminated last line (a crash, a full disk, a file still being written)
            self._long = False
            run = self._run
            run.lines += 1
            if run.sealed_at is not None:
                self._after_seal(run, self._line, 1)
            else:
                run.tail += 1
            self._line += 1
            self._partial = b""
        self._close_run()

    # ------------------------------------------------------------------ results
    def finish(self) -> RecordsIntegrity:
        """Every run of the file, each judged as its own span (the whole file's summary)."""
        if self._finished is not None:
            return self._finished
        self._close()
        total = self._line - 1
        evals = [self._evaluate(r.first_line, r.last_line, r.header_line) for r in self._runs if r.lines]
        self._finished = self._combine(evals, total)
        return self._finished

    @property
    def total_lines(self) -> int:
        self._close()
        return self._line - 1

    def run_result(self, first: int, last: int | None, header_line: int | None) -> RecordsIntegrity:
        """The run judged: lines ``first``..``last`` (None: to the end of the file) whose run header is on line
        ``header_line`` (None: a run without a header). Call after the last ``feed``. With a key, only a run signed
        with it from its header to its seal, with no other line in its span, verifies; anything else is named and
        forbids PASS. Without a key, a chained run must hold every line of its span in its chain (lines before its
        header or after its seal forbid PASS); its seal missing leaves it ``partial`` (the Monitor's completeness
        rule decides what that means for a load run)."""
        self._close()
        total = self._line - 1
        last = total if last is None else min(last, total)
        ev = self._evaluate(first, last, header_line)
        return self._combine([ev], total, span=(first, last))

    def _evaluate(self, first: int, last: int, header_line: int | None) -> dict:
        """What the lines ``first``..``last`` (one run) are, from the runs the verifier saw."""
        key = self._key is not None
        problems: list[str] = []
        details: list[str] = []
        runs = [r for r in self._runs if r.lines and r.first_line <= last and r.last_line >= first]
        main = next((r for r in runs if header_line is not None and r.header_line == header_line), None)
        for r in runs:  # breaks anywhere in the span (a checkpoint with no chained header before it, ...)
            if r is not main and r.broken and r.broken_line is not None and first <= r.broken_line <= last:
                problems.append(r.broken)
        if main is None:
            where = "no run header" if header_line is None else f"the run header on line {_n(header_line)}"
            if key:
                problems.append(f"{_lines(first, last)}: not signed ({where}, no digest chain)")
            else:
                details.append(f"{_lines(first, last)}: unverified ({where}, no digest chain)")
            return {"first": first, "last": last, "main": None, "problems": problems, "details": details,
                    "tail": 0}
        if main.first_line > first:  # lines of this run before its header (a header-less prefix)
            a, b = first, main.first_line - 1
            problems.append(f"{_lines(a, b)}: before the run header (line {_n(main.first_line)}), "
                            + ("not signed" if key else "not covered by its digest chain") + ": added before the run")
        for r in runs:  # another run the verifier saw inside this one (a header that is not a valid run header)
            if r is not main and r.header_line is not None and r.header_line > main.first_line:
                problems.append(f"{_lines(r.first_line, min(r.last_line, last))}: a chained run header inside the "
                                f"run (line {_n(r.header_line)}), not a run of its own: lines merged from another run")
        if not main.chained:
            if main.key_problem:
                problems.append(main.key_problem)
            if main.broken and main.broken not in problems:
                problems.append(main.broken)
            if not key:
                details.append(f"{_lines(main.first_line, min(main.last_line, last))}: unverified "
                               f"({main.note or 'no digest'})")
            return {"first": first, "last": last, "main": main, "problems": problems, "details": details, "tail": 0}
        if main.key_problem:
            problems.append(main.key_problem)
        if main.broken:
            problems.append(main.broken)
        tail = 0
        if main.sealed_at is not None and main.sealed_at > last:
            problems.append(f"{_lines(last + 1, main.sealed_at)}: the run's chain goes on past its last line "
                            f"({_n(last)}; a run header the chain does not know starts there): lines merged")
        elif main.sealed_at is None and not main.broken:
            good = main.last_good or main.first_line
            tail = max(0, min(main.last_line, last) - good)
            where = f"after the last checkpoint (line {_n(good)})"
            if key:
                problems.append((f"{where}: {_pl(tail)} unsigned, and no seal" if tail else f"no seal {where}")
                                + ": the run was cut short, or its end removed or replaced")
            else:
                details.append(f"run at line {_n(main.first_line)}: verified up to line {_n(good)}; unverified: "
                               f"{_pl(tail)} after the last checkpoint (no seal: the run was cut short, or its end "
                               "removed)")
        if main.after_seal and main.first_after_seal is not None and main.first_after_seal <= last:
            a, b = main.first_after_seal, min(main.last_line, last)
            problems.append(f"line {_n(a)}: {_pl(b - a + 1)} after the seal at line {_n(main.sealed_at or 0)} with no "
                            "new run header: appended after the run ended")
        return {"first": first, "last": last, "main": main, "problems": problems, "details": details, "tail": tail}

    def _combine(self, evals: list[dict], total: int, span: tuple[int, int] | None = None) -> RecordsIntegrity:
        key = self._key is not None
        problems = [p for ev in evals for p in ev["problems"]]
        details = [d for ev in evals for d in ev["details"]]
        mains = [ev["main"] for ev in evals if ev["main"] is not None and ev["main"].chained]
        lines = sum(ev["last"] - ev["first"] + 1 for ev in evals)
        if key and not evals:
            problems.append(f"no signed run in the file: --verify-key-env was given, authorship cannot be verified "
                            f"with the key in {self._key_name}")
        sealed = bool(mains) and len(mains) == len(evals) and all(m.sealed_at is not None for m in mains)
        keyed = sorted({str(m.key_id) for m in mains if m.keyed})
        if key:
            signature: str | None = "verified" if not problems and sealed else "failed"
        else:
            signature = "not checked" if keyed else None
        what = "" if span is None or len(self._runs) <= 1 else f" (the run judged: {_lines(*span)})"
        if problems:
            state = "broken"
            summary = ("records integrity FAILED: " + problems[0]
                       + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""))
            short = "chain BROKEN" if any(m.broken for m in mains) or not key else "NOT verified with the key"
        elif signature == "verified":
            state = "intact"
            summary = (f"signed by key id {', '.join(keyed)}, verified with the key in {self._key_name}: every line "
                       f"from the run header to its seal ({_pl(lines)}){what}; written by a holder of that key and "
                       "not changed since")
            short = f"signed {', '.join(keyed)}, verified"
        elif not mains:
            state = "unverified"
            summary = f"no digest chain: nothing verified ({_pl(lines)}{what}); judged on what the records hold"
            short = "unverified (no digest)"
        else:
            signed = (f"; signed by key id {', '.join(keyed)}, signature NOT checked (no --verify-key-env)"
                      if keyed else "")
            if sealed and not details:
                state = "intact"
                summary = f"digest chain intact, sealed ({_pl(lines)}{what}; {NOT_AUTHORSHIP})" + signed
                short = "digest intact (not authorship)"
            else:
                state = "partial"
                unverified = sum(ev["tail"] for ev in evals) + sum(
                    ev["last"] - ev["first"] + 1 for ev in evals if ev["main"] is None or not ev["main"].chained)
                cut = [ev for ev in evals if ev["main"] is not None and ev["main"].unsealed]
                if len(evals) == 1 and cut:
                    good = cut[0]["main"].last_good or cut[0]["first"]
                    after = f"{_pl(unverified)} after it unverified: " if unverified else ""
                    summary = (f"digest chain intact up to line {_n(good)}{what} ({NOT_AUTHORSHIP}); NO SEAL: "
                               f"{after}the run was cut short, or its end removed")
                else:
                    summary = (f"digest chain intact in part ({_n(lines - unverified)} of {_pl(lines)}{what}; "
                               f"{NOT_AUTHORSHIP}); unverified: {_pl(unverified)}"
                               + ("; NO SEAL: a run was cut short, or its end removed" if cut else ""))
                summary += signed
                short = "no seal: verified in part" if cut else "verified in part"
        return RecordsIntegrity(state=state, summary=summary, short=short, lines=lines if span else total,
                                problems=tuple(problems), details=tuple(details), signature=signature,
                                runs=tuple(r.to_dict() for r in self._runs), span=span,
                                chained=bool(mains) and len(mains) == len(evals), sealed=sealed)


def md_records_integrity(doc: Any) -> list[str]:
    """The acceptance report's section on the records' integrity (``doc["records_integrity"]``: one entry per
    record file, ``{"source", **RecordsIntegrity.to_dict()}``); no section when the document has none."""
    items = doc.get("records_integrity") or []
    if not items:
        return []
    out = ["## Records integrity (digest chain)", ""]
    for it in items:
        out.append(f"- {md_code(it.get('source'))}: {md(it.get('summary'))}")  # a file name is data (textsafe)
        out.extend(f"  - {md(d)}" for d in it.get("details") or ())
    return out + [""]


def verify_stream(fh: Any, key: bytes | None = None, key_name: str = "the key given",
                  block: int = 1 << 20) -> RecordsIntegrity:
    """Verify an open binary stream to its end, ``block`` bytes at a time (memory bounded by the block)."""
    v = ChainVerifier(key, key_name)
    read = fh.read
    while True:
        data = read(block)
        if not data:
            return v.finish()
        v.feed(data)


def verify_bytes(data: bytes, key: bytes | None = None, key_name: str = "the key given",
                 block: int = 1 << 20) -> RecordsIntegrity:
    """Verify a whole file held in memory, fed ``block`` bytes at a time (tests, small files)."""
    v = ChainVerifier(key, key_name)
    for i in range(0, len(data), block):
        v.feed(data[i:i + block])
    return v.finish()

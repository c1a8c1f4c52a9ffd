"""Tamper-evident record files: the digest chain (docs/record-format.md, "Digest chain"). Standard library only.

The writer (``ChainWriter``, used by ``tui.sources.recorder.Recorder``) keeps one SHA-256 over the exact bytes of
every line of a run, from the first byte of the run header on. Each checkpoint line (a ``step`` record, and the
``seal`` record that ends the run) carries ``"chain": {"lines": N, "digest": HEX}``: the digest of the N lines
before it in the run (header included, the checkpoint line itself excluded); it is then hashed like any other line,
so the next checkpoint covers it. With a key each checkpoint also carries ``"mac"``: an HMAC-SHA256 of
``"servewatch.chain/1\\n{N}\\n{HEX}"``: the plain digest shows integrity to anyone, the MAC authorship to a key holder.

The reader (``ChainVerifier``) is fed the raw bytes of the file, block by block, in the order read: one hash update
per block of whole lines (never per parsed record); only the few lines that carry a checkpoint or a run header are
decoded (found with ``bytes.find``). ``finish()`` gives a ``RecordsIntegrity``: what was verified, where the chain
breaks (between the last good checkpoint and the first bad one), what is unverified, and the problems that forbid
PASS.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import Any

from tui.core.bounds import MAX_LINE_BYTES

FORMAT = "servewatch.chain/1"
DIGEST = "sha256"
MAC = "hmac-sha256"
_KEY_ID_MESSAGE = b"servewatch.chain/1 key id"
_CHAIN_MARK = b'"chain":{'
_RUN_MARK = b'"type":"run"'


def key_id(key: bytes) -> str:
    """A short public name of a key (16 hex digits of an HMAC of a fixed message): tells keys apart, reveals none."""
    return hmac.new(key, _KEY_ID_MESSAGE, hashlib.sha256).hexdigest()[:16]


def checkpoint_mac(key: bytes, lines: int, digest_hex: str) -> str:
    """The MAC of one checkpoint: HMAC-SHA256 over ``servewatch.chain/1\\n{lines}\\n{digest}``."""
    return hmac.new(key, f"{FORMAT}\n{lines}\n{digest_hex}".encode("ascii"), hashlib.sha256).hexdigest()


class ChainWriter:
    """The writer's running digest of one file: ``start()`` at each run header, ``add(line)`` for every line
    written after it (the header included), ``checkpoint()`` for the value a checkpoint line carries."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key
        self._h: Any = None
        self.lines = 0

    @property
    def active(self) -> bool:
        return self._h is not None

    def header_field(self) -> dict:
        """The run header's ``chain`` object: format and algorithms, and for a keyed chain the key id (never the key)."""
        d: dict = {"format": FORMAT, "digest": DIGEST, "checkpoints": ["step", "seal"]}
        if self._key is not None:
            d["mac"] = MAC
            d["key_id"] = key_id(self._key)
        return d

    def start(self) -> None:
        self._h = hashlib.sha256()
        self.lines = 0

    def add(self, line: bytes) -> None:
        self._h.update(line)
        self.lines += 1

    def checkpoint(self) -> dict:
        """``{"lines": N, "digest": HEX[, "mac": HEX]}`` over the N lines added since ``start()``."""
        digest = self._h.hexdigest()
        d: dict = {"lines": self.lines, "digest": digest}
        if self._key is not None:
            d["mac"] = checkpoint_mac(self._key, self.lines, digest)
        return d

    def end(self) -> None:
        self._h = None
        self.lines = 0


@dataclass
class RunChain:
    """What the verifier found for one run (from its header to the next header or the end of the file)."""

    header_line: int | None  # None: lines before any run header
    chained: bool = False
    keyed: bool = False
    key_id: str | None = None
    lines: int = 0  # lines of this run (header included)
    checkpoints: int = 0  # checkpoints that matched
    last_good: int | None = None  # line of the last checkpoint that matched (or the header)
    sealed_at: int | None = None
    broken: str | None = None  # the first break, in words
    tail: int = 0  # lines after the last good checkpoint (unverified when the run has no seal)
    after_seal: int = 0
    first_after_seal: int | None = None
    note: str | None = None
    _h: Any = field(default=None, repr=False)
    _covered: int = 0  # lines hashed since the header

    def to_dict(self) -> dict:
        return {"header_line": self.header_line, "chained": self.chained, "keyed": self.keyed, "key_id": self.key_id,
                "lines": self.lines, "checkpoints": self.checkpoints, "sealed_at": self.sealed_at,
                "broken": self.broken, "unverified_lines": self.unverified_lines(), "note": self.note}

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
    """The verification of one record file: ``state`` is ``intact`` (every line verified), ``partial`` (no break,
    some lines unverified), ``unverified`` (no digest at all) or ``broken`` (``problems``: each forbids PASS)."""

    state: str
    summary: str  # one line: "records verified (N lines, chain intact)", ...
    short: str  # a few words for the console header
    lines: int
    problems: tuple[str, ...] = ()
    details: tuple[str, ...] = ()
    signature: str | None = None  # "verified", "failed", "not checked", None (unsigned)
    runs: tuple[dict, ...] = ()

    def to_dict(self) -> dict:
        return {"state": self.state, "summary": self.summary, "lines": self.lines, "problems": list(self.problems),
                "details": list(self.details), "signature": self.signature, "runs": list(self.runs)}


def _n(v: int) -> str:
    return f"{v:,}"


def seal_line(checkpoint: dict) -> bytes:
    """The seal record's line: ``{"type":"seal","chain":{...}}``, compact JSON; readers require exactly these bytes."""
    return _canonical({"type": "seal", "chain": checkpoint})


def _canonical(obj: dict) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")


class ChainVerifier:
    """Feed the raw bytes of a record file in order (``feed``), then ``finish()``. ``key``: check the MACs of a
    keyed chain (``key_name`` names where the key came from in the words shown, e.g. ``$SW_KEY``)."""

    def __init__(self, key: bytes | None = None, key_name: str = "the key given") -> None:
        self._key = key
        self._key_id = key_id(key) if key is not None else None
        self._key_name = key_name
        self._partial = b""
        self._long = False  # the partial line is longer than MAX_LINE_BYTES: hashed as it passes (``_long_part``)
        self._line = 1  # number of the next line to be scanned
        self._run = RunChain(header_line=None)
        self._runs: list[RunChain] = []
        self._problems: list[str] = []
        self._finished: RecordsIntegrity | None = None
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
                self._problems.append(run.broken)
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
        kind = "seal" if obj.get("type") == "seal" else f"{str(obj.get('type'))[:20]} record"
        good = run.last_good if run.last_good is not None else run.header_line
        span = f"lines {_n(good or 1)}-{_n(lineno)}"
        lines, digest = ch.get("lines"), ch.get("digest")
        if kind == "seal" and raw != _canonical(obj):  # nothing covers the seal itself: it must be exactly as written
            run.broken = (f"line {_n(lineno)}: the seal record is not byte for byte what servewatch writes: edited")
        elif lines != run._covered:
            diff = run._covered - lines if isinstance(lines, int) else None
            more = "" if diff is None else (f": {_n(abs(diff))} line{'s' if abs(diff) != 1 else ''} "
                                            f"{'added' if diff > 0 else 'removed'} there")
            run.broken = (f"{span}: the {kind} at line {_n(lineno)} checkpoints {lines!r:.20} lines of its run, the "
                          f"file holds {_n(run._covered)} before it{more} (the last good checkpoint is line "
                          f"{_n(good or 1)})")
        elif digest != run._h.hexdigest():
            run.broken = (f"{span}: the digest checkpointed in the {kind} at line {_n(lineno)} does not match: lines "
                          f"edited, removed or reordered in that range (the last good checkpoint is line {_n(good or 1)})")
        elif run.keyed and self._key is not None and run.key_id == self._key_id:
            mac = ch.get("mac")
            # compared as bytes: compare_digest refuses str with non-ASCII characters (an edited mac may carry them)
            if not isinstance(mac, str) or not hmac.compare_digest(
                    mac.encode("utf-8", "replace"), checkpoint_mac(self._key, lines, digest).encode("ascii")):
                run.broken = (f"line {_n(lineno)}: the signature of the {kind} does not verify with the key in "
                              f"{self._key_name}: not recorded by a holder of that key, or the checkpoint was rewritten")
        if run.broken is not None:
            self._problems.append(run.broken)
            return
        run.checkpoints += 1
        run.last_good = lineno
        run.tail = 0

    def _start_run(self, lineno: int, obj: dict, raw: bytes) -> None:
        ch = obj.get("chain")
        run = RunChain(header_line=lineno, lines=1)
        self._run = run
        if ch is None:
            run.note = "no digest"
            return
        if type(ch) is not dict or ch.get("format") != FORMAT or ch.get("digest") != DIGEST:
            fmt = ch.get("format") if type(ch) is dict else None
            run.note = f"chain format {str(fmt)[:40]!r} unknown to this reader: unverified"
            return
        run.chained = True
        run._h = hashlib.sha256(raw)
        run._covered = 1
        run.last_good = lineno
        run.keyed = ch.get("mac") is not None
        run.key_id = str(ch.get("key_id"))[:32] if run.keyed else None
        if self._key is not None:
            if not run.keyed:
                p = (f"line {_n(lineno)}: the run is not signed (--verify-key-env was given): its authorship cannot "
                     "be verified")
                self._problems.append(p)
                run.note = "not signed"
            elif ch.get("mac") != MAC:
                run.broken = f"line {_n(lineno)}: signature algorithm {str(ch.get('mac'))[:30]!r} unknown to this reader"
                self._problems.append(run.broken)
            elif run.key_id != self._key_id:
                run.broken = (f"line {_n(lineno)}: the run was signed with another key (key id {run.key_id}), not the "
                              f"key in {self._key_name} (key id {self._key_id})")
                self._problems.append(run.broken)

    def _close_run(self) -> None:
        run = self._run
        if run.lines or run.header_line is not None:
            self._runs.append(run)
        self._run = RunChain(header_line=None)

    # ------------------------------------------------------------------ result
    def finish(self) -> RecordsIntegrity:
        if self._finished is not None:
            return self._finished
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
        self._finished = self._result()
        return self._finished

    def _result(self) -> RecordsIntegrity:
        runs = self._runs
        total = self._line - 1
        problems = list(self._problems)
        details: list[str] = []
        for run in runs:
            if run.after_seal:
                p = (f"line {_n(run.first_after_seal or 0)}: {_n(run.after_seal)} line{'s' if run.after_seal != 1 else ''} "
                     f"after the seal at line {_n(run.sealed_at or 0)} with no new run header: appended after the run "
                     "ended")
                problems.append(p)
        chained = [r for r in runs if r.chained]
        unverified = sum(r.unverified_lines() for r in runs)
        for run in runs:
            where = "lines before the first run header" if run.header_line is None else \
                f"run at line {_n(run.header_line)}"
            if not run.chained:
                details.append(f"{where}: unverified ({run.note or 'no digest'}), {_n(run.lines)} lines")
            elif run.unsealed:
                details.append(f"{where}: verified up to line {_n(run.last_good or 0)}; unverified: {_n(run.tail)} "
                               f"line{'s' if run.tail != 1 else ''} after the last checkpoint (no seal: the run was cut "
                               "short, or its end removed)")
        keyed = [r for r in chained if r.keyed]
        signature: str | None = None
        sig_text = ""
        if self._key is not None:
            sig_ok = bool(chained) and not problems and all(r.keyed and r.key_id == self._key_id for r in chained)
            signature = "verified" if sig_ok else "failed"
            sig_text = (f"; signature verified with the key in {self._key_name}" if sig_ok else
                        f"; signature NOT verified with the key in {self._key_name}")
            if not chained:
                problems.append(f"no signed chain in the file: --verify-key-env was given, authorship cannot be "
                                f"verified with the key in {self._key_name}")
        elif keyed:
            signature = "not checked"
            ids = ", ".join(sorted({str(r.key_id) for r in keyed}))
            sig_text = f"; signed (key id {ids}), signature not checked (no --verify-key-env)"
        if problems:
            state = "broken"
            summary = "records integrity FAILED: " + problems[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")
            short = "chain BROKEN"
        elif not chained:
            state = "unverified"
            summary = "records unverified (no digest)"
            short = "unverified (no digest)"
        elif unverified or any(r.unsealed for r in chained):
            state = "partial"
            summary = (f"records verified ({_n(total)} lines, chain intact) up to the last checkpoint; no seal: the run "
                       "was cut short, or its end removed" + sig_text) if not unverified else \
                (f"records verified in part ({_n(total - unverified)} of {_n(total)} lines, chain intact); "
                       f"unverified: {_n(unverified)} line{'s' if unverified != 1 else ''}" + sig_text)
            short = "verified in part"
        else:
            state = "intact"
            summary = f"records verified ({_n(total)} lines, chain intact)" + sig_text
            short = "chain intact" + (", signed" if signature == "verified" else "")
        return RecordsIntegrity(state=state, summary=summary, short=short, lines=total, problems=tuple(problems),
                                details=tuple(details), signature=signature, runs=tuple(r.to_dict() for r in runs))


def md_records_integrity(doc: Any) -> list[str]:
    """The acceptance report's section on the records' integrity (``doc["records_integrity"]``: one entry per
    record file, ``{"source", **RecordsIntegrity.to_dict()}``); no section when the document has none."""
    items = doc.get("records_integrity") or []
    if not items:
        return []
    out = ["## Records integrity (digest chain)", ""]
    for it in items:
        out.append(f"- `{it.get('source')}`: {it.get('summary')}")
        out.extend(f"  - {d}" for d in it.get("details") or ())
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

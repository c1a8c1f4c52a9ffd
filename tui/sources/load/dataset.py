"""``--dataset FILE``: the file read (streaming, its SHA-256 over the bytes read), its tokens counted, the context.

- :func:`read_dataset`: reads the file in chunks of ``defaults.READ_CHUNK_BYTES`` (JSON Lines line by line; a
  ShareGPT list item by item through :class:`tui.core.datasets.JsonListItems`: never the whole file as one JSON
  value), strict UTF-8, the format decided from the content (:mod:`tui.core.datasets`). A file that cannot be read,
  is not UTF-8, is empty, has no usable row or more bad rows than ``max_bad_share`` allows raises
  :class:`DatasetError` (a :class:`~tui.sources.load.errors.ConfigError`: one line, exit 2).
- :func:`prepare_dataset`: counts the system and user messages (and the answers the rows give as text) through the
  server's ``/tokenize`` (the body :class:`~tui.sources.load.prompts.PromptBuilder` found, else each of
  :data:`~tui.sources.load.prompts.TOKENIZE_FORMS` in turn), ``defaults.DATASET_TOKENIZE_CONCURRENCY`` calls at
  once, the texts of the first ``defaults.DATASET_TOKENIZE_ROWS`` rows exactly and the rest estimated at the ratio
  measured on those (labelled); without ``/tokenize``, ~4 characters per token (labelled). Then the context: the
  server's when it tells (llama.cpp ``/props`` n_ctx of a slot, vLLM ``/v1/models`` max_model_len: first from the
  probe's ``server`` facts, else asked once), else ``--max-context``, else unknown (nothing skipped, the note says
  so). A conversation whose first prompt (system + first user message) plus its first turn's output tokens exceeds
  the context is skipped and counted.

The types (:class:`Dataset`, :class:`Conversation`, :class:`DatasetTurn`) live in :mod:`tui.core.datasets` (pure,
so a workload module low in the load path can use them); they are re-exported here.
"""

from __future__ import annotations

import asyncio
import codecs
import hashlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx

import tui.core.defaults as defaults
from tui.core.bounds import MAX_DATASET_BYTES, MAX_LINE_BYTES, size_text
from tui.core.datasets import (
    COUNTS_ESTIMATE,
    COUNTS_TOKENIZE,
    COUNTS_TOKENIZE_CAPPED,
    OUTPUT_DATASET,
    OUTPUT_FLAG,
    SKIPPED_SAMPLE,
    Conversation,
    Dataset,
    DatasetRows,
    DatasetTurn,
    JsonListError,
    JsonListItems,
)
from tui.sources.infiles import open_input
from tui.sources.load.errors import ConfigError, SetupError
from tui.sources.load.prompts import TOKENIZE_FORMS, PromptBuilder

__all__ = ["EXAMPLES", "EXAMPLE_DIR", "Conversation", "Dataset", "DatasetError", "DatasetTurn", "example_path",
           "prepare_dataset", "read_dataset"]

#: the example datasets shipped with servewatch (written by tools/make_example_datasets.py)
EXAMPLE_DIR = Path(__file__).resolve().parent.parent.parent / "data" / "datasets"
EXAMPLES = ("example-chat.jsonl", "example-sharegpt.json")
#: their SHA-256 (a copy elsewhere is still the example); tests/unit/sources/test_dataset.py checks them
EXAMPLE_SHA256 = {
    "example-chat.jsonl": "10f4da574cd04afe3aff596ba58de76bbf87f92e048132dc3067405e4e91613b",
    "example-sharegpt.json": "fcc8a5ea6d96127a01696e503f84ee9d551ed13289fedcfe0a212f25b54c0d33",
}

TOKENIZE_TIMEOUT_S = 10.0


class DatasetError(ConfigError):
    """The dataset file is not usable (one line, bad usage)."""


def example_path(name: str = "example-chat.jsonl") -> Path:
    """The path of a shipped example dataset."""
    return EXAMPLE_DIR / name


def _is_example(path: Path, sha: str) -> bool:
    try:
        if path.resolve().parent == EXAMPLE_DIR and path.name in EXAMPLES:
            return True
    except OSError:
        pass
    return sha in {h for h in EXAMPLE_SHA256.values() if h}


# ------------------------------------------------------------------ reading


def read_dataset(path: str, *, max_bad_share: float = defaults.DATASET_MAX_BAD_SHARE,
                 chunk_bytes: int = defaults.READ_CHUNK_BYTES) -> Dataset:
    """Parse ``path`` (see the module docstring); :class:`DatasetError` when it is not usable."""
    p = Path(path)
    label = str(path)
    sha = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    rows: DatasetRows | None = None
    items: JsonListItems | None = None
    pending = ""  # JSON Lines: the text after the last newline
    head = ""  # the text before the first non-blank character (the format is not known yet)
    line = 0  # JSON Lines: the lines done
    offset = 0  # bytes read before this chunk
    bom = True  # a UTF-8 byte order mark may still come

    long = -1  # >= 0: characters of a JSON Lines line longer than MAX_LINE_BYTES read past (never held)

    def lines(text: str) -> None:
        nonlocal pending, line, long
        assert rows is not None
        if long >= 0:
            nl = text.find("\n")
            if nl < 0:
                long += len(text)
                return
            line += 1
            rows.bad_row(line, f"longer than the {size_text(MAX_LINE_BYTES)} line limit ({long + nl:,} characters): "
                               "skipped")
            long, text = -1, text[nl + 1:]
        parts = (pending + text).split("\n")
        pending = parts.pop()
        for s in parts:
            line += 1
            rows.add_line(line, s)
        if len(pending) > MAX_LINE_BYTES:
            long, pending = len(pending), ""

    def feed(text: str, final: bool) -> None:
        assert rows is not None
        if items is None:
            lines(text)
            return
        try:
            for index, at, value in items.feed(text, final=final):
                rows.add(at, value, item=index)
        except JsonListError as exc:
            raise DatasetError(f"{label}:{exc.line}: not a JSON list of ShareGPT conversations ({exc.msg}); "
                               f"{rows.rows} item(s) read before") from None

    try:
        fh = open_input(p, "dataset")  # a regular file: a FIFO or a device is refused, never waited on
        size = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise DatasetError(f"cannot read the dataset {label}: {exc.strerror or type(exc).__name__}") from None
    if size > MAX_DATASET_BYTES:  # its rows are held in memory for the run
        fh.close()
        raise DatasetError(f"the dataset {label} is larger than {size_text(MAX_DATASET_BYTES)} ({size:,} bytes), the "
                           "most servewatch reads (its rows are held in memory for the run): take a sample of it")
    with fh:
        while True:
            try:
                chunk = fh.read(chunk_bytes)
            except OSError as exc:
                raise DatasetError(f"cannot read the dataset {label}: {exc.strerror or type(exc).__name__}") from None
            final = not chunk
            sha.update(chunk)
            try:
                text = decoder.decode(chunk, final=final)
            except UnicodeDecodeError as exc:
                raise DatasetError(f"{label} is not UTF-8 text (byte {offset + exc.start}: {exc.reason})") from None
            offset += len(chunk)
            if bom and text:
                text, bom = text.removeprefix("\ufeff"), False
            if rows is None:
                head += text
                first = head.lstrip()
                if not first:
                    if final:
                        break
                    blank = head.rfind("\n")
                    if len(head) > MAX_LINE_BYTES and blank >= 0:  # a sea of blank lines: counted, not kept
                        line += head.count("\n", 0, blank + 1)
                        head = head[blank + 1:]
                    continue
                if first.startswith("["):
                    rows, items = DatasetRows(label, fmt="sharegpt"), JsonListItems(first_line=line + 1)
                else:
                    rows = DatasetRows(label)
                text, head = head, ""
            feed(text, final)
            if final:
                break
    if rows is None:
        raise DatasetError(f"the dataset {label} is empty")
    if items is None and long >= 0:
        line += 1
        rows.bad_row(line, f"longer than the {size_text(MAX_LINE_BYTES)} line limit ({long:,} characters): skipped")
    elif items is None and pending.strip():
        line += 1
        rows.add_line(line, pending)
    why = rows.refusal(max_bad_share)
    if why is not None:
        raise DatasetError(why)
    assert rows.format is not None
    digest = sha.hexdigest()
    return Dataset(name=p.name, path=label, format=rows.format, sha256=digest, rows=rows.rows, bad_rows=rows.bad,
                   conversations=tuple(rows.conversations), problems=tuple(rows.problems),
                   example=_is_example(p, digest))


# ------------------------------------------------------------------ counting


def estimate_tokens(text: str, chars_per_token: float = defaults.DATASET_CHARS_PER_TOKEN) -> int:
    return max(1, round(len(text) / chars_per_token)) if text else 0


async def _count_all(texts: list[str], client: httpx.AsyncClient, root: str, form: str | None,
                     concurrency: int) -> tuple[dict[str, int], str | None]:
    """/tokenize counts of ``texts`` (unique), ``concurrency`` at once; (counts, the body form used). The first text
    decides the form when none is given; an empty dict when the server counts none."""
    url = root.rstrip("/") + "/tokenize"
    counts: dict[str, int] = {}
    if not texts:
        return counts, form
    forms = [form] if form else list(TOKENIZE_FORMS)
    first = texts[0]
    for f in forms:
        n = await PromptBuilder._count(client, url, f, first, TOKENIZE_TIMEOUT_S)
        if n is not None:
            form = f
            counts[first] = n
            break
    else:
        return counts, None
    assert form is not None
    todo = iter(texts[1:])

    async def worker() -> None:
        assert form is not None
        for t in todo:
            n = await PromptBuilder._count(client, url, form, t, TOKENIZE_TIMEOUT_S)
            if n is not None:
                counts[t] = n

    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    return counts, form


def _texts(convs: Iterable[Conversation]) -> list[str]:
    seen: dict[str, None] = {}
    for c in convs:
        if c.system is not None:
            seen.setdefault(c.system)
        for t in c.turns:
            seen.setdefault(t.user)
            if t.answer is not None and t.answer_tokens is None:
                seen.setdefault(t.answer)
    return list(seen)


def _server_context(server: dict) -> tuple[int | None, str | None]:
    n = server.get("n_ctx_per_slot") if isinstance(server, dict) else None
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        return n, "server /props"
    n = server.get("max_model_len") if isinstance(server, dict) else None
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        return n, "server /v1/models"
    return None, None


async def _ask_context(client: httpx.AsyncClient, root: str) -> tuple[int | None, str | None]:
    """The context from /props (llama.cpp) or /v1/models (vLLM), asked once each; (None, None) when neither tells."""
    base = root.rstrip("/")

    async def get(path: str) -> Any:
        try:
            r = await client.get(base + path, timeout=TOKENIZE_TIMEOUT_S)
            return r.json() if r.status_code == 200 else None
        except (httpx.HTTPError, OSError, ValueError):
            return None

    props = await get("/props")
    if isinstance(props, dict):
        dgs = props.get("default_generation_settings")
        for n in ((dgs or {}).get("n_ctx") if isinstance(dgs, dict) else None, props.get("n_ctx")):
            if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                return n, "server /props"
    models = await get("/v1/models")
    if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
        m = models["data"][0]
        n = m.get("max_model_len") if isinstance(m, dict) else None
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return n, "server /v1/models"
    return None, None


def _rows_text(rows: list[int]) -> str:
    return ", ".join(str(r) for r in rows)


async def prepare_dataset(ds: Dataset, client: httpx.AsyncClient, root: str, *, tokenize_form: str | None,
                          max_context: int | None, server: dict, output_tokens_default: int,
                          say: Callable[[str], None], output_tokens_given: bool = False,
                          max_counted_rows: int = defaults.DATASET_TOKENIZE_ROWS,
                          concurrency: int = defaults.DATASET_TOKENIZE_CONCURRENCY) -> Dataset:
    """Count tokens, read the context, skip the conversations too long for it; the usable set, with its header
    block's figures and note. ``output_tokens_given`` (additive): ``--output-tokens`` was given, so every turn's
    output length is ``output_tokens_default`` (the flag's value or its largest typical draw), never the dataset's
    answers. :class:`DatasetError` when no conversation fits the context."""
    notes: list[str] = []
    if ds.example:
        notes.append("servewatch's example dataset (SYNTHETIC conversations written for the project)")
    notes.append(f"format {ds.format} (from the content)")
    if ds.bad_rows:
        notes.append(f"{ds.bad_rows} bad row(s) of {ds.rows} left out (first: {ds.problems[0]})")
        for p in ds.problems[:5]:
            say(f"dataset: bad row {p}")
        if ds.bad_rows > 5:
            say(f"dataset: ... {ds.bad_rows - 5} more bad row(s)")
    convs = ds.conversations
    exact = convs[:max(0, max_counted_rows)]
    texts = _texts(exact)
    say(f"dataset {ds.name}: {len(convs)} conversation(s) ({ds.format}); counting {len(texts)} text(s) "
        f"through /tokenize")
    counts, form = await _count_all(texts, client, root, tokenize_form, concurrency)
    missed = sum(1 for t in texts if t not in counts)
    if counts:
        chars = sum(len(t) for t in counts)
        toks = sum(counts.values())
        cpt = chars / toks if toks else defaults.DATASET_CHARS_PER_TOKEN
        if len(convs) > len(exact) or missed:
            label = COUNTS_TOKENIZE_CAPPED.format(rows=len(exact)) if len(convs) > len(exact) else COUNTS_TOKENIZE
            notes.append(f"token counts by the server's /tokenize for the texts of the first {len(exact)} rows"
                         + (f" ({missed} text(s) it did not answer estimated)" if missed else "")
                         + (f"; the other {len(convs) - len(exact)} rows estimated at the measured {cpt:.2f} chars/token"
                            if len(convs) > len(exact) else ""))
        else:
            label = COUNTS_TOKENIZE
            notes.append("token counts by the server's /tokenize (text only: the chat template adds its own tokens)")
    else:
        cpt = defaults.DATASET_CHARS_PER_TOKEN
        label = COUNTS_ESTIMATE
        notes.append("the server has no usable /tokenize: token counts estimated at ~4 chars/token")

    def n_of(text: str) -> int:
        got = counts.get(text)
        return got if got is not None else estimate_tokens(text, cpt)

    counted: list[Conversation] = []
    with_answers = 0
    for c in convs:
        turns = []
        for t in c.turns:
            ans = t.answer_tokens if t.answer_tokens is not None else (n_of(t.answer) if t.answer is not None else None)
            with_answers += ans is not None
            turns.append(DatasetTurn(user=t.user, user_tokens=n_of(t.user), answer_tokens=ans, answer=None))
        counted.append(Conversation(row=c.row, system=c.system, turns=tuple(turns),
                                    system_tokens=n_of(c.system) if c.system is not None else None))

    if output_tokens_given:
        out_label = OUTPUT_FLAG
    else:
        out_label = OUTPUT_DATASET
        n_turns = sum(len(c.turns) for c in counted)
        if with_answers < n_turns:
            notes.append(f"{n_turns - with_answers} of {n_turns} turn(s) have no answer in the dataset: their output "
                         f"length is --output-tokens' ({output_tokens_default})")

    ctx, source = _server_context(server)
    if ctx is None:
        ctx, source = await _ask_context(client, root)
    if ctx is not None and max_context is not None and max_context != ctx:
        notes.append(f"--max-context {max_context} not used: the {source} says {ctx} tokens")
    if ctx is None and max_context is not None:
        ctx, source = max_context, "--max-context"
    usable: list[Conversation] = []
    skipped: list[int] = []
    if ctx is None:
        usable = counted
        notes.append("context unknown (the server does not tell, no --max-context): nothing skipped for length")
    else:
        for c in counted:
            first = c.turns[0]
            out = output_tokens_default if output_tokens_given or first.answer_tokens is None else first.answer_tokens
            if (c.first_prompt_tokens() or 0) + out > ctx:
                skipped.append(c.row)
            else:
                usable.append(c)
        if skipped:
            more = f" (+{len(skipped) - SKIPPED_SAMPLE} more)" if len(skipped) > SKIPPED_SAMPLE else ""
            notes.append(f"{len(skipped)} conversation(s) skipped: first prompt + first output over the {ctx}-token "
                         f"context ({source}): rows {_rows_text(skipped[:SKIPPED_SAMPLE])}{more}")
        else:
            notes.append(f"every first prompt + first output fits the {ctx}-token context ({source})")
        notes.append("later turns may outgrow it (the history grows): such a turn fails and ends its session")
    if not usable:
        raise DatasetError(f"{ds.path}: no conversation fits the {ctx}-token context ({source}): all "
                           f"{len(counted)} skipped as too long")
    result = ds.with_(conversations=tuple(usable), skipped_too_long=len(skipped),
                   skipped_rows=tuple(skipped[:SKIPPED_SAMPLE]), context_tokens=ctx, context_source=source,
                   token_counts=label, output_tokens=out_label, note="; ".join(notes))
    say(f"dataset {ds.name}: {len(usable)} usable conversation(s), {len(skipped)} too long, {ds.bad_rows} bad row(s)"
        f"; tokens: {label}; context: {ctx if ctx is not None else 'unknown'}"
        + (f" ({source})" if source else ""))
    return result


async def load_dataset(path: str, client: httpx.AsyncClient, root: str, *, max_bad_share: float,
                       tokenize_form: str | None, max_context: int | None, server: dict, output_tokens_default: int,
                       output_tokens_given: bool, say: Callable[[str], None], replay: Any = None) -> Dataset:
    """--dataset at the load generator's setup: :func:`read_dataset`, then :func:`prepare_dataset`. A file that is
    not usable (a :class:`DatasetError`) becomes a SetupError: one line, exit 2. ``replay``: a trace replay's
    recorded workload (``tui.sources.load.trace_sessions.ReplayWorkload``): the file is read and checked against the
    recording (its SHA-256, the recorded rows), not counted again (the recorded lengths asked are replayed)."""
    if replay is not None:
        return replay.use_dataset(read_dataset, path, max_bad_share)
    try:
        ds = read_dataset(path, max_bad_share=max_bad_share)
        return await prepare_dataset(ds, client, root, tokenize_form=tokenize_form, max_context=max_context,
                                     server=server, output_tokens_default=output_tokens_default,
                                     output_tokens_given=output_tokens_given, say=say)
    except ConfigError as exc:
        raise SetupError(str(exc)) from None

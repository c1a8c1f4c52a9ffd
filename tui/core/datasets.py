"""Datasets of prompts and conversations (``--dataset FILE``): rows parsed, bad rows counted, the seeded order.

The file's format is decided from its content (:class:`DatasetRows` is fed the decoded values one by one):

- ``jsonl-prompts``: JSON Lines of ``{"prompt": "..."}`` (optional ``"system"`` text; the answer's length as
  ``"output_tokens"`` (a whole number >= 1) or as the answer text in ``"answer"`` or ``"completion"``), or of bare
  JSON strings (one prompt a line);
- ``jsonl-messages``: JSON Lines of ``{"messages": [{"role": "system"|"user"|"assistant", "content": ...}]}``: the
  system messages before the first user message are the conversation's system prompt, each user message is a turn,
  the assistant message after it gives that turn's answer length. ``content`` is a string or a list of
  ``{"type": "text", "text": ...}`` parts;
- ``sharegpt``: a JSON list of ``{"conversations": [{"from": "human"|"gpt"|"system", "value": "..."}]}`` (also
  ``user``/``assistant``/``chatgpt`` as ``from``), or JSON Lines of such objects.

The first usable row fixes the format; a row of another shape is bad. A *comment* (a JSON object whose keys all
start with ``_``, e.g. ``{"_comment": "..."}``) and a blank line are not rows: skipped, not counted. Every other
row is usable or bad, and a bad row is reported ``FILE:LINE: reason`` (for a ShareGPT list,
``FILE:LINE: item N: reason``, LINE where the item starts), counted.

:class:`JsonListItems` splits a JSON list into its items as the text arrives, so a huge ShareGPT file is never
held whole. :class:`Dataset` holds the usable conversations and what the run header says about them
(:meth:`Dataset.header_block`); :meth:`Dataset.at` is the seeded order. Standard library only.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from tui.core.bounds import MAX_LINE_BYTES, size_text

Format = Literal["jsonl-prompts", "jsonl-messages", "sharegpt"]
FORMATS: tuple[Format, ...] = ("jsonl-prompts", "jsonl-messages", "sharegpt")

#: the header's ``token_counts`` values
COUNTS_TOKENIZE = "server /tokenize"
COUNTS_ESTIMATE = "estimate (~4 chars/token)"
COUNTS_TOKENIZE_CAPPED = "server /tokenize (first {rows} rows), the rest estimated at the measured chars/token"
COUNTS_NONE = "not counted"
#: the header's ``output_tokens`` values
OUTPUT_DATASET = "dataset answers"
OUTPUT_FLAG = "--output-tokens"

#: bad rows kept by text (all are counted)
MAX_PROBLEMS = 50
#: rows named in the note's sample of the skipped ones
SKIPPED_SAMPLE = 8

_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                   "chatgpt": "assistant", "bard": "assistant", "bing": "assistant", "system": "system"}


@dataclass(frozen=True)
class DatasetTurn:
    """One user turn: its text, its token count and the dataset answer's length (None: no answer in the row).
    ``answer`` (additive): the answer text until it is counted (None once counted, so a Dataset pickles small)."""

    user: str
    user_tokens: int | None
    answer_tokens: int | None
    answer: str | None = None


@dataclass(frozen=True)
class Conversation:
    """One usable row: ``row`` is its 1-based line (JSON Lines) or 1-based index in the list (ShareGPT).
    ``system_tokens`` (additive): the system prompt's token count once counted."""

    row: int
    system: str | None
    turns: tuple[DatasetTurn, ...]
    system_tokens: int | None = None

    def first_prompt_tokens(self) -> int | None:
        """Tokens of the first prompt (system + first user message), None when not counted."""
        t = self.turns[0].user_tokens
        if t is None or (self.system is not None and self.system_tokens is None):
            return None
        return t + (self.system_tokens or 0)


# ------------------------------------------------------------------ one row


def is_comment(value: Any) -> bool:
    """A comment row: a non-empty object whose keys all start with ``_`` (skipped, not counted)."""
    return isinstance(value, dict) and bool(value) and all(isinstance(k, str) and k.startswith("_") for k in value)


def _text(content: Any) -> str | None:
    """A message's text: a string, or a list of text parts joined; None for anything else."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and p.get("type", "text") == "text" and isinstance(p.get("text"), str):
                parts.append(p["text"])
            else:
                return None
        return "".join(parts)
    return None


def _conversation(row: int, msgs: list[tuple[str, str]]) -> Conversation | str:
    """(role, text) pairs to a conversation, or why not."""
    system: list[str] = []
    turns: list[list[Any]] = []  # [user text, answer text | None, answer seen]
    for i, (role, text) in enumerate(msgs, 1):
        if role == "system":
            if turns:
                return f"a system message after the first user message (message {i})"
            if text.strip():
                system.append(text)
        elif role == "user":
            if not text.strip():
                return f"empty user message (message {i})"
            turns.append([text, None, False])
        else:
            if not turns:
                return f"an assistant message before any user message (message {i})"
            if turns[-1][2]:
                return f"two assistant messages in a row (message {i})"
            turns[-1][1] = text if text.strip() else None
            turns[-1][2] = True
    if not turns:
        return "no user message"
    return Conversation(row=row, system="\n\n".join(system) if system else None,
                        turns=tuple(DatasetTurn(user=u, user_tokens=None, answer_tokens=None, answer=a)
                                    for u, a, _seen in turns))


def _messages(row: int, msgs: Any) -> Conversation | str:
    if not isinstance(msgs, list) or not msgs:
        return "'messages' is not a non-empty list"
    pairs: list[tuple[str, str]] = []
    for i, m in enumerate(msgs, 1):
        if not isinstance(m, dict):
            return f"message {i} is not an object"
        role = m.get("role")
        if role not in ("system", "user", "assistant"):
            return f"message {i} has role {role!r} (system, user or assistant)"
        text = _text(m.get("content"))
        if text is None:
            return f"message {i} has no text content"
        pairs.append((str(role), text))
    return _conversation(row, pairs)


def _sharegpt(row: int, conv: Any) -> Conversation | str:
    if not isinstance(conv, list) or not conv:
        return "'conversations' is not a non-empty list"
    pairs: list[tuple[str, str]] = []
    for i, m in enumerate(conv, 1):
        if not isinstance(m, dict):
            return f"message {i} is not an object"
        role = _SHAREGPT_ROLES.get(str(m.get("from", "")).lower())
        if role is None:
            return f"message {i} is from {m.get('from')!r} (human, gpt or system)"
        if not isinstance(m.get("value"), str):
            return f"message {i} has no text 'value'"
        pairs.append((role, m["value"]))
    return _conversation(row, pairs)


def _prompt(row: int, obj: Any) -> Conversation | str:
    if isinstance(obj, str):
        text, system, answer, out = obj, None, None, None
    else:
        text = obj.get("prompt")
        if not isinstance(text, str):
            return "'prompt' is not text"
        system = obj.get("system")
        if system is not None and not isinstance(system, str):
            return "'system' is not text"
        out = obj.get("output_tokens")
        if out is not None and (isinstance(out, bool) or not isinstance(out, int) or out < 1):
            return f"'output_tokens' is {out!r}, not a whole number >= 1"
        answer = next((obj[k] for k in ("answer", "completion") if isinstance(obj.get(k), str)), None)
    if not text.strip():
        return "empty prompt"
    return Conversation(row=row, system=system if system and system.strip() else None,
                        turns=(DatasetTurn(user=text, user_tokens=None, answer_tokens=out,
                                           answer=answer if out is None and answer and answer.strip() else None),))


def parse_row(row: int, value: Any) -> tuple[Format, Conversation] | str:
    """One decoded row: its format and conversation, or the reason it is bad."""
    if isinstance(value, str):
        got = _prompt(row, value)
        return ("jsonl-prompts", got) if isinstance(got, Conversation) else got
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__}, not a prompt, chat messages or a ShareGPT conversation"
    kind: Format
    if "messages" in value:
        kind, got = "jsonl-messages", _messages(row, value["messages"])
    elif "conversations" in value:
        kind, got = "sharegpt", _sharegpt(row, value["conversations"])
    elif "prompt" in value:
        kind, got = "jsonl-prompts", _prompt(row, value)
    else:
        return "no 'prompt', 'messages' or 'conversations' key"
    return (kind, got) if isinstance(got, Conversation) else got


# ------------------------------------------------------------------ the rows of one file


class DatasetRows:
    """The rows of one file as they are read: usable conversations, bad rows counted (the first
    :data:`MAX_PROBLEMS` kept as ``FILE:LINE: reason``), the format fixed by the first usable row."""

    def __init__(self, label: str, *, fmt: Format | None = None) -> None:
        self.label = label
        self.format: Format | None = fmt
        self.fixed = fmt is not None  # a ShareGPT list: every item must be a ShareGPT conversation
        self.rows = 0
        self.bad = 0
        self.comments = 0
        self.problems: list[str] = []
        self.conversations: list[Conversation] = []

    def bad_row(self, line: int, reason: str, *, item: int | None = None) -> None:
        self.rows += 1
        self.bad += 1
        if len(self.problems) < MAX_PROBLEMS:
            at = f"{self.label}:{line}: " + (f"item {item}: " if item is not None else "")
            self.problems.append(at + reason)

    def add(self, line: int, value: Any, *, item: int | None = None) -> None:
        """One decoded value at ``line`` (JSON Lines) or list item ``item`` starting at ``line``."""
        if is_comment(value):
            self.comments += 1
            return
        row = item if item is not None else line
        got = parse_row(row, value)
        if isinstance(got, str):
            self.bad_row(line, got, item=item)
            return
        kind, conv = got
        if self.format is None:
            self.format = kind
        elif kind != self.format:
            why = "in a ShareGPT list" if self.fixed else f"after {self.format} rows (the first usable row fixed the format)"
            self.bad_row(line, f"a {kind} row {why}", item=item)
            return
        self.rows += 1
        self.conversations.append(conv)

    def add_line(self, line: int, text: str) -> None:
        """One line of a JSON Lines file (blank lines are skipped)."""
        s = text.strip()
        if not s:
            return
        if len(s) > MAX_LINE_BYTES:
            self.bad_row(line, f"longer than the {size_text(MAX_LINE_BYTES)} line limit: skipped")
            return
        try:
            value = json.loads(s)
        except RecursionError:
            self.bad_row(line, "not JSON (nested too deep)")
            return
        except ValueError as exc:
            self.bad_row(line, f"not JSON ({exc.msg if isinstance(exc, json.JSONDecodeError) else exc})")
            return
        self.add(line, value)

    def refusal(self, max_bad_share: float) -> str | None:
        """Why the file is refused (too many bad rows, none usable), or None."""
        first = f"; first: {self.problems[0]}" if self.problems else ""
        if not self.conversations:
            what = f"{self.rows} row(s), all bad{first}" if self.rows else "no rows (only comments or blank lines)"
            return f"{self.label}: no usable row: {what}"
        if self.rows and self.bad / self.rows > max_bad_share:
            return (f"{self.label}: {self.bad} of {self.rows} rows are bad ({self.bad / self.rows:.1%}, more than the "
                    f"{max_bad_share:.1%} allowed by --dataset-max-bad-share){first}")
        return None


# ------------------------------------------------------------------ a JSON list, item by item


class JsonListError(ValueError):
    """The text is not a JSON list (``line``: where it stops making sense)."""

    def __init__(self, line: int, msg: str) -> None:
        super().__init__(f"line {line}: {msg}")
        self.line = line
        self.msg = msg


class JsonListItems:
    """The items of one JSON list, decoded as text is fed (each item whole; the consumed text dropped).

    ``feed(text)`` returns the (1-based index, line where the item starts, value) of the items completed so far;
    ``feed("", final=True)`` at the end. A syntax error raises :class:`JsonListError`.
    """

    _WS = " \t\r\n"

    def __init__(self, first_line: int = 1) -> None:
        self._buf = ""
        self._line = first_line  # the line at _buf[0]
        self._state = "start"  # start | item | sep | end
        self._index = 0
        self._dec = json.JSONDecoder()

    def _skip_ws(self, pos: int) -> int:
        buf, n = self._buf, len(self._buf)
        while pos < n and buf[pos] in self._WS:
            pos += 1
        return pos

    def feed(self, text: str, *, final: bool = False) -> list[tuple[int, int, Any]]:
        self._buf += text
        out: list[tuple[int, int, Any]] = []
        pos = 0
        buf = self._buf
        seen, seen_line = 0, self._line  # the newlines before ``seen`` are counted (positions only grow)

        def line_of(at: int) -> int:
            nonlocal seen, seen_line
            seen_line += buf.count("\n", seen, at)
            seen = at
            return seen_line

        while True:
            pos = self._skip_ws(pos)
            if pos >= len(buf):
                break
            ch = buf[pos]
            if self._state == "start":
                if ch != "[":
                    raise JsonListError(line_of(pos), "not a JSON list")
                self._state, pos = "item", pos + 1
            elif self._state == "sep":
                if ch == ",":
                    self._state, pos = "item", pos + 1
                elif ch == "]":
                    self._state, pos = "end", pos + 1
                else:
                    raise JsonListError(line_of(pos), f"expected ',' or ']' between items, found {ch!r}")
            elif self._state == "item":
                if ch == "]" and self._index == 0:
                    self._state, pos = "end", pos + 1
                    continue
                try:
                    value, end = self._dec.raw_decode(buf, pos)
                except RecursionError:
                    raise JsonListError(line_of(pos), f"item {self._index + 1}: nested too deep") from None
                except json.JSONDecodeError as exc:
                    if not final:
                        if len(buf) - pos > MAX_LINE_BYTES:  # never held without end: a row is at most the line cap
                            raise JsonListError(line_of(pos), f"item {self._index + 1} is longer than the "
                                                f"{size_text(MAX_LINE_BYTES)} limit of one row") from None
                        break  # the item may be incomplete: wait for more text
                    line_of(pos)
                    raise JsonListError(line_of(max(pos, exc.pos)), f"item {self._index + 1}: {exc.msg}") from None
                if end >= len(buf) and not final:
                    break  # a value cut at the end of the text (a number) may go on
                if end - pos > MAX_LINE_BYTES:  # the same limit whatever the chunks the text came in
                    raise JsonListError(line_of(pos), f"item {self._index + 1} is longer than the "
                                        f"{size_text(MAX_LINE_BYTES)} limit of one row")
                self._index += 1
                out.append((self._index, line_of(pos), value))
                self._state, pos = "sep", end
            else:
                raise JsonListError(line_of(pos), "text after the end of the list")
        self._line = line_of(pos)
        self._buf = buf[pos:]
        if final and self._state != "end":
            where = self._line + self._buf.count("\n")
            raise JsonListError(where, "the file ends inside the list" if self._state != "start" else "empty")
        return out


# ------------------------------------------------------------------ the dataset


@dataclass(eq=False)
class Dataset:
    """The usable conversations of one file and what the run header says of them. Picklable and small (no file
    handle; the permutations cached by :meth:`at` do not travel)."""

    name: str
    path: str
    format: Format
    sha256: str
    rows: int
    bad_rows: int
    conversations: tuple[Conversation, ...]
    problems: tuple[str, ...] = ()
    example: bool = False
    skipped_too_long: int = 0
    skipped_rows: tuple[int, ...] = ()  # a sample (SKIPPED_SAMPLE rows at most)
    context_tokens: int | None = None
    context_source: str | None = None
    token_counts: str = COUNTS_NONE
    output_tokens: str = OUTPUT_DATASET
    note: str = ""
    _perms: dict[tuple[str, int], list[int]] = field(default_factory=dict, init=False, repr=False)
    _rows: dict[int, Conversation] | None = field(default=None, init=False, repr=False)

    def __len__(self) -> int:
        return len(self.conversations)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_perms"] = {}
        state["_rows"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def with_(self, **changes: Any) -> Dataset:
        """A copy with ``changes`` (fields of this class)."""
        return replace(self, **changes)

    def order(self, seed: object, cycle: int) -> list[int]:
        """Cycle ``cycle``'s permutation of the conversations' indices from ``seed`` (cached: the last two asked)."""
        key = (str(seed), cycle)
        perm = self._perms.get(key)
        if perm is None:
            perm = list(range(len(self.conversations)))
            random.Random(f"servewatch-dataset:{key[0]}:{cycle}").shuffle(perm)
            if len(self._perms) >= 2:
                self._perms.pop(next(iter(self._perms)))  # the oldest
            self._perms[key] = perm
        return perm

    def at(self, seed: object, n: int) -> Conversation:
        """The ``n``-th conversation (n >= 0) of the seeded order: a permutation of the usable rows from ``seed``,
        a fresh permutation each time the rows are all used. A function of (seed, n) only."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        if not self.conversations:
            raise ValueError("the dataset has no usable conversation")
        cycle, i = divmod(n, len(self.conversations))
        return self.conversations[self.order(seed, cycle)[i]]

    def by_row(self, row: int) -> Conversation | None:
        """The usable conversation of ``row`` (a record's ``dataset_row``: a trace replay), None when not usable."""
        index = self._rows
        if index is None:
            index = self._rows = {c.row: c for c in self.conversations}
        return index.get(row)

    def header_block(self) -> dict[str, Any]:
        """The run header's ``load.dataset`` block."""
        return {"name": self.name, "format": self.format, "sha256": self.sha256, "rows": self.rows,
                "bad_rows": self.bad_rows, "usable": len(self.conversations), "skipped_too_long": self.skipped_too_long,
                "context_tokens": self.context_tokens, "context_source": self.context_source,
                "token_counts": self.token_counts, "output_tokens": self.output_tokens, "example": self.example,
                "note": self.note}

"""What each session and each turn of a shaped workload asks (issue 23): turns, think times, prefix groups, dataset
conversations, and the text of the shared system prompts.

A :class:`Workload` is plain, picklable data (it travels to worker processes and Ray actors inside
``WorkerSetup``). Every draw is a function of (seed, the step, the session's or request's index in the step) alone,
never of which process runs it: a split over workers asks exactly what one process asks. The keys:

- a request or session of a step is ``where = "<phase>:<level>:<round>:<index>"`` (the key the length draws use);
- its turn ``k`` draws its lengths at ``where + ":t<k>"`` (turn 1 of a session too), its think time at the same key;
- turns per session at ``"turns:" + where``, the prefix group at ``"prefix:" + where``;
- a dataset conversation is ``Dataset.at(seed, index)`` (the index within the step).

A trace replay (``Workload.replay``, :class:`tui.sources.load.trace_sessions.ReplayWorkload`) draws nothing: the
index (the arrival's, i.e. the session start's, in the trace) selects the recorded session, whose turns, lengths,
think times, prefix group and dataset row are the recording's.

The dataset itself (``tui.sources.load.dataset``, the datasets seam) is seen here only through
:class:`DatasetLike`: ``at(seed, n)`` gives a conversation with ``row``, ``system`` and ``turns`` (each with
``user``, ``user_tokens``, ``answer_tokens``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tui.core.lengths import LengthDist, draw_at, header_block
from tui.core.thinktime import ThinkDist, draw_think
from tui.core.thinktime import header_block as think_block
from tui.sources.load.prompts import PromptBuilder

CHARS_PER_TOKEN = 4.0  # a dataset text without a token count: the prompt builder's estimate


class TurnLike(Protocol):
    user: str
    user_tokens: int | None
    answer_tokens: int | None


class ConversationLike(Protocol):
    row: int
    system: str | None
    turns: Sequence[Any]  # TurnLike


class DatasetLike(Protocol):
    def at(self, seed: Any, n: int) -> Any: ...  # a ConversationLike
    def header_block(self) -> dict: ...
    def __len__(self) -> int: ...


def where_key(phase: str, level: float, rnd: int, index: int) -> str:
    """The key of one request or session of a step (the length draws' key)."""
    return f"{phase}:{level:g}:{rnd}:{index}"


def _pick(seed: Any, key: str, n: int) -> int:
    """A whole number in [0, n) from (seed, key) alone."""
    h = hashlib.blake2b(f"{seed}|{key}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") % n


@dataclass
class SessionPlan:
    """One session (or one single request of a shaped workload): what it will ask."""

    index: int
    where: str
    turns: int  # planned turns (1: a single request)
    group: int | None  # the shared prefix group
    system: str | None  # its system prompt text (the shared prefix and/or the dataset's system message)
    system_tokens: int  # that text's tokens (asked, or estimated for a dataset's text)
    conversation: Any = None  # the dataset conversation (ConversationLike) or None
    replay: Any = None  # a trace replay: the recorded session (tui.sources.load.trace_sessions.ReplayItem)


@dataclass
class Workload:
    """The shape of a workload beyond lengths and arrivals (see the module docstring)."""

    seed: Any
    turns: LengthDist | None = None
    think: ThinkDist | None = None
    prefix_tokens: int | None = None
    prefix_groups: int = 1
    dataset: Any = None  # DatasetLike
    output_given: bool = False  # --output-tokens was given: it wins over a dataset's answer lengths
    replay: Any = None  # a trace replay's recorded workload (tui.sources.load.trace_sessions.ReplayWorkload)
    _prefix_text: dict[int, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def replaying(cls, seed: Any, replay: Any) -> Workload:
        """A trace replay's workload: the recorded sessions, prefixes and dataset rows (nothing drawn)."""
        return cls(seed=seed, prefix_tokens=replay.prefix_tokens, prefix_groups=replay.prefix_groups, replay=replay)

    @property
    def sessions(self) -> bool:
        return self.turns is not None or (self.replay is not None and self.replay.sessions_mode)

    def system_prompt(self, group: int, prompts: PromptBuilder) -> str:
        """Group ``group``'s shared system prompt, ``prefix_tokens`` long (built once per group): every group's text
        differs from its first words, so two groups share no prefix and one group's requests share all of it."""
        text = self._prefix_text.get(group)
        if text is None:
            assert self.prefix_tokens is not None
            text = prompts.build(f"[system prompt {group}] You are assistant {group}. Context words: ",
                                 self.prefix_tokens)
            self._prefix_text[group] = text
        return text

    def plan(self, where: str, index: int, prompts: PromptBuilder) -> SessionPlan:
        """Session (or request) ``index`` of a step: its turns, prefix group, system prompt and conversation."""
        if self.replay is not None:
            return self._replayed(where, index, prompts)
        conv = self.dataset.at(self.seed, index) if self.dataset is not None else None
        if self.turns is None:
            turns = 1
        else:
            turns = draw_at(self.turns, self.seed, "turns:" + where)
            if conv is not None:
                turns = min(turns, len(conv.turns))
        group = None
        system: str | None = None
        sys_tokens = 0
        if self.prefix_tokens is not None:
            group = _pick(self.seed, "prefix:" + where, self.prefix_groups) if self.prefix_groups > 1 else 0
            system = self.system_prompt(group, prompts)
            sys_tokens = self.prefix_tokens
        if conv is not None and conv.system:
            system = conv.system if system is None else system + "\n\n" + conv.system
            sys_tokens += _system_tokens(conv)
        return SessionPlan(index, where, turns, group, system, sys_tokens, conv)

    def _replayed(self, where: str, index: int, prompts: PromptBuilder) -> SessionPlan:
        """A trace replay's session ``index``: the recorded one."""
        item = self.replay.items[index]
        group = item.prefix_group if self.prefix_tokens is not None else None
        system = self.system_prompt(group, prompts) if group is not None else None
        sys_tokens = (self.prefix_tokens or 0) if group is not None else 0
        conv = None
        if item.dataset_row is not None and self.dataset is not None:
            conv = self.dataset.by_row(item.dataset_row)
            if conv is not None and conv.system:
                system = conv.system if system is None else system + "\n\n" + conv.system
                sys_tokens += _system_tokens(conv)
        return SessionPlan(index, where, len(item.turns), group, system, sys_tokens, conv, replay=item)

    def think_for(self, plan: SessionPlan, turn: int) -> float:
        """The think time before turn ``turn`` (>= 2) of ``plan``: the recorded one in a replay, else drawn."""
        if plan.replay is not None:
            return float(plan.replay.turns[turn - 1].think_s)
        return self.think_at(plan.where, turn)

    def replay_lengths(self, plan: SessionPlan, turn: int) -> tuple[int, int] | None:
        """A replayed turn's recorded lengths asked (input, output); None outside a replay."""
        if plan.replay is None:
            return None
        t = plan.replay.turns[turn - 1]
        return int(t.input_tokens), int(t.output_tokens)

    def think_at(self, where: str, turn: int) -> float:
        """The think time before turn ``turn`` (>= 2) of the session at ``where``."""
        if self.think is None:
            return 0.0
        return draw_think(self.think, self.seed, f"{where}:t{turn}")

    def dataset_turn(self, plan: SessionPlan, turn: int) -> tuple[str, int, int | None] | None:
        """A dataset conversation's turn ``turn`` (1-based): (user text, its tokens, the answer's tokens unless
        --output-tokens was given); None without a dataset."""
        conv = plan.conversation
        if conv is None:
            return None
        if plan.replay is not None:  # the recorded turn of the row, at the recorded lengths
            rt = plan.replay.turns[turn - 1]
            return conv.turns[rt.turn - 1].user, int(rt.input_tokens), int(rt.output_tokens)
        t = conv.turns[turn - 1]
        n_in = t.user_tokens if t.user_tokens is not None else estimate_tokens(t.user)
        n_out = None if self.output_given else t.answer_tokens
        return t.user, max(1, int(n_in)), n_out

    def record_fields(self, plan: SessionPlan) -> dict[str, Any]:
        """The record fields every request of ``plan`` carries whatever its turn."""
        d: dict[str, Any] = {}
        if plan.group is not None:
            d["prefix_group"] = plan.group
        if plan.conversation is not None:
            d["dataset_row"] = plan.conversation.row
        return d


def _system_tokens(conv: Any) -> int:
    """A dataset conversation's system message in tokens: the server's count when it was counted, else estimated."""
    n = getattr(conv, "system_tokens", None)
    return int(n) if isinstance(n, int) and n >= 0 else estimate_tokens(conv.system)


def estimate_tokens(text: str) -> int:
    """A text's tokens at ~4 characters per token (a dataset text the server did not count)."""
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def header_blocks(turns: LengthDist | None, think: ThinkDist | None, prefix_tokens: int | None, prefix_groups: int,
                  dataset: Any, *, cache_prompt: bool, rejected: bool = False, replay: Any = None) -> dict:
    """The run header's issue-23 keys of ``load``: ``sessions``, ``shared_prefix``, ``dataset``, ``cache_policy``
    (``rejected``: the server refused the ``cache_prompt`` field, so none is sent). ``replay``: a trace replay's
    recorded workload (``ReplayWorkload``), whose recorded ``sessions`` and ``shared_prefix`` blocks are stated."""
    sessions = None
    if replay is not None:
        sessions = dict(replay.sessions_block) if replay.sessions_block else None
        if sessions is None and replay.sessions_mode:
            sessions = {"turns": None, "think_time": None}
        if sessions is not None:
            sessions["history"] = "each turn sends the whole conversation so far, with the answers the server gave"
            sessions["replayed"] = "the recorded turns of each session, at their lengths and think times"
        prefix_tokens, prefix_groups = replay.prefix_tokens, replay.prefix_groups
    elif turns is not None:
        sessions = {"turns": header_block(turns), "think_time": think_block(think) if think is not None else None,
                    "history": "each turn sends the whole conversation so far, with the answers the server gave"}
    prefix = {"tokens": prefix_tokens, "groups": prefix_groups} if prefix_tokens is not None else None
    if rejected:
        policy: dict[str, Any] = {"cache_prompt": None, "why": "not sent, the server's default (the server rejected it)"}
    elif cache_prompt:
        what = " and ".join(w for w, on in (("sessions", sessions is not None),
                                            ("shared prefixes", prefix_tokens is not None)) if on)
        policy = {"cache_prompt": True, "why": f"{what}: the server may serve a prefix it has seen from its cache, "
                                               "which is what this workload measures"}
    else:
        policy = {"cache_prompt": False, "why": "plain workload: a prefix cache cannot hide prefill time"}
    return {"sessions": sessions, "shared_prefix": prefix,
            "dataset": dataset.header_block() if dataset is not None else None, "cache_policy": policy}


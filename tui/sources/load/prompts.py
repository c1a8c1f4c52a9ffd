"""Prompts of a requested token length (:class:`PromptBuilder`): exact with ``--tokenizer`` (the model's own
``tokenizer.json``, :mod:`tui.sources.load.tokenizer`), else sized through the server's ``/tokenize``, else an
estimate of ~4 characters per token, labelled as one in the run header (``load.prompt_builder``) and wherever the
lengths are shown."""

from __future__ import annotations

from typing import Any

import httpx

from tui.sources.load.tokenizer import LocalTokenizer, load_tokenizer

_WORDS = (  # noqa: SIM905 (a paragraph reads better than a list of 100 strings)
    "time year people way day man thing woman life child world school state family student group country "
    "problem hand part place case week company system program question work government number night point "
    "home water room mother area money story fact month lot right study book eye job word business issue "
    "side kind head house service friend father power hour game line end member law car city community name "
    "president team minute idea kid body information back parent face others level office door health person "
    "art war history party result change morning reason research girl guy moment air teacher force education"
).split()


#: the request bodies of the servers' /tokenize, tried in this order: llama.cpp's ``{"content": text}``, then vLLM's
#: ``{"prompt": text, "add_special_tokens": false}`` (a vLLM 0.32 answers the first with HTTP 400: no ``prompt``);
#: both answer ``{"tokens": [...]}``
TOKENIZE_FORMS = ("content", "prompt")


class PromptBuilder:
    """Prompts of a requested token length, unique from their first token on.

    With a tokenizer (``--tokenizer``) every prompt is cut to exactly the length asked and its count is returned
    beside it (:meth:`build_counted`); the server's ``/tokenize``, when it answers, counts one built prompt as a
    cross-check (a different count says the tokenizer is not the served model's: said in the note). Without one,
    with the server's ``/tokenize`` (POST {"content": text} -> {"tokens": [...]}, llama.cpp; or vLLM's
    {"prompt": text, "add_special_tokens": false}) the builder
    measures tokens per filler word and the cost of the unique prefix once, then checks one built
    prompt; without it, it estimates ~4 characters per token. The lengths are of the prompt text;
    a chat template adds its own tokens (about 20-25 for small chat models): the server's reported
    usage is recorded per request.
    """

    CHARS_PER_TOKEN = 4.0

    def __init__(self, tokenizer: LocalTokenizer | None = None) -> None:
        self.method = "estimate"
        self.tokens_per_word = 1.0
        self.prefix_tokens = 8.0
        self.check: dict | None = None
        self.note = ""
        self.tokenize_form: str | None = None  # the /tokenize body the server answered (TOKENIZE_FORMS)
        self._filler = ""
        self._ends: list[int] = [0]  # char offset after k words
        self._grow(512)
        self.tokenizer = tokenizer
        if tokenizer is not None:
            self.method = "tokenizer"
            w = 256
            self.tokens_per_word = tokenizer.count(self._filler[: self._ends[w]]) / w
            self.prefix_tokens = float(tokenizer.count(prompt_prefix("00000000-000000")))
            self.note = f"prompt lengths exact: counted by the tokenizer {tokenizer.describe()}"

    @property
    def count(self) -> Any:
        """The tokenizer's count of a text (``LocalTokenizer.count``), or None without a tokenizer."""
        return self.tokenizer.count if self.tokenizer is not None else None

    def _grow(self, words: int) -> None:
        if len(self._ends) - 1 >= words:
            return
        parts = [self._filler] if self._filler else []
        i = len(self._ends) - 1
        n = len(_WORDS)
        pos = len(self._filler)
        while i < words:
            w = _WORDS[(i * 7 + i // n) % n]  # a fixed, non-repeating-looking order
            piece = w if pos == 0 else " " + w
            parts.append(piece)
            pos += len(piece)
            self._ends.append(pos)
            i += 1
        self._filler = "".join(parts)

    def words_for(self, tokens: int) -> int:
        if self.method in ("tokenize", "tokenizer"):
            return max(0, round((tokens - self.prefix_tokens) / self.tokens_per_word))
        avg = self._ends[-1] / max(1, len(self._ends) - 1)  # chars per word incl. the space
        return max(0, round((tokens * self.CHARS_PER_TOKEN - self.prefix_chars) / avg))

    prefix_chars = 24  # "[xxxxxxxx-000001] Repeat: " is about this long

    def build(self, prefix: str, tokens: int) -> str:
        return self.build_counted(prefix, tokens)[0]

    def build_counted(self, prefix: str, tokens: int) -> tuple[str, int | None]:
        """(prompt, its tokens by the tokenizer): exactly ``tokens`` with a tokenizer (see ``LocalTokenizer.exact``
        for the one case it is not), None without one (the length is then the calibrated or estimated size)."""
        k = self.words_for(tokens)
        tok = self.tokenizer
        if tok is None:
            self._grow(k)
            return prefix + self._filler[: self._ends[k]], None

        def text_of(n_words: int) -> str:
            self._grow(n_words)
            return prefix + self._filler[: self._ends[n_words]]

        return tok.exact(text_of, k + 4, tokens)

    async def calibrate(self, client: httpx.AsyncClient, root: str, sample_prefix: str, sizes: list[int],
                        timeout: float = 10.0) -> None:
        """Try the server's /tokenize; keep the estimate when it is missing or odd. With a tokenizer: count one
        built prompt with it and with the server's /tokenize (when it answers), as a cross-check."""

        forms = list(TOKENIZE_FORMS)

        async def count(text: str) -> int | None:
            # the first form the server answers is kept for the other calls
            for form in list(forms):
                n = await self._count(client, root + "/tokenize", form, text, timeout)
                if n is not None:
                    forms[:] = [form]
                    self.tokenize_form = form
                    return n
                if len(forms) > 1:
                    forms.remove(form)
            return None

        if self.tokenizer is not None:
            return await self._cross_check(count, sample_prefix, max(sizes))
        w = 256
        self._grow(w)
        n_fill = await count(self._filler[: self._ends[w]])
        n_pre = await count(sample_prefix) if n_fill is not None else None
        if not n_fill or n_pre is None:
            self.note = "server has no usable /tokenize: prompt lengths estimated at ~4 chars/token"
            return
        self.method = "tokenize"
        self.tokens_per_word = n_fill / w
        self.prefix_tokens = float(n_pre)
        target = max(sizes)
        got = await count(self.build(sample_prefix, target))
        self.check = {"asked": target, "got": got}
        self.note = f"prompt lengths from the server's /tokenize (check: asked {target}, got {got} tokens)"

    async def _cross_check(self, count: Any, sample_prefix: str, target: int) -> None:
        """The tokenizer's count of one built prompt beside the server's /tokenize count of the same text."""
        tok = self.tokenizer
        assert tok is not None
        text, mine = self.build_counted(sample_prefix, target)
        server = await count(text)
        self.check = {"asked": target, "tokenizer": mine, "server_tokenize": server}
        if server is None:
            self.note += f" (check: asked {target}, counted {mine}; the server has no /tokenize to compare with)"
        elif server == mine:
            self.note += f" (check: asked {target}, counted {mine}; the server's /tokenize counts {server} too)"
        else:
            self.check["disagree"] = True
            self.note = (f"WARNING: the tokenizer {tok.describe()} counts {mine} tokens for a prompt the server's "
                         f"/tokenize counts {server}: it is probably not the served model's tokenizer (the lengths "
                         "asked are its counts, not the server's)")

    @staticmethod
    async def _count(client: httpx.AsyncClient, url: str, form: str, text: str, timeout: float) -> int | None:
        """Tokens of ``text`` by the server's /tokenize in one of :data:`TOKENIZE_FORMS`; None when not answered."""
        body: dict = {"content": text} if form == "content" else {"prompt": text, "add_special_tokens": False}
        try:
            r = await client.post(url, json=body, timeout=timeout)
        except (httpx.HTTPError, OSError):
            return None
        if r.status_code != 200:
            return None
        try:
            toks = r.json().get("tokens")
        except (ValueError, AttributeError):
            return None
        return len(toks) if isinstance(toks, list) else None

    def state(self) -> dict:
        """The calibration, for a worker process to build the same prompts (:meth:`from_state`); a tokenizer
        travels as its path and SHA-256 (the worker loads the same file, or refuses to start)."""
        tok = self.tokenizer
        return {"method": self.method, "tokens_per_word": self.tokens_per_word, "prefix_tokens": self.prefix_tokens,
                "check": self.check, "note": self.note,
                "tokenizer": None if tok is None else {"path": tok.path, "sha256": tok.sha256}}

    @classmethod
    def from_state(cls, state: dict) -> PromptBuilder:
        """The builder of :meth:`state` (ConfigError when its tokenizer file is not the one the run counted with)."""
        t = state.get("tokenizer")
        tok = None
        if isinstance(t, dict):
            tok = load_tokenizer(str(t.get("path")))
            if tok.sha256 != t.get("sha256"):
                from tui.sources.load.errors import ConfigError

                raise ConfigError(f"--tokenizer {t.get('path')}: the file changed since the run started (sha256 "
                                  f"{tok.sha256[:12]}, was {str(t.get('sha256'))[:12]})")
        b = cls(tok)
        b.method = str(state.get("method", "estimate"))
        b.tokens_per_word = float(state.get("tokens_per_word", 1.0))
        b.prefix_tokens = float(state.get("prefix_tokens", 8.0))
        b.check = state.get("check")
        b.note = str(state.get("note", ""))
        return b

    def describe(self) -> dict:
        """The run header's ``load.prompt_builder``: how the lengths asked were made (``method``: ``tokenizer``,
        exact; ``tokenize``, sized by the server's /tokenize; ``estimate``, ~4 chars/token, labelled as one)."""
        d: dict = {"method": self.method}
        tok = self.tokenizer
        if tok is not None:
            n = tok.special_added
            added = (f"the model adds {n} special token{'s' if n != 1 else ''} ({', '.join(tok.block()['special_tokens'])}) "
                     "to every prompt" if n else "the model adds no special token")
            d.update(tokenizer=tok.block(), check=self.check, tokenize_body=self.tokenize_form,
                     note=f"lengths count the prompt text exactly, without special tokens: {added}; a chat template "
                          "adds its own tokens")
        elif self.method == "tokenize":
            d.update(tokens_per_word=round(self.tokens_per_word, 4), prefix_tokens=self.prefix_tokens,
                     check=self.check, tokenize_body=self.tokenize_form, note="lengths count the prompt text; the chat template adds its own tokens")
        else:
            d["chars_per_token"] = self.CHARS_PER_TOKEN
            d["note"] = ("ESTIMATED lengths: ~4 characters per token (no --tokenizer, and the server has no usable "
                         "/tokenize); the server's own counts are recorded per request")
        return d


def prompt_builder(tokenizer: str | None) -> PromptBuilder:
    """The run's builder: with ``--tokenizer PATH`` its tokenizer (loaded once; ConfigError when it cannot be)."""
    return PromptBuilder(load_tokenizer(tokenizer) if tokenizer is not None else None)


def prompt_prefix(rid: str) -> str:
    """The unique start of request ``rid``'s prompt."""
    return f"[{rid}] Repeat these words: "

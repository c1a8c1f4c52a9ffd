"""Prompts of a requested token length (:class:`PromptBuilder`), sized through the server's ``/tokenize``."""

from __future__ import annotations

import httpx

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

    With the server's ``/tokenize`` (POST {"content": text} -> {"tokens": [...]}, llama.cpp; or vLLM's
    {"prompt": text, "add_special_tokens": false}) the builder
    measures tokens per filler word and the cost of the unique prefix once, then checks one built
    prompt; without it, it estimates ~4 characters per token. The lengths are of the prompt text;
    a chat template adds its own tokens (about 20-25 for small chat models): the server's reported
    usage is recorded per request.
    """

    CHARS_PER_TOKEN = 4.0

    def __init__(self) -> None:
        self.method = "estimate"
        self.tokens_per_word = 1.0
        self.prefix_tokens = 8.0
        self.check: dict | None = None
        self.note = ""
        self.tokenize_form: str | None = None  # the /tokenize body the server answered (TOKENIZE_FORMS)
        self._filler = ""
        self._ends: list[int] = [0]  # char offset after k words
        self._grow(512)

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
        if self.method == "tokenize":
            return max(0, round((tokens - self.prefix_tokens) / self.tokens_per_word))
        avg = self._ends[-1] / max(1, len(self._ends) - 1)  # chars per word incl. the space
        return max(0, round((tokens * self.CHARS_PER_TOKEN - self.prefix_chars) / avg))

    prefix_chars = 24  # "[xxxxxxxx-000001] Repeat: " is about this long

    def build(self, prefix: str, tokens: int) -> str:
        k = self.words_for(tokens)
        self._grow(k)
        return prefix + self._filler[: self._ends[k]]

    async def calibrate(self, client: httpx.AsyncClient, root: str, sample_prefix: str, sizes: list[int],
                        timeout: float = 10.0) -> None:
        """Try the server's /tokenize; keep the estimate when it is missing or odd."""

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
        """The calibration, for a worker process to build the same prompts (:meth:`from_state`)."""
        return {"method": self.method, "tokens_per_word": self.tokens_per_word, "prefix_tokens": self.prefix_tokens,
                "check": self.check, "note": self.note}

    @classmethod
    def from_state(cls, state: dict) -> PromptBuilder:
        b = cls()
        b.method = str(state.get("method", "estimate"))
        b.tokens_per_word = float(state.get("tokens_per_word", 1.0))
        b.prefix_tokens = float(state.get("prefix_tokens", 8.0))
        b.check = state.get("check")
        b.note = str(state.get("note", ""))
        return b

    def describe(self) -> dict:
        d: dict = {"method": self.method}
        if self.method == "tokenize":
            d.update(tokens_per_word=round(self.tokens_per_word, 4), prefix_tokens=self.prefix_tokens,
                     check=self.check, tokenize_body=self.tokenize_form, note="lengths count the prompt text; the chat template adds its own tokens")
        else:
            d["chars_per_token"] = self.CHARS_PER_TOKEN
        return d


def prompt_prefix(rid: str) -> str:
    """The unique start of request ``rid``'s prompt."""
    return f"[{rid}] Repeat these words: "

"""``--tokenizer PATH``: the model's own tokenizer, read from a local file with the optional ``tokenizers`` library.

PATH is a Hugging Face ``tokenizer.json`` or a model folder holding one. Nothing is ever downloaded: a name that is
not a local file or folder is refused (bad usage), as is a file that is not a regular file or is larger than
``tui.core.bounds.MAX_TOKENIZER_BYTES``. The bytes read are the bytes hashed (SHA-256, recorded in the run header)
and the bytes parsed, so what the header names is what counted.

What it does for a load run (``tui.sources.load.prompts.PromptBuilder``):

- **prompts of the exact input length**: :meth:`LocalTokenizer.exact` cuts the text at the end of its N-th token and
  checks the cut text counts N tokens (trying the neighbouring cuts when a merge across the cut changes the count);
- **counts**: :meth:`LocalTokenizer.count` is the prompt text's tokens without the special tokens the model adds;
  :attr:`LocalTokenizer.special_added` is how many its post-processor adds (the BOS of Llama or Gemma: 1): the
  server's ``usage.prompt_tokens`` on ``/v1/completions`` is then the asked length plus that (on chat, plus the
  chat template's own tokens too);
- the answer text of each request is counted with it as well (``output_tokens_counted`` in the record).

Why ``tokenizers`` and not ``transformers``: the same Rust tokenizer, without the model library around it (the
sizes and import times are in docs/live-load.md).

The library is imported only when ``--tokenizer`` is given (``pip install 'servewatch[tokenizer]'``); a loaded
tokenizer is kept per file (path, size, modification time), so the command line's check and the run share one load.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any

from tui.core.bounds import MAX_TOKENIZER_BYTES
from tui.sources.load.errors import ConfigError

__all__ = ["TOKENIZER_FILE", "LocalTokenizer", "load_tokenizer", "resolve_tokenizer_path"]

TOKENIZER_FILE = "tokenizer.json"
INSTALL_HINT = "pip install 'servewatch[tokenizer]'"
#: neighbouring cuts tried on each side when the cut text does not count exactly N tokens
EXACT_TRIES = 8

_LOADED: dict[tuple[str, int, int], LocalTokenizer] = {}


def resolve_tokenizer_path(path: str) -> str:
    """The ``tokenizer.json`` that ``path`` names: the file itself, or ``path/tokenizer.json`` for a folder.
    ConfigError for anything else (a hub name, a missing path): nothing is downloaded."""
    p = os.path.expanduser(str(path))
    if os.path.isdir(p):
        f = os.path.join(p, TOKENIZER_FILE)
        if not os.path.exists(f):
            raise ConfigError(f"--tokenizer {path}: the folder holds no {TOKENIZER_FILE} (a local file or a model "
                              "folder holding one; nothing is downloaded)")
        return f
    if not os.path.exists(p):
        raise ConfigError(f"--tokenizer {path}: no such file or folder (a local {TOKENIZER_FILE} or a model folder "
                          "holding one; servewatch downloads nothing)")
    return p


def load_tokenizer(path: str) -> LocalTokenizer:
    """The tokenizer of ``path`` (see :func:`resolve_tokenizer_path`), loaded once per file content. ConfigError
    (bad usage) when it cannot be read, is not a tokenizer, or the library is missing."""
    from tui.sources.infiles import InputRefused, read_input

    f = resolve_tokenizer_path(path)
    try:
        st = os.stat(f)
    except OSError as exc:
        raise ConfigError(f"--tokenizer {path}: {exc.strerror or exc}") from None
    key = (os.path.realpath(f), st.st_size, st.st_mtime_ns)
    got = _LOADED.get(key)
    if got is not None:
        return got
    try:
        import tokenizers
        from tokenizers import Tokenizer  # the optional extra
    except ImportError:
        raise ConfigError(f"--tokenizer needs the optional tokenizers library: {INSTALL_HINT}") from None
    try:
        data = read_input(f, MAX_TOKENIZER_BYTES, "tokenizer file")
    except InputRefused as exc:
        raise ConfigError(f"--tokenizer {f}: {exc.strerror}") from None
    except OSError as exc:
        raise ConfigError(f"--tokenizer {f}: {exc.strerror or exc}") from None
    try:
        tk = Tokenizer.from_str(data.decode("utf-8"))
    except (UnicodeDecodeError, Exception) as exc:  # noqa: BLE001 (the library raises its own Exception type)
        raise ConfigError(f"--tokenizer {f}: not a tokenizer.json the tokenizers library reads "
                          f"({type(exc).__name__}: {str(exc)[:120]})") from None
    tok = LocalTokenizer(tk, path=f, sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                         library=f"tokenizers {getattr(tokenizers, '__version__', '?')}")
    if len(_LOADED) > 8:
        _LOADED.clear()
    _LOADED[key] = tok
    return tok


class LocalTokenizer:
    """One loaded tokenizer: counts, exact cuts, and the run header's block."""

    def __init__(self, tk: Any, *, path: str, sha256: str, size: int, library: str) -> None:
        self.tk = tk
        self.path = path
        self.sha256 = sha256
        self.size = size
        self.library = library
        self.special_added = len(tk.encode("", add_special_tokens=True).ids)
        self._special_names = [tk.id_to_token(i) for i in tk.encode("", add_special_tokens=True).ids]

    def count(self, text: str) -> int:
        """Tokens of ``text`` without the special tokens the model adds."""
        return len(self.tk.encode(text, add_special_tokens=False).ids)

    def exact(self, text_of: Callable[[int], str], words: int, n: int) -> tuple[str, int]:
        """A text of exactly ``n`` tokens, cut from ``text_of(k)`` (a text that grows with ``k``, e.g. a prefix and
        k filler words; ``words`` the first k tried): (text, its count). The count differs from ``n`` only when no
        cut of the text counts exactly ``n`` (never seen with the filler of servewatch's prompts); the caller
        records the count beside the length asked."""
        if n <= 0:
            return "", 0
        k = max(1, words)
        for _ in range(64):  # the text grows until it holds n tokens (x1.5 a round: a few rounds at most)
            text = text_of(k)
            enc = self.tk.encode(text, add_special_tokens=False)
            if len(enc.ids) >= n:
                break
            k = max(k + 1, int(k * 1.5) + 8)
        else:  # pragma: no cover - a text_of that stops growing
            return text, len(enc.ids)
        offs = enc.offsets
        best: tuple[int, str, int] | None = None
        for d in range(EXACT_TRIES + 1):
            for j in ((n - 1 + d, n - 1 - d) if d else (n - 1,)):
                if not 0 <= j < len(offs):
                    continue
                cut = text[: offs[j][1]]
                c = self.count(cut)
                if c == n:
                    return cut, c
                if best is None or abs(c - n) < best[0]:
                    best = (abs(c - n), cut, c)
        assert best is not None
        return best[1], best[2]

    def block(self) -> dict:
        """The run header's ``load.prompt_builder.tokenizer``: which file counted (name and SHA-256), its size, the
        library, and the special tokens the model adds to every prompt."""
        parent = os.path.basename(os.path.dirname(os.path.abspath(self.path)))
        return {"file": os.path.basename(self.path), "folder": parent or None, "sha256": self.sha256,
                "bytes": self.size, "library": self.library, "special_tokens_added": self.special_added,
                "special_tokens": self._special_names}

    def describe(self) -> str:
        """"tokenizer.json (sha256 1a2b3c4d5e6f)": the file that counted, in a line."""
        return f"{os.path.basename(self.path)} (sha256 {self.sha256[:12]})"

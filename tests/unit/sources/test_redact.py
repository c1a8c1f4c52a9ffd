"""The one secret scrubber (tui/core/redact.py): property tests (a secret never survives; ordinary text
is unchanged) and the shapes it must catch or leave alone."""

from __future__ import annotations

import base64
import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tui.core import redact as R
from tui.core.redact import REDACTED, Scrubber, scrub

TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~+/=-"
secrets_st = st.text(alphabet=TOKEN_CHARS, min_size=R.MIN_SECRET_LEN, max_size=40)
texts = st.text(max_size=300)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _survives(secret: str, out: str) -> bool:
    """The secret appears in ``out`` other than inside our own placeholder."""
    return secret in out.replace(REDACTED, "\x00")


def _embed(pieces: list[str], secrets: list[str], where: list[int]) -> str:
    parts = list(pieces)
    for s, i in zip(secrets, where):
        parts.insert(i % (len(parts) + 1), s)
    return "".join(parts)


@FAST
@given(pieces=st.lists(texts, max_size=5), secrets=st.lists(secrets_st, min_size=1, max_size=4),
       where=st.lists(st.integers(0, 10), min_size=4, max_size=4))
def test_a_known_secret_never_survives(pieces, secrets, where):
    text = _embed(pieces, secrets, where)
    sc = Scrubber(secrets)
    outs = [sc.text(text), sc(text, limit=10**6)] + _strings(scrub({"k": [text, {text: 1}]}, secrets))
    for out in outs:
        for s in secrets:
            assert not _survives(s, out), (s, text, out)


def _strings(obj) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [x for k, v in obj.items() for x in _strings(k) + _strings(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _strings(v)]
    return []


@FAST
@given(before=texts, after=texts, token=st.text(alphabet=TOKEN_CHARS, min_size=4, max_size=60),
       word=st.sampled_from(["Bearer", "bearer", "BEARER"]), gap=st.sampled_from([" ", "  ", "\t", "\n "]))
def test_an_unknown_bearer_token_never_survives(before, after, token, word, gap):
    assume(not before or not before[-1].isascii() or not before[-1].isalpha())  # "xBearer" is another word
    assume(not after or after[0] not in TOKEN_CHARS)  # the token ends where the text says it ends
    text = f"{before}{word}{gap}{token}{after}"
    for out in (Scrubber().text(text), Scrubber()(text, limit=10**6)):
        assert f"{word} {REDACTED}" in out.replace(gap, " ") or f"{word}{gap}{REDACTED}" in out
        assert not re.search(re.escape(word) + r"\s+" + re.escape(token) + r"(?![A-Za-z0-9._~+/=-])", out)


_ORDINARY = re.compile(r"(?i)bearer|basic|\b(?:sk|pk|rk|hf|ghp|gho|xox[abp])[-_]")


@FAST
@given(text=texts, secrets=st.lists(secrets_st, max_size=3))
def test_ordinary_text_is_unchanged(text, secrets):
    assume(not _ORDINARY.search(text))
    assume(not any(s in text for s in secrets))
    sc = Scrubber(secrets)
    assert sc.text(text) == text
    assert scrub({"a": [text, 1, None], text: True}, secrets) == {"a": [text, 1, None], text: True}
    # the one-line detail only collapses whitespace
    assert sc(text, limit=10**6) == " ".join(text.split())


def test_shapes_caught_and_left_alone():
    sc = Scrubber(["Bearer sk-live-abcdef123456", "x-team-secret-1"])
    assert "abcdef123456" not in sc("error: key sk-live-abcdef123456 rejected")
    assert sc.text("h: x-team-secret-1") == f"h: {REDACTED}"
    tok = base64.b64encode(b"alice:s3cret!").decode()
    assert Scrubber().text(f"Authorization: Basic {tok}") == f"Authorization: Basic {REDACTED}"
    assert Scrubber().text("authorization: bearer abcd1234efgh") == f"authorization: bearer {REDACTED}"
    assert Scrubber().text("leaked sk-proj-AbC123xyz789 here") == f"leaked {REDACTED} here"
    for ordinary in ("basic arithmetic", "Basic Arithmetic and basic reasoning", "the bearer of bad news",
                     "hf_transfer_enabled", "sk-learn", "Bearer", "basic\n  line two"):
        assert Scrubber().text(ordinary) == ordinary, ordinary
    # secrets shorter than MIN_SECRET_LEN are not used (they would redact ordinary letters everywhere)
    assert Scrubber(["ab"]).text("abc") == "abc"
    long = "x" * 500
    assert len(Scrubber()(long)) == R.DETAIL_LIMIT and Scrubber()(long).endswith("...")


def test_every_writer_uses_the_one_scrubber():
    import tui.core.acceptance.document as acceptance  # the module that builds (and scrubs) the document
    from tui.sources import quality_runner
    from tui.sources.load import executor, generator

    assert acceptance.scrub is scrub
    assert generator.Scrubber is Scrubber and quality_runner.Scrubber is Scrubber
    for mod in (acceptance, generator, executor, quality_runner):
        src = open(mod.__file__, encoding="utf-8").read()
        assert "re.compile(r\"(?i)\\b(bearer" not in src and "_BEARER" not in src and "class _Scrubber" not in src

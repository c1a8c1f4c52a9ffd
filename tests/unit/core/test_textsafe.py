"""tui.core.textsafe: outside strings stay data in every sink."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from tui.core.textsafe import console, md, script_json, term

HOSTILE = ["\x1b[2J\x1b]0;owned\x07", "\x1b]8;;http://evil/\x1b\\click\x1b]8;;\x1b\\", "ok\r\nFAKE: PASS",
           "gpu[", "[bold red]x[/]", "\u202egnp.exe", "<img src=x onerror=alert(1)>", "a|b`c`*d*",
           "<!--", "</script>", "\u2028\u2029", "\x9b31m"]


def _has_control(s: str) -> bool:
    return any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029\u202e" for c in s)


@given(st.text())
def test_term_never_lets_a_control_or_format_character_through(s):
    assert not _has_control(term(s))


def test_term_keeps_plain_text_and_shows_escapes_visibly():
    assert term("gemma-3-270m 1.5 ms") == "gemma-3-270m 1.5 ms"
    assert term("\x1b[2J") == "\\x1b[2J"
    assert term("a\nb", keep_newlines=True) == "a\nb"
    assert term("a\nb") == "a\\x0ab"
    assert term(None) == "None"


def test_console_escapes_markup():
    from rich.text import Text

    for s in HOSTILE + ["\\[b]x", "x\\"]:
        out = console(s)
        assert not _has_control(out)
        assert Text.from_markup(out).plain == term(s)  # renders exactly as written, no tag read


def test_md_is_inert():
    for s in HOSTILE:
        out = md(s)
        assert "<" not in out and ">" not in out and not _has_control(out)
        assert "|" not in out.replace("\\|", "")


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(), c, max_size=3), max_leaves=8))
def test_script_json_is_valid_json_and_never_closes_the_script(obj):
    text = script_json(obj)
    assert json.loads(text) == obj
    assert "<" not in text and ">" not in text and "&" not in text
    assert "\u2028" not in text and "\u2029" not in text

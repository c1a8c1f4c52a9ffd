"""tui.core.textsafe: outside strings stay data in every sink."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from tui.core.textsafe import console, md, md_code, script_json, term

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


def _console_plain(s: str) -> str:
    """What the console shows for ``s``: term(s), a trailing backslash as \\x5c (it would escape the next tag)."""
    t = term(s)
    return t[:-1] + "\\x5c" if t.endswith("\\") else t


def test_console_escapes_markup():
    from textual.content import Content

    for s in HOSTILE + ["\\[b]x", "x\\", "a\\\\", "[$sw-na]x", "[@click=app.quit]x[/]", "\\"]:
        out = console(s)
        assert not _has_control(out)
        # inside the console's own tags (Textual's content markup, what Static/notify read): renders as written
        assert Content.from_markup(f"[b]{out}[/b][$sw-na]tail[/]").plain == _console_plain(s) + "tail", s


@given(st.text())
def test_console_never_breaks_the_console_markup_around_it(s):
    from textual.content import Content

    assert Content.from_markup(f"[b]{console(s)}[/b] [$sw-na]{console(s)}[/]").plain == \
        f"{_console_plain(s)} {_console_plain(s)}"


def _render_md(text: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(text)


@given(st.text())
def test_md_renders_as_plain_text_in_a_paragraph_a_list_and_a_table_cell(s):
    """Through a markdown renderer (raw HTML on, GFM tables): no tag but the structure's own, and the text intact."""
    import html as _html

    v = md(s)
    assert "\n" not in v
    for doc, tags in ((f"text {v} end", {"p"}), (f"- item {v}", {"ul", "li"}),
                      (f"| a | b |\n|---|---|\n| {v} | x |", {"table", "thead", "tbody", "tr", "th", "td"})):
        out = _render_md(doc)
        found = set(re.findall(r"<([a-z0-9]+)", out))
        assert found <= tags, (s, out)
        if "table" in tags:
            assert out.count("<td>") == 2, (s, out)
        inner = re.sub(r"<[^>]+>", "", out)
        assert term(s).strip() in _html.unescape(inner) or not term(s).strip(), (s, out)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(), c, max_size=3), max_leaves=8))
def test_script_json_is_valid_json_and_never_closes_the_script(obj):
    text = script_json(obj)
    assert json.loads(text) == obj
    assert "<" not in text and ">" not in text and "&" not in text
    assert "\u2028" not in text and "\u2029" not in text


def test_md_code_keeps_a_plain_file_name_in_a_code_span_and_escapes_the_rest():
    assert md_code("sample_logs/seed.jsonl") == "`sample_logs/seed.jsonl`"
    for s in HOSTILE + ["a`b", "x|y", "c:\\runs\\", "   "]:
        out = md_code(s)
        assert not _has_control(out) and "<" not in out
        assert set(re.findall(r"<([a-z0-9]+)", _render_md(f"| {out} | x |\n|---|---|\n| {out} | y |"))) <= {
            "table", "thead", "tbody", "tr", "th", "td", "code"}

"""tui.html.markdown: acceptance.md's notation as HTML, where no string of the document becomes markup."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from tui.core.textsafe import md
from tui.html.markdown import md_to_html


def test_the_subset_servewatch_writes():
    text = ("# Title\n\nA paragraph **bold** and `code`.\n\n- one\n- two *(not measured)*\n\n"
            "| level | TTFT P99 |\n|---|---|\n| 32 | 18383* |\n| a \\| b | 1 / 2 |\n\n> **SYNTHETIC: x**\n")
    out = md_to_html(text)
    assert "<h1>Title</h1>" in out and "<strong>bold</strong>" in out and "<code>code</code>" in out
    assert "<li>two <em>(not measured)</em></li>" in out
    assert "<th>level</th>" in out and '<td class="num">18383*</td>' in out and "<td>a | b</td>" in out
    assert '<p class="banner"><strong>SYNTHETIC: x</strong></p>' in out


HOSTILE = st.text(alphabet=st.sampled_from(list("<>&\"'`*_|[]()!#-\\/ \n\x1bab")), max_size=40)


@given(HOSTILE)
def test_no_string_of_the_document_becomes_markup(s):
    """Whether or not a writer escaped it for markdown (textsafe.md), a string never becomes a tag or an attribute."""
    for text in (f"a {s} b", f"| h |\n|---|\n| {s} |", f"- {s}", f"## {s}", f"> {md(s)}", f"x {md(s)}"):
        out = md_to_html(text)
        tags = re.findall(r"<(/?[a-zA-Z0-9]+)", out)
        assert set(tags) <= {"h1", "h2", "h3", "h4", "p", "ul", "li", "strong", "em", "code", "div", "table", "thead",
                             "tbody", "tr", "th", "td", "span", "/h1", "/h2", "/h3", "/h4", "/p", "/ul", "/li",
                             "/strong", "/em", "/code", "/div", "/table", "/thead", "/tbody", "/tr", "/th", "/td",
                             "/span"}, out
        for attrs in re.findall(r"<[a-z0-9]+((?:\s[^>]*)?)>", out):  # only this module's own attributes
            assert re.fullmatch(r'( class="(num|w|banner|plain|table-wrap)"| id="sec-[a-z0-9-]*")?', attrs), (attrs, out)


def test_acceptance_page_sections_are_acceptance_md_sections(tmp_path):
    """Every key of the acceptance document is one acceptance.md renders (KNOWN_KEYS), so the page's h2 headings
    are the markdown's: a key added to the document without a place in the markdown shows here, not only in the
    browser tests (the CI failure of 'Verdict settings' / 'Identity')."""
    import json
    from pathlib import Path

    from tui.cli import main
    from tui.html.pages import KNOWN_KEYS

    for name in ("default.jsonl", "seed.jsonl"):
        out = tmp_path / name
        assert main(["accept", "--records", str(Path(__file__).resolve().parents[3] / "sample_logs" / name), "--out", str(out)]) in (1, 3)
        doc = json.loads((out / "acceptance.json").read_text("utf-8"))
        assert set(doc) <= KNOWN_KEYS, set(doc) - KNOWN_KEYS
        md_h2 = [ln[3:].strip() for ln in (out / "acceptance.md").read_text("utf-8").splitlines() if ln.startswith("## ")]
        page_h2 = re.findall(r"<h2[^>]*>([^<]*)</h2>", (out / "acceptance.html").read_text("utf-8"))
        assert [re.sub(r"&[a-z#0-9]+;", "", h) for h in page_h2] == [re.sub(r"[&<>\"']", "", h) for h in md_h2]

"""The acceptance report's markdown, as HTML: the page shows the same sections, in the same order and the same words
as acceptance.md (one renderer of the document, ``tui.core.acceptance.render``; this module only changes the
notation).

The subset servewatch's renderer writes, and nothing more: ``#``/``##``/``###`` headings, paragraphs, ``- `` lists,
``> `` quotes (the banners), tables (a header row, a ``|---|`` row, body rows; ``\\|`` inside a cell), ``**bold**``
``*emphasis*`` and ``code`` spans, backslash escapes (a ``*`` after a value, the too-few-samples mark, stays a
``*``). Every literal piece of text is HTML-escaped on output (after undoing the
markdown escapes and any entity the markdown sink wrote), so nothing in the document, whatever a file or a server
put into it, becomes a tag or an attribute here; the only tags are this module's.
"""

from __future__ import annotations

import html
import re

__all__ = ["md_to_html"]

_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|~>])")
_INLINE = re.compile(r"(\*\*(?:\\.|[^*\\])+?\*\*|`[^`]*`|(?<![^\s(])\*(?=\S)(?:\\.|[^*\\])+?(?<=\S)\*(?![^\s.,;:)]))")


def _text(s: str) -> str:
    """One literal piece: markdown escapes undone, entities decoded, then HTML-escaped (the one way out)."""
    return html.escape(html.unescape(_ESCAPED.sub(r"\1", s)), quote=True)


_JOINED = re.compile(r"\S*[-/]\S*")


def _keep_whole(escaped: str) -> str:
    """Words with a hyphen or a slash (paths, "30-day") kept on one line: a browser may break after those."""
    return _JOINED.sub(lambda m: f'<span class="w">{m.group(0)}</span>', escaped)


def _cell(s: str) -> str:
    """A table cell: the inline markup, with no word broken across lines."""
    return _inline(s, whole=True)


def _inline(s: str, whole: bool = False) -> str:
    wrap = _keep_whole if whole else (lambda x: x)
    out = []
    pos = 0
    for m in _INLINE.finditer(s):
        out.append(wrap(_text(s[pos:m.start()])))
        tok = m.group(0)
        if tok.startswith("**"):
            out.append(f"<strong>{wrap(_text(tok[2:-2]))}</strong>")
        elif tok.startswith("*"):
            out.append(f"<em>{wrap(_text(tok[1:-1]))}</em>")
        else:
            out.append(f"<code>{html.escape(tok[1:-1], quote=True)}</code>")
        pos = m.end()
    out.append(wrap(_text(s[pos:])))
    return "".join(out)


def _cells(row: str) -> list[str]:
    """The cells of a table row, split on ``|`` but not on ``\\|``."""
    body = row.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    cells, cur, i = [], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            cur.append(body[i:i + 2])
            i += 2
            continue
        if ch == "|":
            cells.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    cells.append("".join(cur).strip())
    return cells


def _is_rule(line: str) -> bool:
    return bool(re.fullmatch(r"\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?", line.strip()))


def _numeric(cell: str) -> bool:
    return bool(re.fullmatch(r"[-+]?[\d,.]+\s*(%|ms|s|GiB|req/s|\*)?", cell))


def _table(rows: list[str]) -> str:
    head = _cells(rows[0])
    out = ['<div class="table-wrap"><table><thead><tr>']
    out += [f"<th>{_cell(c)}</th>" for c in head]
    out.append("</tr></thead><tbody>")
    for r in rows[2:]:
        out.append("<tr>" + "".join(("<td class=\"num\">" if _numeric(c) else "<td>") + f"{_cell(c)}</td>"
                                    for c in _cells(r)) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def md_to_html(text: str, *, heading_ids: bool = True) -> str:
    """The markdown ``text`` (servewatch's subset) as an HTML fragment."""
    lines = text.splitlines()
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []

    def flush() -> None:
        if para:
            out.append(f"<p>{_inline(' '.join(para))}</p>")
            para.clear()
        if items:
            out.append('<ul class="plain">' + "".join(f"<li>{_inline(x)}</li>" for x in items) + "</ul>")
            items.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        s = line.strip()
        if not s:
            flush()
        elif s.startswith("#"):
            flush()
            level = len(s) - len(s.lstrip("#"))
            title = s[level:].strip()
            level = min(max(level, 1), 4)
            anchor = ""
            if heading_ids and level == 2:
                slug = re.sub(r"[^a-z0-9]+", "-", html.unescape(_ESCAPED.sub(r"\1", title)).lower()).strip("-")
                anchor = f' id="sec-{slug[:48]}"'
            out.append(f"<h{level}{anchor}>{_inline(title)}</h{level}>")
        elif s.startswith(">"):
            flush()
            quote = s.lstrip(">").strip()
            out.append(f'<p class="banner">{_inline(quote)}</p>')
        elif s.startswith("|") and i + 1 < len(lines) and _is_rule(lines[i + 1]):
            flush()
            rows = [s]
            i += 1
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(lines[i].strip())
                i += 1
            out.append(_table(rows))
            continue
        elif s.startswith("- "):
            if para:
                flush()
            items.append(s[2:])
        elif items and line.startswith("  "):  # a list item's continuation
            items[-1] += " " + s
        else:
            if items:
                flush()
            para.append(s)
        i += 1
    flush()
    return "\n".join(out)

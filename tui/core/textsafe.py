"""Every string from outside is data: the one place that makes it safe to show (standard library only).

A model id, a ``/props`` build string, an error body, a GPU name or any string field of a record file reaches the
terminal, the console, markdown and HTML. Each sink has one function here, and every writer uses it:

- ``term(s)``: plain terminal text (``report``, ``run``, ``accept`` ... printing to stdout/stderr). Control characters
  (C0, DEL, C1: ESC, CR, LF, BEL, CSI ...), Unicode format characters (bidi overrides, zero-width) and the line and
  paragraph separators are shown visibly as ``\\x1b``, ``\\u202e`` ..., so no escape sequence reaches the terminal and
  no line can be forged (a CR/LF inside a field stays on its line). ``keep_newlines=True`` keeps ``\\n`` for
  multi-line text that servewatch itself assembled around outside values (each value already passed ``term``).
- ``console(s)``: the Textual console (Rich markup): ``term`` plus ``[`` escaped as ``\\[`` so no markup tag is
  read from the string (a GPU name ending in ``[`` renders as written).
- ``md(s)``: markdown (``acceptance.md``, ``compare`` markdown): ``term`` plus HTML escaping (``<`` ``>`` ``&`` ``"``)
  and the characters markdown acts on (``|`` in tables, backticks, ``*``, ``_``, ``[``, ``]``, ``!``, ``#`` ...)
  backslash-escaped, so no tag, link, image or table cell comes from the string.
- ``script_json(obj)``: JSON embedded in an HTML ``<script>`` element: ``json.dumps`` plus ``\\u`` escapes for ``<``,
  ``>``, ``&``, U+2028 and U+2029 (still valid JSON, never a closing tag or an HTML comment).
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

__all__ = ["console", "md", "script_json", "term"]

_MD_SPECIAL = set("\\`*_{}[]()#+-!|~>")


def _visible(ch: str) -> str:
    o = ord(ch)
    if o < 0x100:
        return f"\\x{o:02x}"
    return f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def _unsafe(ch: str) -> bool:
    o = ord(ch)
    if o < 0x20 or 0x7F <= o < 0xA0:
        return True
    if o < 0x7F:
        return False
    return unicodedata.category(ch) in ("Cf", "Zl", "Zp", "Cs", "Co", "Cn") and ch != "\u00ad"


def term(s: Any, *, keep_newlines: bool = False) -> str:
    """``s`` (anything: ``str()`` of it) with every control and format character shown visibly."""
    if not isinstance(s, str):
        s = str(s)
    if s.isascii() and s.isprintable():  # the common case: nothing to do
        return s
    out = []
    for ch in s:
        if ch == "\n" and keep_newlines:
            out.append(ch)
        elif _unsafe(ch):
            out.append(_visible(ch))
        else:
            out.append(ch)
    return "".join(out)


def console(s: Any) -> str:
    """``term(s)`` with Rich markup escaped: safe inside a Textual markup string."""
    return term(s).replace("\\[", "\\\\[").replace("[", "\\[")


def md(s: Any) -> str:
    """``term(s)`` made inert in markdown: HTML escaped and markdown's active characters backslash-escaped."""
    t = term(s)
    out = []
    for ch in t:
        if ch == "&":
            out.append("&amp;")
        elif ch == "<":
            out.append("&lt;")
        elif ch == ">":
            out.append("&gt;")
        elif ch == '"':
            out.append("&quot;")
        elif ch in _MD_SPECIAL:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def script_json(obj: Any, **kw: Any) -> str:
    """JSON text safe inside an HTML ``<script>`` element (and still valid JSON)."""
    text = json.dumps(obj, **kw)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))

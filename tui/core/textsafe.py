"""Every string from outside is data: the one place that makes it safe to show (standard library only).

A model id, a ``/props`` build string, an error body, a GPU name or any string field of a record file reaches the
terminal, the console, markdown and HTML. Each sink has one function here, and every writer uses it:

- ``term(s)``: plain terminal text (``report``, ``run``, ``accept`` ... printing to stdout/stderr). Control characters
  (C0, DEL, C1: ESC, CR, LF, BEL, CSI ...), Unicode format characters (bidi overrides, zero-width) and the line and
  paragraph separators are shown visibly as ``\\x1b``, ``\\u202e`` ..., so no escape sequence reaches the terminal and
  no line can be forged (a CR/LF inside a field stays on its line). ``keep_newlines=True`` keeps ``\\n`` for
  multi-line text that servewatch itself assembled around outside values (each value already passed ``term``).
- ``console(s)``: the Textual console (its content markup): ``term`` plus ``[`` escaped as ``\\[`` so no markup tag
  is read from the string (a GPU name ending in ``[`` renders as written), and a trailing backslash shown as
  ``\\x5c`` (Textual reads a ``\\`` right before the next ``[`` as an escape: a value ending in one would escape the
  console's own next tag, and its closing ``[/]`` would then have nothing to close: a MarkupError, a crash).
- ``md_code(s)``: a markdown code span (a file name in backticks) when the string holds nothing that could end it
  or act in it; else ``md(s)`` without the backticks.
- ``md(s)``: markdown (``acceptance.md``, ``compare`` markdown): ``term`` plus HTML escaping (``<`` ``>`` ``&``) and
  the characters markdown acts on backslash-escaped: ``\\``, backticks, ``*``, ``~``, ``[``, ``]``, ``|`` (a table
  cell), ``_`` (except inside a word, where GFM reads it as a letter), and the first character of a value that would
  open a block if it began a line (``# h``, ``- x``, ``1. x``, ``===``, ``---``); so no tag, link, image, emphasis or
  table cell comes from the string, and a model id such as ``gemma-3-270m-it-Q4_K_M`` or ``550.54`` stays readable.
- ``script_json(obj)``: JSON embedded in an HTML ``<script>`` element: ``json.dumps`` plus ``\\u`` escapes for ``<``,
  ``>``, ``&``, U+2028 and U+2029 (still valid JSON, never a closing tag or an HTML comment).
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

__all__ = ["console", "md", "md_code", "script_json", "term"]

_MD_ALWAYS = frozenset("\\`*~[]|")
#: a value that would start a block (heading, list item, rule, setext underline) if it began a line
_MD_BLOCK_START = re.compile(r"(?:[-+*]|#{1,6})(?:\s|$)|=+\s*$|-{3,}[\s-]*$")
_MD_LIST_NUMBER = re.compile(r"\d{1,9}[.)](?=\s|$)")
_ASCII_CONTROL = re.compile("[\x00-\x1f\x7f]")
_ASCII_CONTROL_BUT_LF = re.compile("[\x00-\x09\x0b-\x1f\x7f]")


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
    if s.isascii():  # the common case: only C0 and DEL can be unsafe
        if s.isprintable():
            return s
        pat = _ASCII_CONTROL_BUT_LF if keep_newlines else _ASCII_CONTROL
        return pat.sub(lambda m: _visible(m.group(0)), s)
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
    """``term(s)`` with markup escaped: safe inside a Textual markup string (``Static``, ``notify``, ``Content``)."""
    t = term(s).replace("[", "\\[")
    return t[:-1] + "\\x5c" if t.endswith("\\") else t


def md(s: Any) -> str:
    """``term(s)`` made inert in markdown: HTML escaped and markdown's active characters backslash-escaped."""
    t = term(s)
    n = len(t)
    lead = _MD_LIST_NUMBER.match(t)
    block = _MD_BLOCK_START.match(t) is not None
    out = []
    for i, ch in enumerate(t):
        if ch == "&":
            out.append("&amp;")
        elif ch == "<":
            out.append("&lt;")
        elif ch == ">":
            out.append("&gt;")
        elif ch in _MD_ALWAYS:
            out.append("\\" + ch)
        elif ch == "_":
            inside_word = 0 < i < n - 1 and t[i - 1].isalnum() and t[i + 1].isalnum()
            out.append("_" if inside_word else "\\_")
        elif (i == 0 and block) or (lead is not None and i == lead.end() - 1):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def md_code(s: Any) -> str:
    """```s``` as a markdown code span (inside one, HTML and markdown are not read) when ``term(s)`` holds no
    backtick, pipe, backslash, ``<``, ``>`` or ``&`` (which could end the span, split a table cell, or be read by a
    renderer that does not honour the span); else ``md(s)``, the same text escaped, without the backticks."""
    t = term(s)
    if any(ch in t for ch in "`|\\<>&") or not t.strip():
        return md(t)
    return f"`{t}`"


def script_json(obj: Any, **kw: Any) -> str:
    """JSON text safe inside an HTML ``<script>`` element (and still valid JSON)."""
    text = json.dumps(obj, **kw)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))

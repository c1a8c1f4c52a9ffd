"""The limits on what servewatch reads: one home for each, so that no input (a record file, another tool's export,
a config, a dataset, a trace, a server log) can make a command hang, exhaust memory or crash on its shape
(README.md "Limits on input"; docs/record-format.md "Limits"). Standard library only.

- ``MAX_LINE_BYTES`` (1 MiB): a line of a line-based input longer than this is a malformed line: skipped, counted
  and reported with its file and line, read past without being held in memory.
- ``MAX_JSON_DEPTH`` (64): a JSON value nested deeper than this is refused where it would be kept (a run header,
  a step, a budget record, a config); the decoder itself stops at the interpreter's recursion limit (a
  ``RecursionError``, caught wherever JSON is decoded).
- ``MAX_LEVELS`` (1,000): the distinct (level, round) steps one run is judged on; the records of further levels are
  counted and reported, never judged, and the run cannot PASS. Likewise bounded: the error classes counted by name
  (``MAX_ERROR_CLASSES``, the rest as one "other" class) and the GPU devices kept (``MAX_GPU_DEVICES``).
- ``MAX_DOCUMENT_BYTES`` (256 MiB): a whole-document import (GuideLLM JSON, vllm bench, LLMPerf, inference-perf);
  ``MAX_YAML_BYTES`` (32 MiB) for GuideLLM YAML, whose parser needs far more memory per byte.
- ``MAX_SMALL_FILE_BYTES`` (16 MiB): a budget JSON, a model config.json, a rollback file, a theme, a quality set, a
  tool's summary file beside an import; ``MAX_QUALITY_FILE_BYTES`` (64 MiB): a quality result.
- ``MAX_DATASET_BYTES`` (1 GiB): a ``--dataset`` file (its rows are held in memory for the run); one row (a JSON
  Lines line, a ShareGPT list item) is at most ``MAX_LINE_BYTES``.

``json_too_deep`` checks a decoded value without recursion.
"""

from __future__ import annotations

from typing import Any

MAX_LINE_BYTES = 1 << 20
MAX_JSON_DEPTH = 64
MAX_LEVELS = 1000
#: distinct error classes counted by name (a record's ``error`` is any string): the rest under ``OTHER_ERRORS``
MAX_ERROR_CLASSES = 100
OTHER_ERRORS = "other (error classes beyond the first 100)"
#: GPU devices shown (a sample's ``device`` is any number): samples of further devices are not kept
MAX_GPU_DEVICES = 64
MAX_DOCUMENT_BYTES = 256 << 20
MAX_YAML_BYTES = 32 << 20
MAX_SMALL_FILE_BYTES = 16 << 20
MAX_QUALITY_FILE_BYTES = 64 << 20
MAX_DATASET_BYTES = 1 << 30


def size_text(n: int) -> str:
    """``1 MiB``, ``256 MiB``, ``2 GiB``: a limit in words."""
    if n >= 1 << 30 and n % (1 << 30) == 0:
        return f"{n >> 30} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):g} MiB"
    return f"{n / 1024:g} KiB"


def json_too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when ``value`` (decoded JSON: dicts, lists, scalars) nests containers deeper than ``limit`` (a scalar or
    an empty container at the top is depth 0, ``{"a": 1}`` depth 1). Iterative: no recursion, whatever the depth;
    stops at the first container below the limit."""
    if type(value) is not dict and type(value) is not list:
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        v, d = pop()
        if d > limit:
            return True
        for x in (v.values() if type(v) is dict else v):
            if type(x) is dict or type(x) is list:
                if x:
                    push((x, d + 1))
                elif d + 1 > limit:
                    return True
    return False

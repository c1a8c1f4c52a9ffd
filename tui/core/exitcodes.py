"""The one set of exit codes every `servewatch` command uses (standard library only).

    0 PASS         the verdict (or the command) succeeded: PASS, ready, budget printed
    1 FAIL         the verdict is FAIL (measured load, quality or acceptance failed)
    2 USAGE        bad usage or unreadable input: one line on stderr, never a traceback
    3 INSUFFICIENT no decision yet: INSUFFICIENT_WINDOW, UNDECIDED, NO_EVIDENCE, no baseline
   70 INTERNAL     an internal error (a bug in servewatch, not the input, not a verdict): one line naming the
                   failing place and where the traceback was written (``--debug`` prints it); 70 is EX_SOFTWARE of
                   sysexits.h, outside the verdict codes 0-3 and the 128+signal range
  130 INTERRUPTED  Ctrl-C (SIGINT), quietly; a load command (`run`, `sweep`) stops sending, seals its record,
                   prints the partial verdict and then exits 130
  143 TERMINATED   SIGTERM (128 + 15): a load command stops as after Ctrl-C, then exits 143
  141 BROKEN_PIPE  standard output was closed by its reader (``servewatch report x --json | head -1``), quietly:
                   128 + SIGPIPE, what a shell reports for a command killed by a closed pipe
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    PASS = 0
    FAIL = 1
    USAGE = 2
    INSUFFICIENT = 3
    INTERNAL = 70
    INTERRUPTED = 130
    BROKEN_PIPE = 141
    TERMINATED = 143


class UsageError(Exception):
    """Bad usage or unreadable input.  The command line prints ``servewatch: <message>`` (one line) and exits 2."""

    def __init__(self, message: object) -> None:
        super().__init__(" ".join(str(message).split()) or "bad usage")


SYNTHETIC_NEVER_0 = "SYNTHETIC: the input is labelled synthetic; synthetic data never exits 0 (exit 3 at best)"


def synthetic_exit(code: int, synthetic: bool) -> tuple[int, str | None]:
    """The one rule every command applies last: SYNTHETIC data never exits 0. A 0 (PASS, ready, NOT WORSE,
    converted) on synthetic input becomes 3 with the reason; every other code stands (a FAIL is still 1)."""
    if synthetic and code == ExitCode.PASS:
        return int(ExitCode.INSUFFICIENT), SYNTHETIC_NEVER_0
    return int(code), None


EXIT_CODES_DOC = ("exit codes: 0 PASS, 1 FAIL, 3 INSUFFICIENT_WINDOW or UNDECIDED (also: re-judged at weaker settings "
                  "than the run's), 2 bad usage or unreadable input, "
                  "70 internal error (a bug; the traceback's log file is named)")


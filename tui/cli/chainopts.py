"""The digest chain's flags (docs/record-format.md, "Digest chain"): ``--sign-key-env`` on the writers (`run`,
`live`, `sweep`, `watch --record`), ``--verify-key-env`` on the readers (`report`, `replay`, `accept`, `compare`,
`plan`).

A key is read from the environment variable named, only here; it is never printed, logged or recorded (a missing
or empty variable is bad usage: one line, exit 2, which names the variable, never a value)."""

from __future__ import annotations

import os
from typing import Any

from tui.cli.declare import flag
from tui.cli.options import UsageError


def sign_key_flag() -> Any:
    """``--sign-key-env VAR`` (a settings field)."""
    return flag("--sign-key-env", metavar="VAR", default=None, into="sign_key_env",
                help="sign the record file: every checkpoint of its digest chain also an HMAC-SHA256 with the key in "
                     "environment variable VAR (the key is never recorded; the header names only a key id) (default: "
                     "unsigned; the chain is written either way)")


def verify_key_flag() -> Any:
    """``--verify-key-env VAR`` (a settings field)."""
    return flag("--verify-key-env", metavar="VAR", default=None,
                help="also verify the record file's signature with the key in environment variable VAR: a file not "
                     "signed with that key cannot PASS (default: integrity checked, signature not)")


def key_from_env(var: str | None, flag: str) -> bytes | None:
    """The key in environment variable ``var`` (None when no flag was given); UsageError when unset or empty."""
    if not var:
        return None
    value = os.environ.get(var)
    if not value:
        raise UsageError(f"{flag} {var}: the environment variable {var} is not set or empty")
    return value.encode("utf-8")


def verify_key(var: str | None) -> tuple[bytes | None, str]:
    """(key, how the views name it) of ``--verify-key-env VAR``."""
    return key_from_env(var, "--verify-key-env"), f"${var}" if var else "the key given"


def sign_key(var: str | None) -> bytes | None:
    """The key of ``--sign-key-env VAR`` (None: unsigned)."""
    return key_from_env(var, "--sign-key-env")

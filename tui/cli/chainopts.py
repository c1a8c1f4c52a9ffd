"""The digest chain's flags (docs/record-format.md, "Digest chain"): ``--sign-key-env`` on the writers (`run`,
`live`, `sweep`, `watch --record`), ``--verify-key-env`` on the readers (`report`, `replay`, `accept`, `compare`).

A key is read from the environment variable named, only here; it is never printed, logged or recorded (a missing
or empty variable is bad usage: one line, exit 2, which names the variable, never a value)."""

from __future__ import annotations

import argparse
import os

from tui.cli.options import UsageError


def add_sign_key_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--sign-key-env", metavar="VAR", default=None,
                        help="sign the record file: every checkpoint of its digest chain also an HMAC-SHA256 with the "
                             "key in environment variable VAR (the key is never recorded; the header names only a key "
                             "id) (default: unsigned; the chain is written either way)")


def add_verify_key_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--verify-key-env", metavar="VAR", default=None,
                        help="also verify the record file's signature with the key in environment variable VAR: a "
                             "file not signed with that key cannot PASS (default: integrity checked, signature not)")


def key_from_env(var: str | None, flag: str) -> bytes | None:
    """The key in environment variable ``var`` (None when no flag was given); UsageError when unset or empty."""
    if not var:
        return None
    value = os.environ.get(var)
    if not value:
        raise UsageError(f"{flag} {var}: the environment variable {var} is not set or empty")
    return value.encode("utf-8")


def verify_key(args: argparse.Namespace) -> tuple[bytes | None, str]:
    """(key, how the views name it) of ``--verify-key-env``."""
    var = getattr(args, "verify_key_env", None)
    return key_from_env(var, "--verify-key-env"), f"${var}" if var else "the key given"


def sign_key(args: argparse.Namespace) -> bytes | None:
    """The key of ``--sign-key-env`` (None: unsigned)."""
    return key_from_env(getattr(args, "sign_key_env", None), "--sign-key-env")

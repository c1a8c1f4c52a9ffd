"""Where the bundled sample runs live (a source checkout or an installed package)."""

from __future__ import annotations

import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def sample_dir() -> str:
    for cand in (os.path.join(os.path.dirname(_HERE), "sample_logs"), os.path.join(_HERE, "sample_logs")):
        if os.path.isdir(cand):
            return cand
    raise FileNotFoundError("bundled sample_logs/ not found")


def sample_path(name: str) -> str:
    return os.path.join(sample_dir(), name)


def default_sample() -> str:
    """The recorded real run when present, else the synthetic teaching log."""
    d = sample_dir()
    for name in ("default.jsonl", "seed.jsonl"):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    raise FileNotFoundError("no bundled sample run")

"""The bundled sample runs (found through ``tui.resources``)."""

from __future__ import annotations

from tui.resources import bundled_dir, bundled_file

DEFAULT_SAMPLES = ("default.jsonl", "seed.jsonl")


def sample_dir() -> str:
    d = bundled_dir("sample_logs")
    if d is None:
        raise FileNotFoundError("bundled sample_logs/ not found in this installation")
    return str(d)


def sample_path(name: str) -> str:
    return str(bundled_file("sample_logs", name) or f"{sample_dir()}/{name}")


def default_sample() -> str:
    """The recorded real run when present, else the synthetic teaching log."""
    for name in DEFAULT_SAMPLES:
        p = bundled_file("sample_logs", name)
        if p is not None:
            return str(p)
    raise FileNotFoundError("no bundled sample run in this installation")

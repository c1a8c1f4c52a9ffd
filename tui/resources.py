"""Where servewatch's bundled data lives: ``themes/``, ``sample_logs/`` and ``quality/``, and the device table.

In a source checkout (editable install) the folders sit at the repository's top level, beside ``tui/``.
A wheel or sdist ships the same folders inside the package as ``tui/_data/<name>`` (see pyproject.toml,
``[tool.hatch.build.targets.wheel.force-include]``). This module is the one place that knows both.
The device table (``tui/data/devices.toml``) lives inside the package itself: the fixed layout allows no new
top-level folder, and a file under ``tui/`` ships in the wheel as it is.
"""

from __future__ import annotations

from pathlib import Path

BUNDLED = ("themes", "sample_logs", "quality")

_PKG = Path(__file__).resolve().parent


def bundled_dir(name: str) -> Path | None:
    """The bundled folder ``name`` (one of ``BUNDLED``), or None when this installation lacks it."""
    if name not in BUNDLED:
        raise ValueError(f"unknown bundled folder {name!r} (one of {', '.join(BUNDLED)})")
    for cand in (_PKG / "_data" / name, _PKG.parent / name):
        if cand.is_dir():
            return cand
    return None


def device_table_path() -> Path:
    """The device table `servewatch budget --gpu` screens on: ``tui/data/devices.toml``, inside the package (so a
    wheel ships it with the code, as the example datasets in ``tui/data/datasets``)."""
    return _PKG / "data" / "devices.toml"


def bundled_file(folder: str, name: str) -> Path | None:
    """A file inside a bundled folder, or None when it is not there."""
    d = bundled_dir(folder)
    if d is None:
        return None
    p = d / name
    return p if p.is_file() else None

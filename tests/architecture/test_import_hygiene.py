"""tui.core must stay importable without the UI or the outside world: standard library only."""

import pkgutil
import subprocess
import sys

import pytest

import tui.core

FORBIDDEN = ("textual", "rich", "httpx", "pynvml", "psutil", "prometheus_client", "httpcore")
CORE_MODULES = sorted(f"tui.core.{m.name}" for m in pkgutil.iter_modules(tui.core.__path__))


def test_core_modules_found():
    # guard against the parametrisation silently testing nothing
    assert {"tui.core.records", "tui.core.budget", "tui.core.stats", "tui.core.verdict", "tui.core.monitor"} <= set(CORE_MODULES)


def _modules_after(statement: str) -> set[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    import json

    return set(json.loads(out))


# What the interpreter itself loads before any of our code (site hooks, .pth files of this environment):
# not our doing, so not counted against a module.
BASELINE = _modules_after("pass")


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_only_stdlib(module):
    loaded = _modules_after(f"import importlib; importlib.import_module({module!r})") - BASELINE
    bad = sorted(m for m in loaded if m.split(".")[0] in FORBIDDEN)
    assert bad == [], f"{module} pulled in {bad}"
    # and nothing outside the standard library or tui itself
    third_party = sorted(
        m for m in loaded
        if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] not in ("tui", "__main__")
        and not m.startswith("_")
    )
    assert third_party == [], f"{module} pulled in non-stdlib modules {third_party}"


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_sources_do_not_import_textual():
    # (rich is not checked here: httpx imports it for its own command line when click is installed)
    loaded = _modules_after(
        "import importlib, pkgutil, tui.sources\n"
        "for m in pkgutil.iter_modules(tui.sources.__path__):\n"
        "    importlib.import_module('tui.sources.' + m.name)"
    )
    assert "tui.sources.load.generator" in loaded and "tui.sources.replay" in loaded
    assert not [m for m in loaded if m.split(".")[0] == "textual"]

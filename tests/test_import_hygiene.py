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


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_only_stdlib(module):
    code = (
        "import importlib, sys, json\n"
        f"importlib.import_module({module!r})\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    import json

    loaded = json.loads(out)
    bad = sorted(m for m in loaded if m.split(".")[0] in FORBIDDEN)
    assert bad == [], f"{module} pulled in {bad}"
    # and nothing outside the standard library or tui itself
    third_party = sorted(
        m for m in loaded
        if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] not in ("tui", "__main__")
        and not m.startswith("_")
    )
    assert third_party == [], f"{module} pulled in non-stdlib modules {third_party}"


def test_sources_do_not_import_textual():
    code = (
        "import importlib, pkgutil, sys, tui.sources\n"
        "for m in pkgutil.iter_modules(tui.sources.__path__):\n"
        "    importlib.import_module('tui.sources.' + m.name)\n"
        "print('textual' in sys.modules, 'rich' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]

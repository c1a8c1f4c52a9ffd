"""Markers by where a test lives (and, for the real llama-server, by the fixture it asks for).

    tests/unit/core, tests/unit/sources   fast unit tests by layer (in-test servers only where a real one cannot
                                          produce the case on demand: faults, exact pace)
    tests/cli                             the command line end to end, in process or as a child process
    tests/console                         the Textual console (pilot and SVG snapshots)
    tests/integration                     real peers: llama-server, Prometheus, Ray            -> marker ``peer``
    tests/docs                            every documented command and sample reaches what the docs say
    tests/packaging                       the wheel in a fresh virtual environment             -> ``packaging``
    tests/architecture                    layers, import cycles, module sizes
    tests/browser                         the HTML reports in headless Chromium, network blocked -> ``browser``

``pytest -m "not peer"`` is the fast suite: it needs no llama-server build, no Prometheus and no Ray (a test
anywhere that asks for the ``llama_server`` fixture is a peer test too). ``slow`` marks the tests that take more
than a few seconds on a 2-core machine (peer and packaging tests all are). The README's test command runs
everything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent

# folder (relative to tests/) -> markers every test in it gets
_BY_FOLDER: dict[str, tuple[str, ...]] = {
    "unit": ("unit",),
    "cli": ("cli",),
    "console": ("console",),
    "integration": ("peer", "slow"),
    "docs": ("docs",),
    "packaging": ("packaging", "slow"),
    "architecture": ("architecture",),
    "browser": ("browser",),
}
_PEER_FIXTURES = frozenset({"llama_server", "llama_server_factory", "llama_model", "ray_head", "prometheus_server",
                            "vllm_peer", "vllm_server", "vllm_server_factory", "vllm_gemma_server"})
_VLLM_FIXTURES = frozenset({"vllm_peer", "vllm_server", "vllm_server_factory", "vllm_gemma_server"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            rel = Path(str(item.path)).resolve().relative_to(_HERE)
        except ValueError:
            continue
        for name in _BY_FOLDER.get(rel.parts[0], ()) if len(rel.parts) > 1 else ():
            item.add_marker(name)
        names = set(getattr(item, "fixturenames", ()))
        if _PEER_FIXTURES & names:
            item.add_marker("peer")
            item.add_marker("slow")
        if _VLLM_FIXTURES & names:
            item.add_marker("vllm")

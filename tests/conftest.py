"""Markers by where a test lives (and, for the real llama-server, by the fixture it asks for).

    tests/unit/core, tests/unit/sources   unit tests by layer, in folders that mirror the package's
                                          (tests/unit/core/importers tests tui/core/importers; in-test servers only
                                          where a real one cannot produce the case on demand: faults, exact pace)
    tests/cli                             the command line end to end, in process or as a child process
    tests/console                         the Textual console (pilot and SVG snapshots)
    tests/integration                     real peers: llama-server, Prometheus, Ray            -> marker ``peer``
    tests/docs                            every documented command and sample reaches what the docs say
    tests/packaging                       the wheel in a fresh virtual environment             -> ``packaging``
    tests/architecture                    layers, import cycles, module sizes
    tests/browser                         the HTML reports in headless Chromium, network blocked -> ``browser``, ``slow``

``pytest -m "not peer"`` is the fast suite: it needs no llama-server build, no Prometheus and no Ray (a test
anywhere that asks for the ``llama_server`` fixture is a peer test too). ``slow`` marks the tests that take more
than a few seconds on a 2-core machine (peer and packaging tests all are), and every test that starts a process
or a listening server (checked below: such a test not marked slow fails). The README's test command runs
everything; its quickest loop leaves out ``slow``.
"""

from __future__ import annotations

import os
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
    "browser": ("browser", "slow"),  # each starts headless Chromium
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


# --- what a test starts: a process or a listening server makes it ``slow`` (issue 38: the quickest loop,
# ``-m "not peer and not slow and not packaging and not browser"``, stays under 2 minutes on 2 cores) ---

_current: list[str] = []  # the node id of the test being set up, run or torn down
_started: dict[str, list[str]] = {}  # node id -> what it started


def _watch(owner: object, name: str, what: str) -> None:
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        if _current:
            _started.setdefault(_current[-1], []).append(what)
        return original(*args, **kwargs)

    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(owner, name, wrapper)


def pytest_configure(config: pytest.Config) -> None:
    import multiprocessing.process
    import platform
    import socket
    import subprocess

    platform.platform()  # its first call runs `uname -p` once per process (cached): not the test's doing
    if not getattr(socket.socket.listen, "__wrapped__", None):
        _watch(subprocess.Popen, "__init__", "a process (subprocess.Popen)")
        _watch(multiprocessing.process.BaseProcess, "start", "a process (multiprocessing)")
        _watch(socket.socket, "listen", "a listening server (socket.listen)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    _current.append(item.nodeid)
    try:
        yield
    finally:
        _current.pop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    if call.when != "teardown":
        return
    started = _started.pop(item.nodeid, None)
    log = os.environ.get("SERVEWATCH_STARTS_LOG")
    if started and log:  # the survey the slow marks were set from
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{item.nodeid}\t{item.get_closest_marker('slow') is not None}\t{sorted(set(started))}\n")
    if started and item.get_closest_marker("slow") is None:
        rep = outcome.get_result()
        rep.outcome = "failed"
        rep.longrepr = (f"{item.nodeid} started {', '.join(sorted(set(started)))} and is not marked slow: "
                        "mark it @pytest.mark.slow (or its module: pytestmark), or give it what it needs in-process")

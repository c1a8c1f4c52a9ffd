"""Load workers as Ray actors: ``--ray auto|local|ADDRESS`` (``pip install 'servewatch[ray]'``).

The coordinator (the process the user started) keeps what must be one -- the record file, the
monitor and its verdict, the console -- exactly as with worker processes
(:class:`tui.sources.load.coordinator.WorkerPool`); only the link to each worker differs. Each worker
is an async Ray actor wrapping a :class:`~tui.sources.load.worker.WorkerEngine`; its batches wait
in a buffer on the actor until the coordinator's :class:`RayLink` collects them with one call that
waits up to :data:`POLL_WAIT_S` and returns every batch ready (never one call per request).

Connecting (:func:`connect`; Ray is imported here only, and only when ``--ray`` is given):

- ``auto``: the cluster ``RAY_ADDRESS`` names, else a Ray instance already running on this machine
  (``ray start --head``); none found is a setup error. servewatch never starts a cluster unasked.
- ``local``: start a throwaway one-machine Ray instance here (for trying it out), stopped at the end.
- anything else: a cluster address, ``ray://HOST:10001`` (Ray Client) or ``HOST:6379`` (from a node
  of the cluster).
- this process already connected (``ray.init`` called by a program or a test that embeds the load
  generator): that connection is used as it is and left open.

Placement (:func:`plan_nodes`): ``workers`` actors (``auto``: one per CPU the cluster offers, at
most :data:`AUTO_MAX`) are spread over the alive nodes that have CPUs, in proportion to each node's
CPUs, each pinned to its node (``NodeAffinitySchedulingStrategy``); an actor reserves one CPU, or
an equal share of its node's CPUs when more actors than CPUs are asked for. When servewatch opens
the connection, the ``tui`` package travels with it (runtime_env ``py_modules`` of the job), so the
actors run the coordinator's own code; the nodes need Ray and ``httpx`` (docs/load-workers.md). A
connection opened by the embedding program ships what that program chose.

Clocks: before setup, the coordinator measures each actor's clock against its own, NTP-style
(:func:`measure_offset`: best of :data:`CLOCK_PROBES` round trips; offset = remote ``time.time()``
minus the midpoint of the local send and receive times, uncertainty = half that round trip). An
actor on this very machine (same Linux boot id, and its ``perf_counter`` inside the round trip)
takes the coordinator's clock anchor, so its stamps are on the coordinator's timeline exactly; an
actor elsewhere uses its own anchor and its offset is written in the run header (``load.workers``),
not applied to its stamps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import platform
import signal
import socket
import time
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any

from tui.sources.load.errors import SetupError
from tui.sources.load.wire import Batch
from tui.sources.load.worker import WorkerEngine

AUTO_MAX = 64  # --workers auto with --ray: one actor per cluster CPU, at most this many
POLL_WAIT_S = 0.05  # one poll call waits at most this long for a batch
CLOCK_PROBES = 5  # round trips per actor for its clock offset (the shortest one counts)
PLACE_TIMEOUT_S = 60.0  # actors not placed and answering by then: a setup error
EXIT_TIMEOUT_S = 5.0
CONNECT_CHECK_S = 5.0  # a TCP connect to the cluster's address before ray.init
INSTALL_HINT = "pip install 'servewatch[ray]'"


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise SetupError(f"--ray needs Ray, which is not installed here: {INSTALL_HINT}") from None
    return ray


def _first_line(exc: BaseException, limit: int = 240) -> str:
    text = str(exc).strip().splitlines()
    line = text[0].strip() if text else ""
    line = f"{type(exc).__name__}: {line}" if line else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _ray_error(exc: BaseException) -> str:
    """One line for what Ray raised: an exception raised inside the actor is named by itself (a RayTaskError's
    own first line only names the method)."""
    cause = getattr(exc, "cause", None)
    return _first_line(cause if isinstance(cause, BaseException) else exc)


def boot_id() -> str | None:
    """This machine's boot id (Linux): two processes with the same one share ``perf_counter``'s clock."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:
        return None


# ------------------------------------------------------------------ the actor


class WorkerActor:
    """The body of one Ray actor (made remote by :func:`ray_links`; async methods: Ray runs them
    on the actor's event loop, where the engine's requests run too)."""

    def __init__(self) -> None:
        self._buf: list[Batch] = []
        self._ready: asyncio.Event | None = None
        self._engine: WorkerEngine | None = None

    async def where(self) -> dict:
        import ray

        ctx = ray.get_runtime_context()
        return {"ray_node_id": ctx.get_node_id(), "ray_node_ip": ray.util.get_node_ip_address(),
                "host": platform.node(), "boot_id": boot_id(), "pid": os.getpid()}

    async def clock(self) -> tuple[float, float]:
        return time.time(), perf_counter()

    async def _out(self, batch: Batch) -> None:
        self._buf.append(batch)
        if self._ready is not None:
            self._ready.set()

    async def setup(self, setup: Any) -> dict:
        self._engine = WorkerEngine(setup, self._out)
        return await self._engine.start()

    async def step(self, order: Any) -> None:
        assert self._engine is not None
        self._engine.begin(order)

    async def stop(self) -> None:
        if self._engine is not None:
            self._engine.stop_step()

    async def cancel(self) -> None:
        if self._engine is not None:
            self._engine.cancel()

    async def poll(self, wait_s: float) -> list[Batch]:
        """Every batch ready, after waiting up to ``wait_s`` for the first one."""
        if not self._buf:
            if self._ready is None:
                self._ready = asyncio.Event()
            self._ready.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), wait_s)
        out, self._buf = self._buf, []
        return out

    async def exit(self) -> None:
        eng = self._engine
        if eng is None:
            return
        eng.cancel()
        task = eng._step_task
        if task is not None:
            with contextlib.suppress(BaseException):
                await task
        await eng.close()


# ------------------------------------------------------------------ placement and clocks


def plan_nodes(nodes: Sequence[tuple[str, float]], workers: int) -> list[tuple[str, float]]:
    """Where each of ``workers`` actors goes: ``nodes`` is (node id, CPUs) of the alive nodes; nodes
    get actors in proportion to their CPUs (each next actor to the node with the lowest share after
    taking it; ties: the first listed). Returns (node id, CPUs the actor reserves) per actor: 1, or
    an equal share of its node's CPUs when the node gets more actors than it has CPUs."""
    usable = [(nid, float(c)) for nid, c in nodes if c and c > 0]
    if not usable or workers < 1:
        return []
    count = {nid: 0 for nid, _ in usable}
    plan: list[str] = []
    for _ in range(workers):
        nid, _c = min(usable, key=lambda nc: (count[nc[0]] + 1) / nc[1])
        count[nid] += 1
        plan.append(nid)
    cpus = dict(usable)
    out = []
    for nid in plan:
        share = cpus[nid] / count[nid]
        out.append((nid, 1.0 if share >= 1.0 else max(0.0001, math.floor(share * 10000) / 10000)))
    return out


def measure_offset(samples: Sequence[tuple[float, float, float]]) -> tuple[float, float]:
    """NTP-style clock offset from (local send, remote time, local receive) samples, all epoch
    seconds: the sample with the shortest round trip; offset = remote - midpoint, uncertainty =
    half its round trip. The true offset lies within offset +- uncertainty (if the remote read its
    clock between the send and the receive, which it did)."""
    t0, remote, t1 = min(samples, key=lambda s: s[2] - s[0])
    return remote - (t0 + t1) / 2.0, max(0.0, (t1 - t0) / 2.0)


async def _probe_clock(actor: Any) -> dict:
    """The actor's clock against ours (see :func:`measure_offset`) and whether its ``perf_counter``
    reads like ours (inside the round trip)."""
    samples = []
    perf_inside = True
    for _ in range(CLOCK_PROBES):
        p0, t0 = perf_counter(), time.time()
        remote, rperf = await actor.clock.remote()
        t1, p1 = time.time(), perf_counter()
        samples.append((t0, remote, t1))
        perf_inside = perf_inside and p0 <= rperf <= p1
    off, unc = measure_offset(samples)
    return {"clock_offset_ms": round(off * 1000.0, 3), "clock_offset_pm_ms": round(unc * 1000.0, 3),
            "_perf_inside": perf_inside}


# ------------------------------------------------------------------ the connection


class _Session:
    """The Ray connection of one run: shut down after the last link closes if this run opened it."""

    def __init__(self, ray: Any, owned: bool) -> None:
        self.ray = ray
        self.owned = owned
        self.open_links = 0

    def release(self) -> None:
        self.open_links -= 1
        if self.open_links <= 0 and self.owned:
            self.owned = False
            with contextlib.suppress(Exception):
                self.ray.shutdown()


def connect(ray: Any, address: str) -> bool:
    """Connect this process to Ray (see the module docstring); True when this call opened the
    connection (the run then closes it). Raises SetupError with one line."""
    if ray.is_initialized():
        return False
    # the tui package travels to the actors with this connection (Ray takes local directories at this level only)
    kw: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False,
                          "runtime_env": {"py_modules": [_package_dir()], "excludes": ["__pycache__", "*.pyc"]}}
    addr = address.strip()
    if addr.lower() == "local":
        kw.update(address="local", include_dashboard=False)
        where = "a local Ray instance"
    elif addr.lower() == "auto":
        kw["address"] = "auto"
        env = os.environ.get("RAY_ADDRESS")
        where = f"the Ray cluster at {env} (RAY_ADDRESS)" if env else "a Ray instance running on this machine"
    else:
        kw["address"] = addr
        where = f"the Ray cluster at {addr}"
    target = os.environ.get("RAY_ADDRESS") if addr.lower() == "auto" else (None if addr.lower() == "local" else addr)
    if target:
        _reachable(target, where)
    # ray.init sets its own SIGTERM handler in the main thread (exit at once); servewatch's
    # (SIGTERM like Ctrl-C: in-flight requests recorded as cancelled) must stay in force
    saved = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(ValueError, OSError):
            saved[sig] = signal.getsignal(sig)
    try:
        ray.init(**kw)
    except Exception as exc:  # noqa: BLE001 -- whatever Ray raises, one line
        if addr.lower() == "auto" and not os.environ.get("RAY_ADDRESS") and isinstance(exc, ConnectionError):
            raise SetupError("--ray auto found no Ray cluster: RAY_ADDRESS is not set and no Ray instance runs on "
                             "this machine (start one with `ray start --head`, give --ray ADDRESS, or --ray local "
                             "for a throwaway one here)") from None
        hint = ("; check the address and, for a cluster with token authentication, RAY_AUTH_MODE=token with the "
                "cluster's token in RAY_AUTH_TOKEN") if isinstance(exc, ConnectionError) else ""
        raise SetupError(f"could not connect to {where}: {_first_line(exc)}{hint}") from None
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                with contextlib.suppress(ValueError, OSError, TypeError):
                    signal.signal(sig, handler)
    return True


def _reachable(address: str, where: str, timeout: float = CONNECT_CHECK_S) -> None:
    """Fail fast when nothing answers at the address (Ray itself retries for minutes)."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.split("/", 1)[0].rpartition(":")
    if not sep or not port.isdigit():
        return  # a form Ray knows and we do not: let Ray judge it
    host = host.strip("[]") or "127.0.0.1"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise SetupError(f"could not connect to {where}: nothing answers at {host}:{port} "
                         f"({exc.strerror or type(exc).__name__})") from None


def _nodes(ray: Any) -> list[tuple[str, float]]:
    return [(n["NodeID"], float(n.get("Resources", {}).get("CPU", 0.0)))
            for n in ray.nodes() if n.get("Alive") or n.get("alive")]


# ------------------------------------------------------------------ the coordinator's link


class RayLink:
    """The coordinator's handle on one actor (a :class:`tui.sources.load.coordinator.WorkerLink`)."""

    def __init__(self, index: int, actor: Any, session: _Session, placement: dict) -> None:
        self.index = index
        self.actor = actor
        self.session = session
        self.placement = placement  # node, host, clock offset: merged into the "ready" info
        self._setup_ref: Any = None
        self._queue: list[Any] = []
        self._poll: asyncio.Future | None = None
        self._why: str | None = None
        self._fired: set[asyncio.Task] = set()
        self._closed = False
        session.open_links += 1

    async def start(self) -> None:
        """(The actor was placed and probed by :func:`ray_links` already.)"""

    def _lost(self, exc: BaseException) -> None:
        ray = self.session.ray
        if isinstance(exc, ray.exceptions.RayActorError):
            self._why = f"died ({_first_line(exc, 160)})"
        else:
            self._why = f"failed: {_ray_error(exc)}"

    async def _quiet(self, ref: Any) -> None:
        try:
            await ref
        except Exception as exc:  # noqa: BLE001 -- seen by the next poll as a lost actor
            if self._why is None:
                self._lost(exc)

    def _fire(self, ref: Any) -> None:
        t = asyncio.ensure_future(self._quiet(ref))
        self._fired.add(t)
        t.add_done_callback(self._fired.discard)

    async def send(self, msg: tuple) -> None:
        if self._closed or self._why is not None:
            return
        kind = msg[0]
        a = self.actor
        if kind == "setup":
            self._setup_ref = a.setup.remote(msg[1])
        elif kind == "step":
            self._fire(a.step.remote(msg[1]))
        elif kind == "stop":
            self._fire(a.stop.remote())
        elif kind == "cancel":
            self._fire(a.cancel.remote())
        elif kind == "exit":
            with contextlib.suppress(Exception):
                await asyncio.wait_for(a.exit.remote(), EXIT_TIMEOUT_S)

    async def recv(self) -> Any:
        """("ready", info) after setup; then batches in the order the actor made them; None when
        the actor is gone."""
        if self._setup_ref is not None:
            ref, self._setup_ref = self._setup_ref, None
            try:
                info = await ref
            except Exception as exc:  # noqa: BLE001 -- RayActorError, RayTaskError (its setup raised)
                self._lost(exc)
                return None
            return ("ready", {**dict(info), **self.placement})
        while not self._queue:
            if self._why is not None:
                return None
            if self._poll is None:  # one call in flight at a time; survives a cancelled recv (shield)
                self._poll = asyncio.ensure_future(self.actor.poll.remote(POLL_WAIT_S))
            try:
                got = await asyncio.shield(self._poll)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                self._poll = None
                self._lost(exc)
                return None
            self._poll = None
            self._queue.extend(got)
        return self._queue.pop(0)

    def describe_exit(self) -> str:
        p = self.placement
        where = f"on node {p.get('ray_node_ip', '?')} ({str(p.get('ray_node_id', '?'))[:12]})"
        return f"Ray actor {self.index} {where} {self._why or 'ended'}"

    async def reap(self) -> None:
        """(A lost actor has nothing more to wait for: Ray already said why.)"""

    def kill(self) -> None:
        """Stop an actor that no longer reports (stuck)."""
        with contextlib.suppress(Exception):
            self.session.ray.kill(self.actor)

    async def close(self) -> None:
        if self._closed:
            return
        try:
            if self._why is None:
                await self.send(("exit",))
            self._closed = True
            for t in list(self._fired):
                t.cancel()
            if self._poll is not None:
                self._poll.cancel()
            with contextlib.suppress(Exception):
                self.session.ray.kill(self.actor)
        finally:
            self._closed = True
            self.session.release()


# ------------------------------------------------------------------ entry point


def _package_dir() -> str:
    import tui

    return os.path.dirname(os.path.abspath(tui.__file__))


async def ray_links(address: str, workers: int | str, say: Callable[[str], Any]) -> tuple[list[RayLink], bool]:
    """Connect to Ray, place the actors, measure their clocks. Returns the links and whether every
    actor is on this machine (then they share the coordinator's clock anchor). Raises SetupError."""
    ray = _import_ray()
    owned = connect(ray, address)
    session = _Session(ray, owned)
    actors: list[Any] = []
    try:
        nodes = _nodes(ray)
        total = sum(c for _, c in nodes)
        if workers == "auto":
            n = max(1, min(AUTO_MAX, int(total)))
        else:
            n = int(workers)
        plan = plan_nodes(nodes, n)
        if not plan:
            raise SetupError("the Ray cluster offers no CPU to place load workers on")
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote_cls = ray.remote(WorkerActor)
        for nid, cpus in plan:
            actors.append(remote_cls.options(
                num_cpus=cpus, max_restarts=0, max_task_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=nid, soft=False),
            ).remote())
        try:
            wheres = await asyncio.wait_for(asyncio.gather(*(a.where.remote() for a in actors)), PLACE_TIMEOUT_S)
        except TimeoutError:
            raise SetupError(f"the Ray actors were not all placed and answering within {PLACE_TIMEOUT_S:g} s "
                             "(the cluster's CPUs busy with other work? fewer --workers?)") from None
        except Exception as exc:  # noqa: BLE001 -- an actor that could not start (runtime env, import)
            raise SetupError(f"a Ray load worker did not start: {_ray_error(exc)}") from None
        clocks = await asyncio.gather(*(_probe_clock(a) for a in actors))
        mine = boot_id()
        here = [bool(mine) and w.get("boot_id") == mine and c["_perf_inside"] for w, c in zip(wheres, clocks)]
        links = []
        for k, (a, w, c, local) in enumerate(zip(actors, wheres, clocks, here)):
            placement = {"ray_node_id": w["ray_node_id"], "ray_node_ip": w["ray_node_ip"],
                         "same_machine": local, "clock_offset_ms": c["clock_offset_ms"],
                         "clock_offset_pm_ms": c["clock_offset_pm_ms"]}
            links.append(RayLink(k, a, session, placement))
    except BaseException:
        for a in actors:
            with contextlib.suppress(Exception):
                ray.kill(a)
        if session.owned:
            with contextlib.suppress(Exception):
                ray.shutdown()
        raise
    nodes_used = len({p[0] for p in plan})
    shared = all(here)
    conn = "" if owned else " (this process's Ray connection)"
    say(f"Ray{conn}: {n} load actors on {nodes_used} of {len(nodes)} nodes ({total:g} CPUs); clocks: "
        + ("all on this machine, one clock anchor" if shared else
           f"own anchor per actor, largest measured offset {max(abs(c['clock_offset_ms']) for c in clocks):.1f} ms"))
    return links, shared

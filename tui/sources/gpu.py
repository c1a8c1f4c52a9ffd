"""GPU (NVML via nvidia-ml-py) and host (psutil) sampling.

``GpuSampler`` produces ``gpu`` and ``host`` record dicts (record format v1,
``tui.core.records``). No NVML library, no driver, no device, or any NVML error
at any call puts it in a clear "no GPU telemetry" state (``available=False``
with a readable ``reason``); it never raises into its caller. ``pynvml`` and
``psutil`` are imported lazily so that importing this module costs nothing.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["GpuSampler", "NO_GPU"]

NO_GPU = "no GPU telemetry"

# NVML return codes (stable across NVML versions); used when the module lacks the constant.
_NVML_ERROR_NO_PERMISSION = 4
_NVML_ERROR_NOT_SUPPORTED = 3
_NVML_ERROR_DRIVER_NOT_LOADED = 9
_NVML_ERROR_LIBRARY_NOT_FOUND = 12
_NVML_ERROR_GPU_IS_LOST = 15

Emit = Callable[[dict], "Awaitable[Any] | Any"]


def _text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def _cuda_version(v: Any) -> str | None:
    """NVML reports CUDA driver version as e.g. 12040 -> "12.4"."""
    try:
        n = int(v)
    except Exception:
        return None
    if n <= 0:
        return None
    return f"{n // 1000}.{(n % 1000) // 10}"


class GpuSampler:
    """NVML + psutil sampler. Construct, check ``.available``/``.reason``, sample, ``close()``.

    - ``sample(t) -> list[dict]``: one ``gpu`` dict per device; ``[]`` when unavailable.
    - ``host(t) -> dict``: a ``host`` dict (fields None where psutil cannot tell).
    - ``async run(emit, stop_event, interval=1.0)``: emits those dicts until stopped.
    - ``environment() -> dict``: driver/CUDA/device facts, or ``{"gpu": "none", "reason": ...}``.
    """

    def __init__(self, pynvml_module: Any = None, clock: Callable[[], float] | None = None) -> None:
        self.available = False
        self.reason = ""
        self._nvml: Any = None
        self._initialised = False
        self._handles: list[Any] = []
        self._names: list[str] = []
        self._psutil: Any = None
        self._proc: Any = None
        self.server_pid: int | None = None  # a local server's process (local_server_pid): its RSS in host samples
        self.clock = clock
        self._init_nvml(pynvml_module)
        self._init_psutil()

    # ---------------------------------------------------------- NVML state

    def _err_code(self, name: str, default: int) -> int:
        return getattr(self._nvml, name, default) if self._nvml is not None else default

    def _is_nvml_error(self, exc: BaseException) -> bool:
        cls = getattr(self._nvml, "NVMLError", None) if self._nvml is not None else None
        return isinstance(cls, type) and isinstance(exc, cls)

    def _explain(self, exc: BaseException, where: str) -> str:
        if not self._is_nvml_error(exc):
            return f"{NO_GPU}: {where} failed ({type(exc).__name__}: {_text(exc)[:80]})"
        code = getattr(exc, "value", None)
        if code == self._err_code("NVML_ERROR_LIBRARY_NOT_FOUND", _NVML_ERROR_LIBRARY_NOT_FOUND):
            return f"{NO_GPU}: NVML library not found (no NVIDIA driver installed)"
        if code == self._err_code("NVML_ERROR_DRIVER_NOT_LOADED", _NVML_ERROR_DRIVER_NOT_LOADED):
            return f"{NO_GPU}: no NVIDIA driver loaded"
        if code == self._err_code("NVML_ERROR_NO_PERMISSION", _NVML_ERROR_NO_PERMISSION):
            return f"{NO_GPU}: no permission to query NVML ({where})"
        if code == self._err_code("NVML_ERROR_GPU_IS_LOST", _NVML_ERROR_GPU_IS_LOST):
            return f"{NO_GPU}: GPU lost ({where})"
        return f"{NO_GPU}: NVML error in {where}: {_text(exc)[:80]}"

    def _disable(self, reason: str) -> None:
        self.available = False
        self.reason = reason
        self._handles = []
        self._shutdown()

    def _init_nvml(self, module: Any) -> None:
        if module is None:
            try:
                import pynvml  # nvidia-ml-py
            except Exception:
                self.reason = f"{NO_GPU}: nvidia-ml-py (pynvml) is not installed"
                return
            module = pynvml
        self._nvml = module
        try:
            module.nvmlInit()
        except Exception as exc:
            self.reason = self._explain(exc, "nvmlInit")
            return
        self._initialised = True
        try:
            count = int(module.nvmlDeviceGetCount())
            if count <= 0:
                self._disable(f"{NO_GPU}: NVML reports 0 devices")
                return
            handles, names = [], []
            for i in range(count):
                h = module.nvmlDeviceGetHandleByIndex(i)
                handles.append(h)
                names.append(_text(module.nvmlDeviceGetName(h)))
        except Exception as exc:
            self._disable(self._explain(exc, "device discovery"))
            return
        self._handles, self._names = handles, names
        self.available = True
        self.reason = f"{len(handles)} NVIDIA device(s) via NVML"

    def _shutdown(self) -> None:
        if self._initialised and self._nvml is not None:
            self._initialised = False
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass

    # ---------------------------------------------------------- psutil state

    def _init_psutil(self) -> None:
        try:
            import psutil

            self._psutil = psutil
            self._proc = psutil.Process(os.getpid())
            # The first cpu_percent(None) call only sets the reference point.
            psutil.cpu_percent(interval=None)
            self._proc.cpu_percent(interval=None)
        except Exception:
            self._psutil = None
            self._proc = None

    # ---------------------------------------------------------- sampling

    def sample(self, t: float) -> list[dict]:
        """One ``gpu`` dict per device; ``[]`` (and ``available`` False) on any NVML trouble."""
        if not self.available:
            return []
        nv = self._nvml
        out: list[dict] = []
        try:
            for i, h in enumerate(self._handles):
                mem = nv.nvmlDeviceGetMemoryInfo(h)
                util: float | None
                try:
                    util = float(nv.nvmlDeviceGetUtilizationRates(h).gpu)
                except Exception as exc:
                    # Some devices (MIG slices, some vGPUs) cannot report utilization: N/A, not fatal.
                    if self._is_nvml_error(exc) and getattr(exc, "value", None) == self._err_code(
                        "NVML_ERROR_NOT_SUPPORTED", _NVML_ERROR_NOT_SUPPORTED
                    ):
                        util = None
                    else:
                        raise
                out.append(
                    {
                        "type": "gpu",
                        "t": float(t),
                        "device": i,
                        "name": self._names[i] if i < len(self._names) else None,
                        "memory_used": int(mem.used),
                        "memory_total": int(mem.total),
                        "utilization": util,
                    }
                )
        except Exception as exc:
            self._disable(self._explain(exc, f"sampling device {len(out)}"))
            return []
        return out

    def host(self, t: float) -> dict:
        """A ``host`` dict: system CPU %, memory used/total, this process's CPU % (may exceed 100)."""
        rec: dict = {
            "type": "host",
            "t": float(t),
            "cpu_percent": None,
            "memory_used": None,
            "memory_total": None,
            "client_cpu_percent": None,
        }
        ps = self._psutil
        if ps is None:
            return rec
        try:
            rec["cpu_percent"] = float(ps.cpu_percent(interval=None))
        except Exception:
            pass
        try:
            vm = ps.virtual_memory()
            rec["memory_used"] = int(vm.used)
            rec["memory_total"] = int(vm.total)
        except Exception:
            pass
        try:
            if self._proc is not None:
                rec["client_cpu_percent"] = float(self._proc.cpu_percent(interval=None))
        except Exception:
            pass
        if self.server_pid is not None:  # issue 41: the local server's resident memory (the host pane)
            try:
                rec["server_rss"] = int(ps.Process(self.server_pid).memory_info().rss)
                rec["server_pid"] = self.server_pid
            except Exception:
                self.server_pid = None  # gone, or not ours to read: system memory alone from now on
        return rec

    def _tick(self, t: float) -> list[dict]:
        return self.sample(t) + [self.host(t)]

    async def run(self, emit: Emit, stop_event: asyncio.Event, interval: float = 1.0) -> None:
        """Emit gpu dicts (when available) and one host dict every ``interval`` s until stopped.

        NVML and psutil calls run in a worker thread so a slow driver call does not
        stall the event loop that times requests. Never raises (except cancellation).
        """
        import time

        clock = self.clock or time.time
        interval = max(0.05, float(interval))
        loop = asyncio.get_running_loop()
        next_tick = loop.time()
        while not stop_event.is_set():
            try:
                recs = await asyncio.to_thread(self._tick, clock())
            except asyncio.CancelledError:
                raise
            except Exception:
                recs = []
            for rec in recs:
                try:
                    res = emit(rec)
                    if inspect.isawaitable(res):
                        await res
                except asyncio.CancelledError:
                    raise
                except Exception:
                    pass
            next_tick += interval
            delay = next_tick - loop.time()
            if delay < 0:
                next_tick = loop.time()
                delay = 0.0
            try:
                await asyncio.wait_for(stop_event.wait(), timeout=delay if delay > 0 else 0.001)
            except TimeoutError:
                pass

    # ---------------------------------------------------------- environment

    def environment(self) -> dict:
        """Facts for a run header: driver, CUDA, devices; or ``{"gpu": "none", "reason": ...}``."""
        env: dict
        if not self.available:
            env = {"gpu": "none", "reason": self.reason}
        else:
            nv = self._nvml
            try:
                env = {"gpu": "nvidia"}
                try:
                    env["driver_version"] = _text(nv.nvmlSystemGetDriverVersion())
                except Exception:
                    env["driver_version"] = None
                cuda = None
                for fn in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
                    f = getattr(nv, fn, None)
                    if f is None:
                        continue
                    try:
                        cuda = _cuda_version(f())
                        break
                    except Exception:
                        continue
                env["cuda_version"] = cuda
                devices = []
                for i, h in enumerate(self._handles):
                    mem = nv.nvmlDeviceGetMemoryInfo(h)
                    devices.append({"index": i, "name": self._names[i], "memory_total": int(mem.total)})
                env["devices"] = devices
            except Exception as exc:
                self._disable(self._explain(exc, "environment"))
                env = {"gpu": "none", "reason": self.reason}
        ps = self._psutil
        if ps is not None:
            try:
                env["host"] = {
                    "cpu_count": ps.cpu_count(logical=True),
                    "memory_total": int(ps.virtual_memory().total),
                }
            except Exception:
                pass
        return env

    def close(self) -> None:
        """Release NVML. Idempotent."""
        self._handles = []
        self._shutdown()
        if self.available:
            self.available = False
            self.reason = f"{NO_GPU}: sampler closed"

    def __enter__(self) -> GpuSampler:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def local_server_pid(url: str) -> int | None:
    """The PID of the process listening on ``url``'s port when the URL is this machine's (127.0.0.1, ::1,
    localhost) and psutil can tell (issue 41: the host pane's server RSS); None otherwise, never raises."""
    from urllib.parse import urlsplit

    try:
        u = urlsplit(url)
        if u.hostname not in ("127.0.0.1", "localhost", "::1"):
            return None
        port = u.port or (443 if u.scheme == "https" else 80)
        import psutil

        for c in psutil.net_connections(kind="tcp"):
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
                return int(c.pid)
    except Exception:  # no psutil, no permission, a bad URL: unknown, said by its absence
        return None
    return None

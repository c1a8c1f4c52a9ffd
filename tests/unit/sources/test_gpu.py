"""GPU/host sampling: the real no-GPU path on this machine, and a fake pynvml for the rest."""

from __future__ import annotations

import asyncio
import sys
import types
from types import SimpleNamespace

import pytest

from tui.core.records import GpuSample, HostSample, parse_object
from tui.sources.gpu import NO_GPU, GpuSampler

GIB = 1024**3


# ------------------------------------------------------------------ fake NVML


def make_fake_pynvml(devices=None, init_error=None, fail_after=None, fail_code=15, util_code=None):
    """A stand-in for nvidia-ml-py with the same names and error behaviour.

    ``fail_after``: number of successful nvmlDeviceGetMemoryInfo calls before the
    device "disappears" (NVMLError with ``fail_code``, 15 = GPU is lost).
    ``util_code``: make utilization calls raise NVMLError with this code.
    """
    m = types.ModuleType("pynvml")
    m.NVML_ERROR_NOT_SUPPORTED = 3
    m.NVML_ERROR_NO_PERMISSION = 4
    m.NVML_ERROR_DRIVER_NOT_LOADED = 9
    m.NVML_ERROR_LIBRARY_NOT_FOUND = 12
    m.NVML_ERROR_GPU_IS_LOST = 15

    class NVMLError(Exception):
        def __init__(self, value):
            self.value = value
            super().__init__(f"NVML error {value}")

    m.NVMLError = NVMLError
    devices = devices if devices is not None else [("NVIDIA H200", 141 * GIB, 20 * GIB, 37)]
    state = {"init": 0, "shutdown": 0, "mem_calls": 0}
    m.state = state

    def nvmlInit():
        if init_error is not None:
            raise NVMLError(init_error)
        state["init"] += 1

    def nvmlShutdown():
        state["shutdown"] += 1

    def nvmlDeviceGetCount():
        return len(devices)

    def nvmlDeviceGetHandleByIndex(i):
        return ("handle", i)

    def nvmlDeviceGetName(h):
        return devices[h[1]][0].encode()  # old bindings return bytes

    def nvmlDeviceGetMemoryInfo(h, version=None):
        if fail_after is not None and state["mem_calls"] >= fail_after:
            raise NVMLError(fail_code)
        state["mem_calls"] += 1
        _, total, used, _ = devices[h[1]]
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(h):
        if util_code is not None:
            raise NVMLError(util_code)
        return SimpleNamespace(gpu=devices[h[1]][3], memory=10)

    m.nvmlInit = nvmlInit
    m.nvmlShutdown = nvmlShutdown
    m.nvmlDeviceGetCount = nvmlDeviceGetCount
    m.nvmlDeviceGetHandleByIndex = nvmlDeviceGetHandleByIndex
    m.nvmlDeviceGetName = nvmlDeviceGetName
    m.nvmlDeviceGetMemoryInfo = nvmlDeviceGetMemoryInfo
    m.nvmlDeviceGetUtilizationRates = nvmlDeviceGetUtilizationRates
    m.nvmlSystemGetDriverVersion = lambda: "570.124.06"
    m.nvmlSystemGetCudaDriverVersion_v2 = lambda: 12080
    return m


@pytest.fixture
def fake_nvml(monkeypatch):
    def install(**kw):
        m = make_fake_pynvml(**kw)
        monkeypatch.setitem(sys.modules, "pynvml", m)
        return m

    return install


# ------------------------------------------------------------------ the real path (no GPU here)


def test_real_nvml_on_this_machine_degrades_to_no_gpu():
    s = GpuSampler()
    try:
        if s.available:  # pragma: no cover - only on a machine with a GPU
            recs = s.sample(1.0)
            assert recs and all(r["memory_total"] > 0 for r in recs)
            return
        assert s.reason.startswith(NO_GPU)
        assert any(w in s.reason for w in ("NVML library not found", "driver", "0 devices", "not installed"))
        assert s.sample(1.0) == []
        env = s.environment()
        assert env["gpu"] == "none" and env["reason"] == s.reason
    finally:
        s.close()
        s.close()  # idempotent


def test_pynvml_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    s = GpuSampler()
    assert not s.available and "not installed" in s.reason
    assert s.sample(0) == []


@pytest.mark.parametrize(
    "code, words",
    [(12, "NVML library not found"), (9, "no NVIDIA driver"), (4, "no permission"), (999, "NVML error")],
)
def test_init_errors_give_readable_reason(fake_nvml, code, words):
    fake_nvml(init_error=code)
    s = GpuSampler()
    assert not s.available
    assert s.reason.startswith(NO_GPU) and words in s.reason
    assert s.sample(0) == [] and s.environment()["gpu"] == "none"


def test_zero_devices(fake_nvml):
    m = fake_nvml(devices=[])
    s = GpuSampler()
    assert not s.available and "0 devices" in s.reason
    assert m.state["shutdown"] == 1  # NVML released


# ------------------------------------------------------------------ happy path


def test_sample_two_devices(fake_nvml):
    fake_nvml(devices=[("NVIDIA H200", 141 * GIB, 20 * GIB, 37), ("NVIDIA H200", 141 * GIB, 1 * GIB, 0)])
    s = GpuSampler()
    assert s.available and "2 NVIDIA device" in s.reason
    recs = s.sample(12.5)
    assert [r["device"] for r in recs] == [0, 1]
    r0 = recs[0]
    assert r0 == {"type": "gpu", "t": 12.5, "device": 0, "name": "NVIDIA H200",
                  "memory_used": 20 * GIB, "memory_total": 141 * GIB, "utilization": 37.0}
    g = parse_object(r0)
    assert isinstance(g, GpuSample) and g.memory_total == 141 * GIB
    env = s.environment()
    assert env["gpu"] == "nvidia" and env["driver_version"] == "570.124.06" and env["cuda_version"] == "12.8"
    assert env["devices"][1] == {"index": 1, "name": "NVIDIA H200", "memory_total": 141 * GIB}


def test_utilization_not_supported_is_na_not_fatal(fake_nvml):
    fake_nvml(util_code=3)
    s = GpuSampler()
    recs = s.sample(1)
    assert s.available and recs[0]["utilization"] is None and recs[0]["memory_used"] == 20 * GIB


def test_device_disappears_mid_sampling(fake_nvml):
    m = fake_nvml(devices=[("A", 80 * GIB, GIB, 5), ("B", 80 * GIB, GIB, 5)], fail_after=3)
    s = GpuSampler()
    assert len(s.sample(1)) == 2  # 2 memory calls
    assert s.sample(2) == []  # third call ok, fourth (device 1) lost -> whole sample dropped
    assert not s.available
    assert s.reason.startswith(NO_GPU) and "GPU lost" in s.reason and "device 1" in s.reason
    assert s.sample(3) == []  # stays off, no exception
    assert s.environment()["gpu"] == "none"
    assert m.state["shutdown"] == 1


def test_other_exception_mid_sampling_also_contained(fake_nvml):
    m = fake_nvml()

    def broken(h):
        raise AttributeError("binding mismatch")

    m.nvmlDeviceGetUtilizationRates = broken
    s = GpuSampler()
    assert s.sample(1) == [] and not s.available and "AttributeError" in s.reason


def test_environment_error_contained(fake_nvml):
    m = fake_nvml(fail_after=0, fail_code=15)
    s = GpuSampler()
    assert s.available  # discovery does not touch memory info
    env = s.environment()
    assert env["gpu"] == "none" and "GPU lost" in env["reason"]
    assert m.state["shutdown"] == 1


def test_host_record():
    s = GpuSampler()
    rec = s.host(3.0)
    h = parse_object(rec)
    assert isinstance(h, HostSample)
    assert rec["memory_total"] and rec["memory_total"] > 0
    assert 0 < rec["memory_used"] <= rec["memory_total"]
    assert rec["cpu_percent"] is not None and 0.0 <= rec["cpu_percent"] <= 100.0
    assert rec["client_cpu_percent"] is not None and rec["client_cpu_percent"] >= 0.0
    s.close()


def test_host_without_psutil(monkeypatch):
    monkeypatch.setitem(sys.modules, "psutil", None)
    s = GpuSampler()
    rec = s.host(1.0)
    assert rec["type"] == "host" and rec["cpu_percent"] is None and rec["memory_total"] is None
    assert "host" not in s.environment()


# ------------------------------------------------------------------ run loop


async def test_run_emits_gpu_and_host_then_survives_device_loss(fake_nvml):
    fake_nvml(fail_after=2)  # one device: 2 good samples, then lost
    s = GpuSampler()
    stop = asyncio.Event()
    recs: list[dict] = []

    def emit(rec):
        recs.append(rec)
        if sum(r["type"] == "host" for r in recs) >= 4:
            stop.set()

    await asyncio.wait_for(s.run(emit, stop, interval=0.01), 10)
    types_ = [r["type"] for r in recs]
    assert types_ == ["gpu", "host", "gpu", "host", "host", "host"]
    assert not s.available and "GPU lost" in s.reason
    s.close()


async def test_run_without_gpu_emits_host_only():
    s = GpuSampler()
    stop = asyncio.Event()
    recs: list[dict] = []

    async def emit(rec):
        recs.append(rec)
        if len(recs) >= 2:
            stop.set()

    await asyncio.wait_for(s.run(emit, stop, interval=0.01), 10)
    if not s.available:
        assert [r["type"] for r in recs] == ["host", "host"]
    s.close()


def test_close_releases_nvml(fake_nvml):
    m = fake_nvml()
    s = GpuSampler()
    s.close()
    s.close()
    assert m.state["shutdown"] == 1 and not s.available and s.sample(0) == []


# ------------------------------------------------------------------ the budget's memory from NVML (issue 22)


def test_the_budget_takes_the_gpu_total_nvml_reads_never_a_default(fake_nvml):
    """The header's NVML reading (GpuSampler.environment) is what the budget divides when no --gpu-gib is given:
    the total of the GPU the run uses, one size for several GPUs, never a guess between sizes."""
    from tui.core.budget.inputs import BudgetInputs
    from tui.core.budget.memory import MemoryMissing, gpu_for_budget, resolve

    fake_nvml(devices=[("NVIDIA H200", 141 * GIB, 20 * GIB, 37)])
    header = {"target": {"url": "http://127.0.0.1:8000"}, "environment": {"gpu": GpuSampler().environment()}}
    total, label = gpu_for_budget(header)
    assert total == 141 * GIB and label == "GPU 141.00 GiB: NVML total of device 0 (NVIDIA H200)"
    res = resolve(MemoryMissing(BudgetInputs(params=8e9, max_seq=8192), "flags: --params"), header)
    assert res.budget is not None and res.budget.inputs.gpu_gib == 141.0  # not the teaching case's 24
    fake_nvml(devices=[("NVIDIA H200", 141 * GIB, 1 * GIB, 0), ("NVIDIA L4", 24 * GIB, 1 * GIB, 0)])
    header["environment"]["gpu"] = GpuSampler().environment()
    total, why = gpu_for_budget(header)
    assert total is None and "different" in why and "NVIDIA L4" in why
    # no NVML at all: the reason travels, no size
    fake_nvml(init_error=12)
    header["environment"]["gpu"] = GpuSampler().environment()
    total, why = gpu_for_budget(header)
    assert total is None and "NVML library not found" in why

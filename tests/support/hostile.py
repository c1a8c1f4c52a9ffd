"""Hostile strings, a hostile server and a hostile record file (issue 36 finding 3: every string from outside is data).

``PAYLOADS``: the strings a server or a record file may carry to attack a reader's terminal, console, markdown or page:
ESC sequences that clear the screen and set the window title, an OSC-8 hyperlink, a CR/LF that forges a line, BEL,
an 8-bit CSI, bidi overrides and line separators, Rich markup and a trailing ``[`` (which crashed the replay console),
HTML that runs when markdown is rendered (``<img onerror>``, ``<svg onload>``, ``<script>``), ``<!--`` and
``</script>`` (which ended or invalidated the page's chart data), markdown links/images/table pipes.

``HostileServer``: an OpenAI-compatible server on 127.0.0.1 whose model id (``/v1/models``), ``/props`` build string,
model path and quantisation, ``/version``, ``/metrics`` labels and error bodies carry the payloads; it streams short
answers (every ``fail_every``-th request: HTTP 500 with a payload body).

``hostile_header_fields(h)`` / ``hostile_record_file(path)``: a record file whose every free-text field (url, model,
GPU name, dataset name, source fields, server facts, error_detail ...) carries a payload.

``control_bytes(text)`` / ``active_html(text)``: what the tests assert is absent from an output.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.support.json_reply import send_json

#: the forged line each payload tries to plant at the start of a line of output
FORGED = "FORGED: PASS"

PAYLOADS = (
    "\x1b[2J\x1b[H\x1b]0;owned-title\x07title",                         # clear screen, home, window title
    "\x1b]8;;http://evil.example/\x1b\\click-me\x1b]8;;\x1b\\",          # OSC-8 hyperlink
    f"ok\r\n{FORGED}\rx\nx",                                            # CR/LF forging lines
    "\x9b31mred\x9b0m\x07\x08\x7f\u2028\u2029\u202egnp.exe\u200b",     # 8-bit CSI, BEL, BS, DEL, separators, bidi
    "[bold red]markup[/] [link=http://evil.example]x[/link] gpu[",      # Rich markup, ends in "["
    "<img src=x onerror=alert(1)><svg onload=alert(2)><script>alert(3)</script>",
    "<!-- x --></script><script>alert(4)</script>",
    "a|b`code`*em*_u_ [link](http://evil.example) ![img](http://evil.example/i.png) # h\\",
)

#: one string carrying them all (a field that holds only one value gets every attack at once); ends in "["
ALL = " ".join(PAYLOADS) + " ["


def payload(tag: str) -> str:
    """``ALL`` with a label in front (so a test can tell which field reached an output)."""
    return f"{tag}:{ALL}"


# ------------------------------------------------------------------ what must never reach an output

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def control_bytes(text: str, *, allow_newline: bool = True) -> list[str]:
    """The control/format characters in ``text`` (``\\n`` allowed unless told; ``\\t`` never)."""
    found = _CONTROL.findall(text)
    if not allow_newline and "\n" in text:
        found.append("\n")
    return found


#: a tag or attribute an HTML renderer would act on (in markdown or a page body)
_ACTIVE_HTML = re.compile(r"<\s*/?\s*(img|svg|script|iframe|a|object|embed|style|link|meta)\b|\bon\w+\s*=|<!--",
                          re.IGNORECASE)


def active_html(text: str) -> list[str]:
    return [m.group(0) for m in _ACTIVE_HTML.finditer(text)]


#: markdown that makes a link or an image (not escaped): [x](y) / ![x](y) / <http://...>
_ACTIVE_MD = re.compile(r"(?<!\\)!?(?<!\\)\[[^\]\n]*(?<!\\)\]\(|<https?://")


def active_markdown(text: str) -> list[str]:
    return [m.group(0) for m in _ACTIVE_MD.finditer(text)]


def forged_lines(text: str) -> list[str]:
    """Lines of ``text`` that begin with the forged marker (a CR/LF in a field reached the output raw)."""
    return [ln for ln in re.split(r"[\r\n]", text) if ln.lstrip().startswith(FORGED)]


def problems(text: str, *, markdown: bool = False, allow_newline: bool = True) -> list[str]:
    """Everything wrong with one output: control characters, forged lines, and for markdown active HTML/links."""
    out = [f"control {c!r}" for c in sorted(set(control_bytes(text, allow_newline=allow_newline)))]
    out += [f"forged line {ln!r}" for ln in forged_lines(text)[:3]]
    if markdown:
        out += [f"active html {t!r}" for t in sorted(set(active_html(text)))]
        out += [f"active markdown {t!r}" for t in sorted(set(active_markdown(text)))]
    return out


# ------------------------------------------------------------------ the hostile server


def _prom_label(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class HostileServer:
    """``with HostileServer() as hs:`` ``hs.url`` (``http://127.0.0.1:PORT``). Streams ``tokens`` tokens per
    request; every ``fail_every``-th completion (1-based; 0: never) is an HTTP 500 whose JSON body carries a payload."""

    def __init__(self, *, tokens: int = 3, fail_every: int = 5, engine: str = "llamacpp") -> None:
        self.tokens, self.fail_every, self.engine = tokens, fail_every, engine
        self.requests = 0
        self._lock = threading.Lock()
        me = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a) -> None:  # quiet
                pass

            def setup(self) -> None:
                super().setup()
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _text(self, code: int, text: str, ctype: str) -> None:
                body = text.encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                p = self.path.split("?")[0]
                if p == "/v1/models":
                    send_json(self, 200, {"object": "list", "data": [
                        {"id": payload("model-id"), "object": "model", "owned_by": me.engine, "max_model_len": 4096}]})
                elif p == "/props" and me.engine == "llamacpp":
                    send_json(self, 200, {"build_info": payload("build"), "model_path": payload("model-path"),
                                          "model_ftype": payload("ftype"), "total_slots": 4,
                                          "default_generation_settings": {"n_ctx": 4096}})
                elif p == "/version":
                    send_json(self, 200, {"version": payload("version")})
                elif p == "/metrics":
                    lab = _prom_label(payload("metric-label"))
                    self._text(200, (
                        "# TYPE vllm:num_requests_waiting gauge\n"
                        f'vllm:num_requests_waiting{{model_name="{lab}"}} 0\n'
                        "# TYPE vllm:num_requests_running gauge\n"
                        f'vllm:num_requests_running{{model_name="{lab}"}} 1\n'
                        "# TYPE vllm:cache_config_info gauge\n"
                        f'vllm:cache_config_info{{block_size="16",num_gpu_blocks="1000",cache_dtype="{lab}",'
                        f'engine="{lab}"}} 1\n'), "text/plain; version=0.0.4")
                else:
                    send_json(self, 404, {"error": {"message": payload("404")}})

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                try:
                    req = json.loads(self.rfile.read(n) or b"{}")
                except ValueError:
                    req = {}
                if self.path == "/tokenize" or not isinstance(req, dict):
                    send_json(self, 404, {"error": {"message": payload("tokenize")}})
                    return
                with me._lock:
                    me.requests += 1
                    k = me.requests
                if me.fail_every and k % me.fail_every == 0:
                    send_json(self, 500, {"error": {"message": payload("error-body"), "type": payload("error-type"),
                                                    "code": 500}})
                    return
                chat = self.path.startswith("/v1/chat/completions")
                if not req.get("stream"):
                    send_json(self, 200, {"choices": [{"index": 0, "finish_reason": "stop",
                                                       "message": {"role": "assistant", "content": payload("answer")}}],
                                          "usage": {"prompt_tokens": 8, "completion_tokens": 3}})
                    return
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for i in range(me.tokens):
                        last = i == me.tokens - 1
                        piece = {"delta": {"content": f"t{i} "}} if chat else {"text": f"t{i} "}
                        obj: dict = {"model": payload("stream-model"),
                                     "choices": [{"index": 0, **piece, "finish_reason": "length" if last else None}]}
                        if last and (req.get("stream_options") or {}).get("include_usage"):
                            obj["usage"] = {"prompt_tokens": 8, "completion_tokens": me.tokens}
                        self._chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")
                    self._chunk(b"data: [DONE]\n\n")
                    self._chunk(b"")
                except (BrokenPipeError, ConnectionResetError):
                    pass

        class _Server(ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request, client_address) -> None:
                pass

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)


# ------------------------------------------------------------------ a hostile record file


def poison(obj, tag: str = "f"):
    """``obj`` with every string (keys kept) replaced by a labelled payload, recursively; numbers kept."""
    if isinstance(obj, str):
        return payload(tag)
    if isinstance(obj, dict):
        return {k: poison(v, f"{tag}.{k}") for k, v in obj.items()}
    if isinstance(obj, list):
        return [poison(v, f"{tag}[{i}]") for i, v in enumerate(obj)]
    return obj


def write_jsonl(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


T0 = 1_800_000_000.0


def hostile_header(*, synthetic: bool = False, levels=(1, 2, 4), started_at: float = T0) -> dict:
    """A run header whose every free-text field carries a labelled payload (the structural fields, which the
    reader checks, stay valid: type, schema, mode, source kind ...)."""
    from tui.core.records import run_header

    p = payload
    return run_header(
        target={"url": "http://127.0.0.1:8000/" + p("url").replace(" ", "%20"), "model": p("model"), "api": "chat",
                "endpoint": p("endpoint")},
        load={"mode": "closed", "levels": list(levels), "level_unit": "concurrency", "arrival": None,
              "input_tokens": {"min": 128, "max": 128, "given": p("input-given")},
              "output_tokens": {"min": 20, "max": 20, "given": p("output-given")}, "warmup": 0,
              "requests": 120, "duration": None, "rounds": 1, "seed": 7, "connection": p("connection"),
              "prompt_builder": {"method": p("prompt-method"), "chars_per_token": 4.0},
              "workers": {"count": 1, "kind": p("workers-kind")},
              "dataset": {"name": p("dataset-name"), "sha256": p("dataset-sha"), "format": p("dataset-format")},
              "cache_policy": {"cache_prompt": False, "why": p("cache-why")}},
        environment={"python": p("python"), "httpx": p("httpx"), "servewatch": p("servewatch"), "os": p("os"),
                     "machine": p("machine"),
                     "server": {"engine": p("engine"), "build": p("build"), "model": p("server-model"),
                                "quantization": p("quant"), "models": [p("models0")], "slots": 4,
                                "n_ctx_per_slot": 2048},
                     "gpu": {"gpu": "nvidia", "driver_version": p("driver"), "cuda_version": p("cuda"),
                             "devices": [{"index": 0, "name": p("gpu-name") + "[", "memory_total": 80 * 2**30}]}},
        synthetic=synthetic, started_at=started_at, tool_version=p("tool-version"),
        headers={p("header-name").replace("\n", " "): "<redacted>"},
        run_id=p("run-id"),
        source={"kind": "run", "tool": p("source-tool"), "version": p("source-version"), "file": p("source-file"),
                "sha256": p("source-sha"), "derived": [p("derived")]},
        slo={"ttft_ms": 1000.0, "ttft_of": "answer", "in_force": ["TTFT"], "text": p("slo-text"), "target": 0.95},
        server_capacity={"engine": "llamacpp", "sequences": 4, "tokens_per_sequence": 2048, "total_tokens": 8192,
                         "note": p("capacity-note"), "source": p("capacity-source")},
    )


def hostile_records(*, levels=(1, 2, 4), n: int = 125, fail_every: int = 0, synthetic: bool = False,
                    started_at: float = T0, model_field: bool = True) -> list[dict]:
    """A whole hostile run: the header above, GPU and queue samples with payload names, ``n`` requests a slot per
    level (0.5 s apart: 125 give a 62 s window), every ``fail_every``-th failed with a payload ``error_detail``."""
    lines = [hostile_header(synthetic=synthetic, levels=levels, started_at=started_at)]
    t = started_at
    for lvl in levels:
        lines.append({"type": "step", "t": t, "event": "start", "level": lvl, "round": 1, "mode": "closed"})
        for i in range(n * int(lvl)):
            ts = t + (i // int(lvl)) * 0.5 + (i % int(lvl)) * 0.001
            if i % 20 == 0:
                lines.append({"type": "gpu", "t": ts, "device": 0, "name": payload("gpu-sample") + "[",
                              "memory_used": 40 * 2**30, "memory_total": 80 * 2**30, "utilization": 50})
                lines.append({"type": "queue", "t": ts, "source": "llamacpp", "waiting": 0, "running": int(lvl),
                              "note": payload("queue-note")})
            if fail_every and i % fail_every == 1:
                lines.append({"type": "request", "id": f"{lvl}-{i}", "t_sent": ts, "t_first_token": None,
                              "t_end": ts + 0.3, "complete": False, "error": "http_5xx", "http_status": 500,
                              "error_detail": payload("error-detail"), "level": lvl, "round": 1, "output_tokens": 0})
                continue
            tf = ts + 0.1
            lines.append({"type": "request", "id": f"{lvl}-{i}", "t_sent": ts, "t_first_token": tf,
                          "t_end": tf + 0.02 * 19, "complete": True, "error": None, "level": lvl, "round": 1,
                          "output_tokens": 20, "finish_reason": "length", "t_last_token": tf + 0.02 * 19,
                          "output_chunks": 20})
        t += n * 0.5 + 5
        lines.append({"type": "step", "t": t - 4, "event": "end", "level": lvl, "round": 1, "mode": "closed",
                      "saturated": False})
    # lines a reader refuses, whose reasons may quote what they hold
    lines.append({"type": payload("unknown-type"), "t": t})
    lines.append({"type": "request", "id": payload("bad-id"), "t_sent": payload("bad-t")})
    return lines

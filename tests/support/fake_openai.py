"""A small OpenAI-compatible server on 127.0.0.1 for the quality CLI's tests: it answers each case of a generated
suite with its reference answer (or wrongly, for the categories named), states a context in ``/props`` like
llama-server and refuses a prompt longer than it with llama-server's HTTP 400 ``exceed_context_size_error``.
Right here because a real server will not answer exactly right or wrong on demand."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.engine_pages import pages
from tests.support.json_reply import send_json
from tui.core import quality as Q


class FakeOpenAI:
    def __init__(self, qset: Q.QualitySet, *, n_ctx: int | None = 2048, wrong: frozenset[str] = frozenset(),
                 chars_per_token: float = 4.0, engine: str | None = None, served: str = "fake-model",
                 params: int | None = None) -> None:
        refs = Q.reference_answers(qset)
        self.answers = {json.dumps(list(c.messages or ()), sort_keys=True): (c.category, refs.get(c.id, ""))
                        for c in qset.cases}
        self.n_ctx, self.wrong, self.cpt = n_ctx, wrong, chars_per_token
        self.requests = 0
        # engine=...: that engine's self-description (tests.support.engine_pages) instead of the llama.cpp-like default
        self.described = {} if engine is None else pages(engine, served, params=params, ctx=n_ctx or 2048)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a) -> None:  # quiet
                pass

            def _send(self, code: int, obj: dict) -> None:
                send_json(self, code, obj)

            def do_GET(self) -> None:
                if fake.described:
                    page = fake.described.get(self.path.split("?", 1)[0])
                    self._send(200, page) if page is not None else self._send(404, {"error": "not found"})
                elif self.path.startswith("/v1/models"):
                    self._send(200, {"data": [{"id": "fake-model", "owned_by": "llamacpp"}]})
                elif self.path.startswith("/props") and fake.n_ctx is not None:
                    self._send(200, {"default_generation_settings": {"n_ctx": fake.n_ctx}, "total_slots": 1,
                                     "model_ftype": "Q4_K - Medium", "model_path": "/m/fake.gguf"})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(n) or b"{}")
                if self.path == "/tokenize":  # no tokenizer: the suite is built at the 4-characters estimate
                    self._send(404, {"error": "not found"})
                    return
                fake.requests += 1
                msgs = req.get("messages") or []
                prompt_tokens = round(sum(len(m.get("content", "")) for m in msgs) / fake.cpt)
                if fake.n_ctx is not None and prompt_tokens + int(req.get("max_tokens") or 0) > fake.n_ctx:
                    self._send(400, {"error": {"code": 400, "type": "exceed_context_size_error",
                                               "message": "the request exceeds the available context size",
                                               "n_prompt_tokens": prompt_tokens, "n_ctx": fake.n_ctx}})
                    return
                cat, ref = fake.answers.get(json.dumps(msgs, sort_keys=True), ("", "unknown"))
                text = "no idea" if cat in fake.wrong else ref
                self._send(200, {"choices": [{"message": {"role": "assistant", "content": text},
                                              "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 3}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

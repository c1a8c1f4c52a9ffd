"""One JSON reply from a ``BaseHTTPRequestHandler`` (the in-test OpenAI-compatible servers share it)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler


def send_json(handler: BaseHTTPRequestHandler, code: int, obj: dict) -> None:
    """Status ``code`` with ``obj`` as a JSON body (Content-Length set, so keep-alive clients read it whole)."""
    body = json.dumps(obj).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)

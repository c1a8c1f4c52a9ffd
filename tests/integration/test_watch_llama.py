"""Watch mode against the real peer (llama-server --metrics --slots, Gemma 3 270M).

llama.cpp exports no TTFT histogram: watch shows its queue (deferred) and processing gauges and
says "no TTFT histogram: use --probe-rate". The server's own counters prove that watch without a
probe sent it nothing; with a probe the same counters move (so the check can fail)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import httpx

COUNTERS = ("llamacpp:n_decode_total", "llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total")


def _counters(base: str) -> dict:
    from tui.sources.watch import parse_labeled

    text = httpx.get(base + "/metrics", timeout=10).text
    got = {}
    for name, _labels, v in parse_labeled(text):
        if name in COUNTERS or name in ("llamacpp:requests_processing", "llamacpp:requests_deferred"):
            got[name] = v
    return got


def _main(argv):
    from tui.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_watch_llama_shows_queue_and_sends_nothing(llama_server):
    base = llama_server.base_url.rstrip("/")
    if base.endswith("/v1"):
        base = base[:-3]
    before = _counters(base)
    assert set(COUNTERS) <= set(before), before
    assert before["llamacpp:requests_processing"] == 0  # idle: nothing of another test still running
    code, out, err = _main(["watch", "--metrics-url", base + "/metrics", "--once", "--window-minutes", "0.02",
                            "--json"])
    after = _counters(base)
    assert code == 3, err
    doc = json.loads(out)
    assert doc["engine"] == "llamacpp"
    w = doc["window"]
    assert w["waiting"] == 0 and w["running"] == 0  # queue (deferred) and processing shown, as numbers
    assert w["ttft"] == "not exposed by this server"
    assert "no TTFT histogram: use --probe-rate" in doc["verdict"]["reason"]
    assert {k: after[k] for k in COUNTERS} == {k: before[k] for k in COUNTERS}

    code, out, _err = _main(["watch", "--metrics-url", base + "/metrics", "--once", "--window-minutes", "0.01"])
    assert "no TTFT histogram: use --probe-rate" in out and "waiting 0" in out and "running 0" in out


def test_watch_llama_probe_moves_the_counters(llama_server, tmp_path):
    """The same counters do move when the canary is on: the check above can fail."""
    base = llama_server.base_url.rstrip("/")
    if base.endswith("/v1"):
        base = base[:-3]
    before = _counters(base)
    rec = tmp_path / "w.jsonl"
    code, out, err = _main(["watch", "--metrics-url", base + "/metrics", "--url", base, "--probe-rate", "2",
                            "--headless", "--duration", "2", "--interval", "0.5", "--json", "--record", str(rec)])
    after = _counters(base)
    assert code == 3, err
    doc = json.loads(out)
    reqs = [json.loads(x) for x in rec.read_text().splitlines() if '"type":"request"' in x]
    assert doc["canary"]["sent"] == len(reqs) >= 1
    assert after["llamacpp:n_decode_total"] > before["llamacpp:n_decode_total"]
    # no TTFT histogram: with a canary the verdict comes from the canary's own requests (too few here)
    assert "verdict from the canary" in doc["verdict"]["reason"] and doc["verdict"]["state"] == "INSUFFICIENT_WINDOW"
    # issue 37: `report` of the recording judges it exactly as the watch did (the canary's requests), never "no TTFT
    # histogram: use --probe-rate" on a file that holds the canary
    code2, out2, err2 = _main(["report", str(rec), "--json"])
    rep = json.loads(out2)
    assert rep["verdict"]["state"] == doc["verdict"]["state"] and code2 == code, err2
    assert "verdict from the canary" in rep["verdict"]["reason"]
    assert "use --probe-rate" not in rep["verdict"]["reason"]

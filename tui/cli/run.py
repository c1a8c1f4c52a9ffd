"""`servewatch run` (headless load test, recorded, then the report) and the flags `live` shares.

    servewatch run --url http://127.0.0.1:8080 --concurrency 1,2,4,8 --output-tokens 64 --ignore-eos
    servewatch run --url https://host/v1 --rate 0.5,1,2 --arrival gamma --burstiness 2 --duration 300

Exit codes: those of the report (0 PASS, 1 FAIL, 3 insufficient/undecided); 2 for bad usage or a
server that cannot be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from tui.argtypes import non_negative_int, positive_float, positive_int
from tui.sources.loadgen import ConfigError, LoadConfig, SetupError, redact_url, run_load

EXIT_USAGE = 2


# ------------------------------------------------------------------ argument types


def _levels(kind: type):
    def parse(text: str) -> list[float]:
        out = []
        for part in str(text).split(","):
            part = part.strip()
            if not part:
                continue
            try:
                v = kind(part)
            except ValueError:
                raise argparse.ArgumentTypeError(f"not a {'whole number' if kind is int else 'number'}: {part!r}")
            if not v > 0 or v != v or v == float("inf"):
                raise argparse.ArgumentTypeError(f"levels must be > 0, got {part!r}")
            out.append(float(v))
        if not out:
            raise argparse.ArgumentTypeError("give at least one level, e.g. 1,2,4,8")
        return out

    return parse


def token_range(text: str) -> tuple[int, int]:
    """``N`` or ``MIN-MAX`` (inclusive, uniform)."""
    s = str(text).strip()
    lo_s, sep, hi_s = s.partition("-")
    try:
        lo = int(lo_s)
        hi = int(hi_s) if sep else lo
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or MIN-MAX, got {text!r}") from None
    if lo < 1 or hi < lo:
        raise argparse.ArgumentTypeError(f"expected 1 <= MIN <= MAX, got {text!r}")
    return lo, hi


def header_arg(text: str) -> tuple[str, str]:
    name, sep, value = str(text).partition(":")
    name = name.strip()
    if not sep or not name or any(c in name for c in " \t\r\n"):
        raise argparse.ArgumentTypeError("expected 'Name: value'")  # the value is never echoed
    return name, value.strip()


# ------------------------------------------------------------------ flags


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `servewatch run` and `servewatch live` (load, connection, acceptance, budget)."""
    t = parser.add_argument_group("target")
    t.add_argument("--url", required=True, help="server base URL, with or without a trailing /v1")
    t.add_argument("--model", default=None, help="model name (default: the first id of /v1/models)")
    t.add_argument("--api", choices=("chat", "completions"), default="chat",
                   help="/v1/chat/completions (default) or /v1/completions")

    g = parser.add_argument_group("load")
    m = g.add_mutually_exclusive_group(required=True)
    m.add_argument("--concurrency", type=_levels(int), metavar="LIST",
                   help="closed loop: in-flight requests per step, a ramp such as 1,2,4,8")
    m.add_argument("--rate", type=_levels(float), metavar="LIST",
                   help="open loop: arrivals per second per step, such as 0.5,1,2")
    g.add_argument("--arrival", choices=("poisson", "constant", "gamma"), default="poisson",
                   help="open loop arrival process (default poisson)")
    g.add_argument("--burstiness", type=float, default=1.0, metavar="X",
                   help="gamma arrivals: coefficient of variation of the gaps (shape 1/X^2); 1 = Poisson, "
                        ">1 burstier (default 1)")
    g.add_argument("--input-tokens", type=token_range, default=(128, 128), metavar="N|MIN-MAX",
                   help="prompt length in tokens, fixed or uniform MIN-MAX (default 128)")
    g.add_argument("--output-tokens", type=token_range, default=(64, 64), metavar="N|MIN-MAX",
                   help="max_tokens per request, fixed or uniform MIN-MAX (default 64)")
    g.add_argument("--ignore-eos", action="store_true",
                   help="send ignore_eos: true so every answer has exactly max_tokens tokens")
    g.add_argument("--warmup", type=non_negative_int, default=0, metavar="N",
                   help="requests before the first step, recorded as phase warmup (default 0)")
    g.add_argument("--requests", type=positive_int, default=None, metavar="N",
                   help="requests per step (default: each step runs until its verdict is PASS or FAIL, "
                        "see --max-step-seconds)")
    g.add_argument("--duration", type=positive_float, default=None, metavar="SECONDS",
                   help="seconds per step (with --requests: whichever comes first)")
    g.add_argument("--max-step-seconds", type=positive_float, default=None, metavar="S",
                   help="a step run until decided (the default without --requests/--duration, and every sweep "
                        "step) ends UNDECIDED after S seconds; default: the minimum window + 300 s (900 s for "
                        "the 10-min window). Shorter than the window, a step cannot PASS.")
    g.add_argument("--rounds", type=positive_int, default=1, metavar="N", help="repeat the ramp N times")
    g.add_argument("--stop-on-fail", action="store_true", help="end the ramp at the first step whose verdict is FAIL")
    g.add_argument("--seed", type=int, default=0, help="seed for lengths and arrivals (default 0)")

    o = parser.add_argument_group("recording and telemetry")
    o.add_argument("--record", default=None, metavar="FILE",
                   help="record file (default servewatch-YYYYmmdd-HHMMSS.jsonl here); appended to")
    o.add_argument("--metrics-url", default=None, metavar="URL", help="Prometheus endpoint (default URL/metrics)")
    o.add_argument("--metrics-interval", type=positive_float, default=1.0, metavar="S",
                   help="seconds between metrics/GPU samples (default 1)")
    o.add_argument("--no-gpu", action="store_true", help="do not sample NVML/host telemetry")

    c = parser.add_argument_group("connection")
    c.add_argument("--connect-timeout", type=positive_float, default=10.0, metavar="S", help="default 10")
    c.add_argument("--read-timeout", type=positive_float, default=300.0, metavar="S",
                   help="longest silence allowed, queueing included (default 300)")
    c.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                   help="environment variable holding the API key, sent as Authorization: Bearer "
                        "(default OPENAI_API_KEY; never recorded)")
    c.add_argument("--header", dest="headers", action="append", type=header_arg, default=[], metavar="'K: V'",
                   help="extra request header, repeatable (values never recorded)")
    c.add_argument("--insecure", action="store_true", help="do not verify TLS certificates (recorded in the header)")

    from tui.report_cli import add_acceptance_arguments

    add_acceptance_arguments(parser)
    try:
        from tui.budget_cli import add_budget_arguments

        add_budget_arguments(parser)
    except ImportError:
        pass


def add_live_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `servewatch live`: those of `run` plus every console flag `replay` takes
    (--theme, --themes-dir, --export-dir, --rolling-seconds, --rolling-requests)."""
    add_run_arguments(parser)
    from tui.replay_cli import add_console_arguments, add_rolling_arguments

    add_console_arguments(parser)
    add_rolling_arguments(parser)


def config_from_args(args: argparse.Namespace) -> LoadConfig:
    """The LoadConfig the flags describe (raises ConfigError on bad combinations)."""
    closed = getattr(args, "concurrency", None) is not None
    levels = args.concurrency if closed else getattr(args, "rate", None)
    if not levels:
        raise ConfigError("give --concurrency LIST or --rate LIST")
    cfg = LoadConfig(
        url=args.url,
        model=getattr(args, "model", None),
        api=getattr(args, "api", "chat"),
        mode="closed" if closed else "open",
        levels=list(levels),
        arrival=getattr(args, "arrival", "poisson"),
        burstiness=float(getattr(args, "burstiness", 1.0)),
        input_tokens=tuple(getattr(args, "input_tokens", (128, 128))),
        output_tokens=tuple(getattr(args, "output_tokens", (64, 64))),
        ignore_eos=bool(getattr(args, "ignore_eos", False)),
        warmup=int(getattr(args, "warmup", 0) or 0),
        requests=getattr(args, "requests", None),
        duration=getattr(args, "duration", None),
        rounds=int(getattr(args, "rounds", 1) or 1),
        stop_on_fail=bool(getattr(args, "stop_on_fail", False)),
        record=getattr(args, "record", None),
        metrics_url=getattr(args, "metrics_url", None),
        metrics_interval=float(getattr(args, "metrics_interval", 1.0)),
        gpu=not getattr(args, "no_gpu", False),
        connect_timeout=float(getattr(args, "connect_timeout", 10.0)),
        read_timeout=float(getattr(args, "read_timeout", 300.0)),
        api_key_env=getattr(args, "api_key_env", "OPENAI_API_KEY"),
        headers=list(getattr(args, "headers", None) or []),
        insecure=bool(getattr(args, "insecure", False)),
        seed=int(getattr(args, "seed", 0) or 0),
        slo_ttft_ms=float(getattr(args, "slo_ttft_ms", 1000.0)),
        target=float(getattr(args, "target", 0.95)),
        alpha=float(getattr(args, "alpha", 0.05)),
        min_window_minutes=float(getattr(args, "min_window_minutes", 10.0)),
        min_requests=getattr(args, "min_requests", None),
        # without --requests/--duration every step runs until its verdict is PASS or FAIL (capped)
        until_decided=getattr(args, "requests", None) is None and getattr(args, "duration", None) is None,
        max_step_seconds=getattr(args, "max_step_seconds", None),
        budget=budget_record_from_args(args),
    )
    cfg.validate()
    return cfg


def budget_record_from_args(args: argparse.Namespace) -> dict | None:
    """The budget JSON (``servewatch budget --json``) when budget inputs were given, else None (no budget is
    made up for a run). Raises ConfigError on bad budget input."""
    try:
        from tui.budget_cli import budget_from_args, budget_given
        from tui.core.budget import budget_to_dict
    except ImportError:
        return None
    try:
        if not budget_given(args):
            return None
        result = budget_from_args(args)
    except (ValueError, OSError) as exc:
        raise ConfigError(f"bad budget: {exc}") from None
    if result is None:
        return None
    return budget_to_dict(result)


def step_plan(cfg: LoadConfig) -> str:
    """How each step ends, for the first lines of output."""
    if cfg.until_decided:
        cap = cfg.step_duration or 0.0
        text = f"each step until PASS or FAIL, at most {cap:g} s"
        if cfg.step_requests is not None:
            text += f" or {cfg.step_requests} requests"
        if cap < cfg.min_window_minutes * 60.0:
            text += (f" (shorter than the {cfg.min_window_minutes:g}-min window: no step can PASS; "
                     "raise --max-step-seconds)")
        return text
    parts = []
    if cfg.step_requests is not None:
        parts.append(f"{cfg.step_requests} requests")
    if cfg.duration is not None:
        parts.append(f"{cfg.duration:g} s")
    text = "each step " + " or ".join(parts)
    if cfg.duration is not None and cfg.duration < cfg.min_window_minutes * 60.0:
        text += f" (shorter than the {cfg.min_window_minutes:g}-min window: no verdict can PASS)"
    return text


# ------------------------------------------------------------------ commands


def _print(line: str) -> None:
    print(line, flush=True)


def cmd_run(args: argparse.Namespace) -> int:
    try:
        cfg = config_from_args(args)
    except ConfigError as exc:
        print(f"servewatch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    failed = record_run(cfg)
    if failed is not None:
        return failed
    from tui.report_cli import run_report

    _print("")
    return run_report(cfg.record, args, default_budget=False)


def record_run(cfg: LoadConfig) -> int | None:
    """Run the load test described by ``cfg`` into its record file (printing progress).

    Returns None when a record file with requests was written, else an exit code."""
    from tui.sources.live import default_record_path
    from tui.sources.recorder import Recorder

    if not cfg.record:
        cfg.record = default_record_path()
    import os

    existed = os.path.exists(cfg.record)
    try:
        rec = Recorder(cfg.record)
    except OSError as exc:
        print(f"servewatch: cannot write {cfg.record}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    unit = "concurrency" if cfg.mode == "closed" else "req/s"
    _print(f"servewatch run: {redact_url(cfg.url)}, {unit} {','.join(f'{v:g}' for v in cfg.levels)}; "
           f"{step_plan(cfg)}")
    _print(f"recording to {cfg.record}")
    interrupted = False
    try:
        try:
            summary = asyncio.run(run_load(cfg, rec.write, progress=_print))
        except KeyboardInterrupt:
            interrupted = True
            summary = None
        except SetupError as exc:
            print(f"servewatch: {exc}", file=sys.stderr)
            if not existed and rec.records_written == 0:
                try:  # leave no empty record file behind
                    os.remove(cfg.record)
                except OSError:
                    pass
            return EXIT_USAGE
        except OSError as exc:  # the record file could not be written (disk full, removed folder)
            print(f"servewatch: writing {cfg.record} failed: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
    finally:
        rec.close()
    if interrupted:
        _print(f"interrupted: in-flight requests recorded as cancelled; {rec.requests_written} requests in {cfg.record}")
    else:
        _print(f"done: {summary.requests if summary else rec.requests_written} requests recorded in {cfg.record}")
        if summary and summary.stopped_early:
            _print(summary.stopped_early)
    if rec.requests_written == 0 and rec.records_written == 0:
        return EXIT_USAGE
    return None


def cmd_live(args: argparse.Namespace) -> int:
    """`servewatch live`: the console watching a live load test (recorded like `run`)."""
    from tui.sources.live import LiveSource

    try:
        cfg = config_from_args(args)
    except ConfigError as exc:
        print(f"servewatch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        from tui.budget_cli import view_budget

        budget, budget_origin = view_budget(args)  # no budget flags: unknown, never the teaching case
    except (ValueError, OSError) as exc:
        print(f"servewatch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        from tui.replay_cli import open_console
        from tui.report_cli import monitor_config_from_args
    except ImportError as exc:
        print(f"servewatch: the console is not available ({exc}); use `servewatch run`", file=sys.stderr)
        return EXIT_USAGE
    try:
        mcfg = monitor_config_from_args(args)
    except ValueError as exc:
        print(f"servewatch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    source = LiveSource(cfg)
    code = open_console(source, args, budget, mcfg, budget_origin=budget_origin)
    try:  # the terminal may be gone (the console closed on SIGHUP or a closed input)
        print(f"record file: {source.record_path}", flush=True)
        if source.error:
            print(f"servewatch: {source.error}", file=sys.stderr)
    except OSError:
        pass
    return 3 if code is None else int(code)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="servewatch run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(p)
    args = p.parse_args(argv)
    return cmd_run(args)


if __name__ == "__main__":
    raise SystemExit(main())

"""The shape of tui/core: packages whose modules import each other by module path, and the old public names of the
record format and of watch mode still importable from their packages (outside callers use them)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tests.support.paths import REPO

ROOT = REPO
CORE = ROOT / "tui" / "core"


def _packages() -> list[Path]:
    return sorted(p.parent for p in CORE.rglob("__init__.py") if p.parent != CORE)


def _imported(tree: ast.AST, module: str, is_init: bool) -> list[tuple[int, str]]:
    """(line, imported module) for every import in a module's tree, relative ones resolved."""
    out: list[tuple[int, str]] = []
    base = module if is_init else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                src = ".".join(parts + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            out.append((node.lineno, src))
    return out


@pytest.mark.parametrize("pkg", _packages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_modules_inside_a_core_package_never_import_through_its_init(pkg: Path) -> None:
    name = ".".join(pkg.relative_to(ROOT).parts)
    offenders = []
    for path in sorted(pkg.glob("*.py")):
        if path.name == "__init__.py":
            continue
        module = f"{name}.{path.stem}"
        for line, src in _imported(ast.parse(path.read_text()), module, False):
            if src == name:  # ``from tui.core.watch import x`` / ``import tui.core.watch`` inside tui.core.watch
                offenders.append(f"{path.relative_to(ROOT)}:{line}: imports {src}")
    assert offenders == []


# the names outside callers (tests, sources, the CLI) imported from the single modules these packages replaced
RECORDS_NAMES = (
    "SCHEMA", "SCHEMA_VERSION", "PHASES", "ERROR_CLASSES", "KNOWN_TYPES", "RecordError", "RequestRecord", "Outcome",
    "GOOD", "SLOW", "FAILED", "EXCLUDED", "OUTCOMES", "CANCELLED", "slo_microseconds", "outcome_rule",
    "BAD_FINISH_REASONS", "contradiction", "GpuSample", "QueueSample", "HostSample", "StepRecord", "RunHeader",
    "BudgetRecord", "WatchRecord", "SealRecord", "UnknownRecord", "LineIssue", "Record", "T_MIN_EPOCH", "T_MAX_EPOCH",
    "parse_request", "parse_object", "parse_line", "iter_lines", "parse_lines", "BLOCK_BYTES", "parse_block",
    "iter_blocks", "iter_file", "read_file", "not_a_record_file", "scan_usable", "request_to_dict", "dumps",
    "source_block", "run_header",
)
WATCH_NAMES = (
    "SERVER_TTFT_LABEL", "COMPLETION_NOTE", "NO_TTFT_NOTE", "NOT_EXPOSED", "INF", "Sample", "WatchMetrics", "ENGINES",
    "detect_engine", "parse_selector", "matches", "models_seen", "Buckets", "Cumulative", "cumulative_from_samples",
    "Window", "window_between", "merge_windows", "count_of", "Bracket", "good_bracket", "share_above",
    "quantile_bracket", "fmt_quantile", "make_judge", "WatchConfig", "WatchVerdict", "queue_blocks", "WatchJudgement",
    "judge_once", "describe_window", "window_to_record", "window_from_record", "WatchState", "build_snapshot",
    "advance", "canary_text", "canary_verdict",
)
IMPORTERS_NAMES = (
    "SERVEWATCH", "LINE_FORMATS", "DOCUMENT_FORMATS", "IMPORTABLE", "UNUSABLE", "TOOL_NAMES", "detect_object",
    "detect_format", "sniff_keys", "fmt_from_lines", "unusable_reason", "convert_text", "AXIS_EPOCH", "AXIS_NONE",
    "AXIS_RELATIVE", "EntryIssue", "ImportResult",
)


@pytest.mark.parametrize(("package", "names"), [("tui.core.records", RECORDS_NAMES), ("tui.core.watch", WATCH_NAMES),
                                                ("tui.core.importers", IMPORTERS_NAMES)])
def test_a_package_re_exports_the_names_of_the_module_it_replaced(package: str, names: tuple[str, ...]) -> None:
    mod = importlib.import_module(package)
    missing = [n for n in names if n not in getattr(mod, "__all__", ())]
    assert missing == []
    assert all(hasattr(mod, n) for n in mod.__all__)


def test_the_watch_record_is_read_by_the_record_reader_with_the_watch_pipelines_own_definition() -> None:
    import tui.core.records.parse as parse
    import tui.core.records.watch as watch_record
    import tui.core.watch as watch

    assert parse.window_from_record is watch_record.window_from_record is watch.window_from_record
    assert watch.Window is watch_record.Window

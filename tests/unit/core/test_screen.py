"""issue 40: the screening table (``tui.core.screen``) against budgets computed here by hand, and the device table
(``tui.core.devices``): its parsing, its name matching and the file servewatch ships."""

from __future__ import annotations

import csv
import io
import math

import pytest

from tui.core.budget.arithmetic import compute_budget
from tui.core.budget.inputs import BudgetInputs
from tui.core.devices import DeviceError, parse_devices, resolve
from tui.core.screen import (
    CSV_KEYS,
    JSON_KEYS,
    Axes,
    GridTooLarge,
    Memory,
    ModelSpec,
    grid_size,
    screen,
    screen_csv,
    screen_doc,
)
from tui.resources import device_table_path

GIB = 2**30


def _teaching(**fields) -> BudgetInputs:
    return BudgetInputs(**{k: v for k, v in fields.items() if v is not None})


TEACHING = ModelSpec("teaching-7B", "teaching case (7B)", _teaching)


def _axes(**kw) -> Axes:
    base = {"models": (TEACHING,), "memories": (Memory("24 GiB", 24.0),)}
    base.update(kw)
    return Axes(**base)


def _by(s, **want):
    rows = [r for r in s.rows if all(getattr(r.inputs, k) == v for k, v in want.items())]
    assert len(rows) == 1, (want, [r.id for r in s.rows])
    return rows[0]


def test_the_teaching_case_15_and_its_context_x2_7_are_rows_computed_by_hand():
    s = screen(_axes(max_seqs=(4096, 8192)))
    # by hand: 7e9 params x 2 B = 14,000,000,000 B of weights; 24 GiB - 3 GiB margin - weights = cache budget;
    # KV per sequence = 2 (K, V) x 32 layers x 8 heads x 128 x 2 B x tokens
    weights = 7e9 * 2
    cache = 24 * GIB - 3 * GIB - weights
    for seq, cand in ((4096, 15), (8192, 7)):
        kv = 2 * 32 * 8 * 128 * 2 * seq
        assert math.floor(cache / kv) == cand
        r = _by(s, max_seq=seq)
        assert r.fits and r.reason == "fits" and r.candidate == cand
        assert r.budget.kv_per_seq_bytes == kv
        assert r.headroom_gib == pytest.approx((24 * GIB - weights - 3 * GIB - kv) / GIB)
    assert [r.candidate for r in s.rows] == [15, 7]  # sorted by the candidate per GPU-hour
    assert s.exit_code == 0


def test_a_tp_that_does_not_divide_the_kv_heads_is_explained_and_does_not_fit():
    s = screen(_axes(tps=(1, 2, 3, 16), memories=(Memory("80 GiB", 80.0),)))
    bad = _by(s, tp=3)
    assert not bad.fits and bad.candidate == 0
    assert bad.reason.startswith("TP does not divide the KV heads: 8 KV heads over tp 3")
    assert _by(s, tp=2).fits and _by(s, tp=16).fits  # 16 GPUs hold replicas of the 8 heads: engines accept it
    assert s.rows[-1] is bad  # not fitting: last
    # tp 2: weights and KV split over 2 GPUs (by hand)
    two = _by(s, tp=2)
    assert two.budget.weights_bytes == math.ceil(7e9 * 2 / 2)
    assert two.budget.kv_per_seq_bytes == 2 * 32 * 4 * 128 * 2 * 4096
    assert two.candidate_per_gpu == two.candidate / 2


def test_each_reason_a_row_does_not_fit():
    s = screen(_axes(memories=(Memory("8 GiB", 8.0), Memory("15 GiB", 15.0), Memory("17 GiB", 17.0))))
    # 14e9 B of weights = 13.04 GiB: more than 8 GiB alone; less than 15 GiB, but not with the 3 GiB margin;
    # 17 GiB leaves 17 - 13.04 - 3 = 0.96 GiB of cache: one 4096-token sequence (0.5 GiB) fits
    assert _by_mem(s, "8 GiB").reason.startswith("weights alone exceed: 13.04 GiB of weights per GPU > 8.00 GiB")
    assert _by_mem(s, "15 GiB").reason.startswith("weights + runtime margin exceed: 13.04 GiB + 3.00 GiB")
    r17 = _by_mem(s, "17 GiB")
    assert r17.fits and r17.candidate == 1
    s2 = screen(_axes(max_seqs=(65536,), memories=(Memory("17 GiB", 17.0),)))
    r = s2.rows[0]
    assert r.reason.startswith("KV for one sequence exceeds: 8.00 GiB per 65536-token sequence > 0.96 GiB")
    assert r.headroom_gib < 0 and s2.exit_code == 1


def _by_mem(s, label):
    return next(r for r in s.rows if r.memory.label == label)


def test_every_row_is_the_budget_of_its_own_inputs():
    """The property: each row's figures are compute_budget of the row's inputs, whatever the grid."""
    s = screen(_axes(weights=("bf16", "awq", "q4_k_m"), kv_dtypes=("bf16", "fp8"), max_seqs=(1024, 32768),
                     tps=(1, 2, 4), memories=(Memory("16 GiB", 16.0), Memory("80 GiB", 80.0))))
    assert len(s.rows) == grid_size(_axes(weights=(1, 2, 3), kv_dtypes=(1, 2), max_seqs=(1, 2), tps=(1, 2, 3),
                                          memories=(Memory("a", 1.0), Memory("b", 2.0)))) == 72
    assert len({r.id for r in s.rows}) == 72
    for r in s.rows:
        b = compute_budget(r.inputs)
        assert r.budget == b
        assert r.fits == (b.fits and not r.reason.startswith("TP")) and r.candidate == (b.candidate if r.fits else 0)
    fits = [r.fits for r in s.rows]
    assert fits == sorted(fits, reverse=True)  # fitting first


def test_json_rows_carry_exactly_the_named_keys_and_csv_only_the_table():
    s = screen(_axes(max_seqs=(4096, 8192), tps=(1, 3)))
    doc = screen_doc(s)
    assert [set(r) for r in doc["candidates"]] == [set(JSON_KEYS)] * 4
    assert {d["id"] for d in doc["details"]} == {r["id"] for r in doc["candidates"]}
    rows = list(csv.DictReader(io.StringIO(screen_csv(s))))
    assert list(rows[0]) == list(CSV_KEYS) and len(rows) == 4
    assert rows[0]["memory_only_candidate"] == "15" and rows[0]["fits"] == "true"


def test_a_grid_larger_than_the_limit_is_refused_with_its_count():
    with pytest.raises(GridTooLarge, match="the grid has 12 candidates"):
        screen(_axes(max_seqs=(1, 2, 3), tps=(1, 2), memories=(Memory("a", 1.0), Memory("b", 2.0))), 10)


def test_cost_per_hour_is_the_price_times_the_gpus_and_none_without_a_price():
    s = screen(_axes(tps=(1, 2), memories=(Memory("L", 24.0, usd_per_gpu_hour=0.8), Memory("M", 24.0))))
    assert _by_mem_tp(s, "L", 2).usd_per_hour == pytest.approx(1.6)
    assert _by_mem_tp(s, "M", 1).usd_per_hour is None


def _by_mem_tp(s, label, tp):
    return next(r for r in s.rows if r.memory.label == label and r.inputs.tp == tp)


# ------------------------------------------------------------------ the device table

TABLE = """
[table]
collected = "2026-12-06"
[[device]]
name = "L4-24GB"
kind = "datacenter"
sold = "24 GB"
memory_mib = 23034
source = "s"
[[device]]
name = "L40S-48GB"
kind = "datacenter"
sold = "48 GB"
memory_mib = 46068
source = "s"
[[device]]
name = "H100-SXM-80GB"
kind = "datacenter"
sold = "80 GB"
memory_mib = 81559
source = "s"
[[device]]
name = "H100-PCIE-80GB"
kind = "datacenter"
sold = "80 GB"
memory_mib = 81559
source = "s"
[[device]]
name = "MAC-16GB"
kind = "unified"
sold = "16 GB"
memory_mib = 16384
source = "s"
gpu_share = 0.5
gpu_share_source = "an assumption for the test"
"""


def test_names_match_by_prefix_at_a_dash_and_several_of_equal_memory_are_accepted():
    t = parse_devices(TABLE)
    m = resolve(t, ["l4", "H100", "h100-sxm-80gb"])
    assert [x.device.name for x in m] == ["L4-24GB", "H100-SXM-80GB"]  # the same device once
    assert m[0].note == "--gpu l4: L4-24GB"  # never L40S-48GB
    assert "H100-SXM-80GB, H100-PCIE-80GB (the same memory)" in m[1].note
    assert resolve(t, ["L40"])[0].device.name == "L40S-48GB"


def test_an_ambiguous_or_unknown_name_is_refused_with_the_matches():
    t = parse_devices(TABLE)
    t2 = parse_devices(TABLE.replace('memory_mib = 81559\nsource = "s"\n[[device]]\nname = "MAC',
                                     'memory_mib = 81559\nsource = "s"\n[[device]]\nname = "MAC', 1)
                       .replace('name = "H100-PCIE-80GB"\nkind = "datacenter"\nsold = "80 GB"\nmemory_mib = 81559',
                                'name = "H100-PCIE-80GB"\nkind = "datacenter"\nsold = "80 GB"\nmemory_mib = 80000'))
    with pytest.raises(DeviceError, match=r"--gpu H100 matches devices of different memory: H100-SXM-80GB \(79.65 "
                                          r"GiB\), H100-PCIE-80GB \(78.12 GiB\)"):
        resolve(t2, ["H100"])
    with pytest.raises(DeviceError, match="no device of that name.*known: L4-24GB, L40S-48GB"):
        resolve(t, ["B200"])


def test_unified_memory_divides_the_assumed_share_and_says_so():
    d = resolve(parse_devices(TABLE), ["mac"])[0].device
    assert d.memory_gib == 16.0 and d.usable_gib == 8.0
    assert "ASSUMED usable by the GPU: 50.0% = 8.00 GiB (an assumption for the test)" in d.assumption()


@pytest.mark.parametrize("edit, why", [
    (lambda t: t.replace('kind = "unified"', 'kind = "phone"'), "kind must be one of"),
    (lambda t: t.replace("gpu_share = 0.5\n", ""), "unified memory needs gpu_share"),
    (lambda t: t.replace("memory_mib = 23034", "memory_mib = -1"), "memory_mib must be"),
    (lambda t: t.replace('name = "L40S-48GB"', 'name = "L4-24GB"'), "listed twice"),
    (lambda t: t.replace('name = "L4-24GB"', 'name = "L4 24GB"'), "no spaces or commas"),
    (lambda t: t + "[[device]]\nname = 3\n", "name must be a non-empty string"),
    (lambda t: t.replace("[table]", "[table"), "not valid TOML"),
])
def test_a_bad_table_is_refused_naming_the_entry(edit, why):
    with pytest.raises(DeviceError, match=why):
        parse_devices(edit(TABLE))


def test_the_shipped_table_parses_every_device_has_its_source_and_the_issues_names_resolve():
    t = parse_devices(device_table_path().read_text(encoding="utf-8"))
    assert t.collected and len(t.devices) >= 10
    kinds = {d.kind for d in t.devices}
    assert kinds == {"datacenter", "consumer", "unified"}
    for d in t.devices:
        assert d.source and "github.com" in d.source + (d.gpu_share_source or "")
        assert d.name.upper().endswith("GB") and d.sold
        if d.kind == "unified":
            assert d.gpu_share and d.gpu_share_source and "ASSUMED" in d.assumption()
    names = [m.device.name for m in resolve(t, ["H100-SXM-80GB", "L4", "RTX4090"])]
    assert names == ["H100-SXM-80GB", "L4-24GB", "RTX4090-24GB"]


def test_a_unified_memory_budget_is_held_against_the_machines_memory_not_an_nvidia_gpu():
    from tui.core.identity import budget_facts, budget_vs_served, identity_of

    table = parse_devices(TABLE)
    mac = screen(_axes(memories=(Memory("MAC-16GB", 8.0, resolve(table, ["mac"])[0].device),))).rows[0].budget
    gpu = screen(_axes(memories=(Memory("L4-24GB", 22.49, resolve(table, ["l4"])[0].device),))).rows[0].budget
    assert budget_facts(mac).unified and not budget_facts(gpu).unified

    def header(host_gib: float) -> dict:
        return {"target": {"url": "http://127.0.0.1:8080", "model": "m"},
                "environment": {"gpu": {"gpu": "none", "reason": "NVML library not found",
                                        "host": {"memory_total": int(host_gib * GIB)}}}}

    assert budget_vs_served(identity_of(header(16)), budget_facts(mac)).problems == ()
    small = budget_vs_served(identity_of(header(6)), budget_facts(mac)).problems
    assert small and "8 GiB of unified memory, the run's machine has 6.0 GiB" in small[0]
    assert "whose header says no GPU" in budget_vs_served(identity_of(header(64)), budget_facts(gpu)).problems[0]


def test_this_machine_is_a_host_device_of_its_memory_and_an_unknown_memory_is_refused():
    from tui.core.devices import THIS_MACHINE, this_machine

    d = this_machine(16 * GIB, "psutil's virtual_memory().total")
    assert d.name == THIS_MACHINE and d.kind == "host" and d.usable_gib == 16.0
    assert d.assumption().startswith("device THIS-MACHINE (host): 16.0 GiB of system memory, 16,384 MiB")
    for bad in (0, -1, True, None):
        with pytest.raises(DeviceError, match="this machine's memory is unknown"):
            this_machine(bad, "psutil: ImportError")  # type: ignore[arg-type]

"""The budget tracking of the Monitor (``BudgetTracking``): the budget given, completed or read from the file, and the GPU figures held against it."""

from __future__ import annotations

from typing import Any

from tui.core.budget import BudgetError
from tui.core.budget.memory import (
    ENGINE_KV_LABEL,
    engine_kv_space,
    engine_name,
    memory_label,
    resolve,
)
from tui.core.budgetview import (
    ORIGIN_RECORD,
    BudgetView,
    budget_from_record,
    budget_view,
)
from tui.core.monitor.config import (
    GIB,
)
from tui.core.monitor.state import MonitorState
from tui.core.records.model import BudgetRecord
from tui.core.severity import BAD, GOOD, NA, WARN, Severity
from tui.core.snapshot import (
    GpuDevice,
    GpuState,
)


class BudgetTracking(MonitorState):
    """The budget beside the measured load: a budget given without its memory completed from the run header, the
    record file's own budget record, the budget as shown, the GPU and the engine's KV memory against it."""

    def _resolve_memory(self) -> None:
        """A budget given without its memory: complete it from the run header (tui.core.budget.memory.resolve)."""
        pending = self.memory_pending
        if pending is None:
            return
        res = resolve(pending, self.header)
        self.budget, self.budget_origin, self.budget_memory = res.budget, res.origin, res.memory
        self.budget_hint = res.hint

    def _add_budget_record(self, item: BudgetRecord) -> None:
        """The record file's budget: used (verified like --budget FILE) unless one was given for this view."""
        if self.budget is not None or self.memory_pending is not None:
            given = self.budget_origin or (self.memory_pending.origin if self.memory_pending else None)
            if self.budget_origin != ORIGIN_RECORD:
                self._notes.append(f"the record file carries a budget record; the budget given ({given}) "
                                   "is shown instead")
            return
        try:
            self.budget = budget_from_record(item.data)
        except (BudgetError, ValueError, TypeError, KeyError) as exc:
            self.budget_problem = f"the record file's budget record failed verification: {str(exc)[:200]}"
            self._notes.append(self.budget_problem + "; budget unknown")
            return
        self.budget_origin = ORIGIN_RECORD
        self.budget_memory = memory_label(self.budget, ORIGIN_RECORD)

    def budget_view_now(self) -> BudgetView | None:
        """The budget as shown (``tui.core.budgetview.budget_view``), rebuilt only when what it reads changed."""
        header = self.header
        key = (id(self.budget), self.budget_origin, self.budget_problem, id(header), self.budget_hint,
               id(self.server_log))
        if key != self._budget_view_key:
            self._budget_view_key = key
            self._budget_view = budget_view(self.budget, self.budget_origin, header, self.budget_problem,
                                            memory=self.budget_memory, hint=self.budget_hint,
                                            server_log=self.server_log)
        return self._budget_view

    def _gpu_state(self) -> GpuState:
        b = self.budget
        predicted = ceiling = gpu_gib = None
        # a budget of the KV space itself (--kv-cache-gib, the engine's own) knows no GPU size nor margin: no GPU
        # figures are predicted from it (its KV ceiling is GpuState.kv_ceiling_gib)
        if b is not None and not getattr(b.inputs, "kv_space_bytes", 0):
            gpu_gib = getattr(b.inputs, "gpu_gib", None)
            ceiling = b.weights_gib + b.margin_gib + max(0.0, b.cache_budget_gib)
            st = self.current
            conc = None
            if st is not None and st.level is not None and st.mode != "open":
                conc = int(st.level)
            elif self._client_in_flight is not None:
                conc = self._client_in_flight
            if conc is not None:
                predicted = b.predicted_used_gib(conc)
        devices = []
        for dev in sorted(self._gpu):
            d = self._gpu[dev]
            used, total = d.get("used"), d.get("total")
            sev: Severity = NA
            if used is not None:
                sev = GOOD
                if predicted is not None and used > predicted:
                    sev = WARN
                if total and used >= 0.95 * total:
                    sev = BAD
            devices.append(GpuDevice(dev, d.get("name"), used, total, d.get("util"), d.get("peak"),
                                     tuple(d["series"]), sev))
        note = "" if devices else "no GPU telemetry"
        return GpuState(bool(devices), tuple(devices), predicted, ceiling, gpu_gib, note, **self._engine_kv())

    def _engine_kv(self) -> dict[str, Any]:
        """The engine's own KV memory in use: kv_cache_usage x the KV bytes it allocated (run header)."""
        b = self.budget
        out: dict[str, Any] = {"kv_ceiling_gib": None if b is None else max(0.0, b.cache_budget_gib),
                               "memory": self.budget_memory}
        if not self._kv_usage_n:
            return out
        cap = self.header.get("server_capacity") if self.header else None
        cap = cap if isinstance(cap, dict) else {}
        nbytes, _why = engine_kv_space(self.header)  # the one reading of the engine's kv_cache_memory_bytes
        allocated = None if nbytes is None else nbytes / GIB
        series = tuple(self._kv_usage_series)
        out.update(engine_kv_usage=series[-1], engine_kv_peak_usage=self._kv_usage_peak,
                   engine_kv_samples=self._kv_usage_n)
        if allocated is not None:
            peak = self._kv_usage_peak
            out.update(engine_kv_label=ENGINE_KV_LABEL.format(engine=engine_name(cap.get("engine"))),
                       engine_kv_allocated_gib=allocated, engine_kv_used_gib=series[-1] * allocated,
                       engine_kv_peak_gib=None if peak is None else peak * allocated,
                       engine_kv_series=tuple(u * allocated for u in series))
        return out

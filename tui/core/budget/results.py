"""What the budget gives (:class:`BudgetResult`, per GPU) and its "what if" :class:`Variant` rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.core.budget.inputs import BudgetInputs
from tui.core.budget.vocab import CANDIDATE_NOTE, GIB

# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One "what if" beside the base case; GiB per GPU."""

    name: str
    weights_gib: float
    kv_per_seq_gib: float
    cache_budget_gib: float
    candidate: int


@dataclass(frozen=True)
class BudgetResult:
    """The budget, per GPU.  candidate is memory-only: a number to load-test, not a limit.

    cache_budget_gib is never negative (0 when weights + margin already exceed the GPU);
    shortfall_gib says how much memory is missing for even one sequence when it does not fit.
    The *_bytes fields are the exact integers the GiB figures come from.
    """

    inputs: BudgetInputs
    weights_gib: float
    margin_gib: float
    kv_per_seq_gib: float
    cache_budget_gib: float
    candidate: int
    fits: bool
    assumptions: tuple[str, ...]
    variants: tuple[Variant, ...]
    shortfall_gib: float = 0.0
    gpu_bytes: int = 0
    weights_bytes: int = 0
    margin_bytes: int = 0
    kv_per_seq_bytes: int = 0
    cache_budget_bytes: int = 0
    kv_bytes_per_token: int = 0  # all layers, one token, per GPU, before sliding windows and blocks
    kv_tokens_per_seq: int = 0  # tokens a full-attention layer holds after block rounding

    @property
    def gpu_gib(self) -> float:
        return self.inputs.gpu_gib

    @property
    def note(self) -> str:
        return CANDIDATE_NOTE

    @property
    def verdict(self) -> str:
        if self.fits:
            return (
                f"fits: memory-only candidate {self.candidate} sequences per deployment "
                f"(a number to load-test, not a limit)"
            )
        if self.inputs.kv_space_bytes:
            return (f"does not fit: one sequence's KV cache needs {self.shortfall_gib:.2f} GiB more than the "
                    f"{self.inputs.kv_space_bytes / GIB:.3f} GiB KV space")
        return (
            f"does not fit: weights + runtime margin + one sequence's KV cache need "
            f"{self.shortfall_gib:.2f} GiB more than the {self.gpu_gib:g} GiB GPU"
        )

    def predicted_used_gib(self, concurrency: float) -> float:
        """Per-GPU memory the budget predicts at `concurrency` full-length sequences (GiB)."""
        concurrency = max(0, concurrency)
        if self.kv_per_seq_bytes or self.weights_bytes:
            used_bytes = self.weights_bytes + self.margin_bytes + concurrency * self.kv_per_seq_bytes
            return used_bytes / GIB
        return self.weights_gib + self.margin_gib + concurrency * self.kv_per_seq_gib

    @property
    def ceiling_gib(self) -> float:
        """Weights + margin + the whole cache budget (GiB per GPU)."""
        return (self.weights_bytes + self.margin_bytes + self.cache_budget_bytes) / GIB

"""The acceptance report's analysis: budget, environment, load, measured results, quality, cost, rollback, conclusion.

Pure domain, standard library only. The inputs are already-analysed snapshots (one per record
file, from the core ``Monitor``), the budget, a quality result dict and a few numbers; nothing is
read here and no statistic is recomputed: every per-level number comes from the snapshot, and the
measured capacity with what limits it from ``tui.core.capacity.measure_capacity`` (the function the
console's sweep pane and `servewatch sweep` use). Each section is one ``*_section`` function returning
plain data; ``build_acceptance(...) -> dict`` assembles the JSON document.

The package, one module per seam (each imports the ones it needs by module path, never this ``__init__``):

- ``inputs``: :class:`RunInput`, :class:`CostInputs`, the document's constants, the shared small helpers;
- ``sections``: 1. budget, 2. environment, 3. load configuration, 4. measured results (and the judged level's gap);
- ``quality_section``: 5. quality, recomputed with accept's own policy (``tui.core.quality.policy``);
- ``cost``: 6. cost; ``rollback``: 7. the burn-rate rollback rules and the user's own;
- ``document``: :func:`build_acceptance`, the whole document with 8. the conclusion;
- ``render``: the markdown (one function per section), from the document alone (the HTML page is
  ``tui.html.accept_html``, outside the core).

This ``__init__`` re-exports the public names for callers outside the package. See ``docs/acceptance.md``.
"""

from __future__ import annotations

from tui.core.acceptance.cost import (
    cost_section,
)
from tui.core.acceptance.document import (
    build_acceptance,
)
from tui.core.acceptance.inputs import (
    GIB,
    NOT_READY,
    READY,
    SCHEMA,
    CostInputs,
    RunInput,
    provenance,
)
from tui.core.acceptance.quality_section import (
    QUALITY_PHRASES,
    quality_section,
    tied_text,
)
from tui.core.acceptance.render import (
    render_markdown,
)
from tui.core.acceptance.rollback import (
    DEFAULT_BURN_RULES,
    SLO_PERIOD_HOURS,
    default_rollback_rules,
    parse_rollback_rules,
)
from tui.core.acceptance.sections import (
    budget_section,
    environment_section,
    judged_missing,
    judged_problems,
    level_row_dict,
    load_section,
    measured_section,
)
from tui.core.capacity import goodput_drop
from tui.core.levels import LevelNotInFile, combine_states, judge_level, level_key, row_mode

__all__ = [
    "CostInputs",
    "DEFAULT_BURN_RULES",
    "GIB",
    "LevelNotInFile",
    "NOT_READY",
    "QUALITY_PHRASES",
    "READY",
    "RunInput",
    "SCHEMA",
    "SLO_PERIOD_HOURS",
    "budget_section",
    "build_acceptance",
    "combine_states",
    "cost_section",
    "default_rollback_rules",
    "environment_section",
    "goodput_drop",
    "judge_level",
    "judged_missing",
    "judged_problems",
    "level_key",
    "level_row_dict",
    "load_section",
    "measured_section",
    "parse_rollback_rules",
    "provenance",
    "quality_section",
    "render_markdown",
    "row_mode",
    "tied_text",
]

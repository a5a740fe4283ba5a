"""Leader-only placement: pure filter and score functions, the stack that
composes them, and the loop that runs it (`cortex.scheduler.loop`)."""

from cortex.scheduler.filters import FILTERS, first_failure
from cortex.scheduler.model import (
    Candidate,
    GpuInfo,
    NodeLoad,
    NodeResources,
    PendingTask,
    Placement,
    RoundResult,
)
from cortex.scheduler.placement import (
    choose_node,
    exclusion_reasons,
    explain,
    order_tasks,
    schedule_round,
)
from cortex.scheduler.scores import SCORES, score_node

__all__ = [
    "FILTERS",
    "SCORES",
    "Candidate",
    "GpuInfo",
    "NodeLoad",
    "NodeResources",
    "PendingTask",
    "Placement",
    "RoundResult",
    "choose_node",
    "exclusion_reasons",
    "explain",
    "first_failure",
    "order_tasks",
    "schedule_round",
    "score_node",
]

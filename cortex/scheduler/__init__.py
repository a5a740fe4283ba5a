"""Leader-only placement: pure filter/score functions and the loop that runs them."""

from cortex.scheduler.loop import SchedulerLoop, candidates
from cortex.scheduler.placement import (
    Candidate,
    PendingTask,
    Placement,
    exclusion_reasons,
    explain,
    schedule_round,
)

__all__ = [
    "Candidate",
    "PendingTask",
    "Placement",
    "SchedulerLoop",
    "candidates",
    "exclusion_reasons",
    "explain",
    "schedule_round",
]

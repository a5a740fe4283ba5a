"""What a concurrency key's limits and a fairness weight may be, and how a
rate reads. Apply checks limits against them, and the CLI's and MCP's
argument checks and the listings read them, so they are kept where
importing them loads nothing else."""

from __future__ import annotations

# Units per token: a rate of N per minute refills N units per millisecond.
TOKEN_UNITS = 60_000
MAX_RATE_PER_MIN = 60_000_000
MAX_BURST = 100_000
MAX_RUNNING = 1_000_000
MAX_WEIGHT = 10_000
DEFAULT_WEIGHT = 1


def describe_rate(rate_per_min: int) -> str:
    """A rate as `5/s`, or `7/m` when it is not whole per second."""
    if rate_per_min % 60 == 0:
        return f"{rate_per_min // 60}/s"
    return f"{rate_per_min}/m"

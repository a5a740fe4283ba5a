"""Durations as people write them: `500ms`, `30s`, `5m`, `2h`, `1d`, and
sums such as `1h30m`."""

from __future__ import annotations

import re

from cortex.errors import InvalidArgument

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"(\d+)(ms|s|m|h|d)")


def parse_duration_ms(text: str, what: str = "duration") -> int:
    """Milliseconds of a duration such as `90s` or `1h30m`."""
    compact = text.strip().lower().replace(" ", "")
    parts = _PART.findall(compact)
    if not compact or "".join(n + u for n, u in parts) != compact:
        raise InvalidArgument(f"{what} {text!r} must read like 30s, 5m, 2h, 1d or 1h30m")
    return sum(int(number) * _UNIT_MS[unit] for number, unit in parts)


def format_duration_ms(ms: int) -> str:
    """The shortest reading of `ms` that `parse_duration_ms` takes back."""
    if ms == 0:
        return "0s"
    out = []
    for unit in ("d", "h", "m", "s", "ms"):
        size = _UNIT_MS[unit]
        if ms >= size:
            out.append(f"{ms // size}{unit}")
            ms %= size
    return "".join(out)

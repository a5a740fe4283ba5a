"""Retry back-off in integers, for `apply`: the delay before retry n is
`backoff_ms * multiplier ** (n - 1)`, rounded down and capped at a day.

The multiplier is an exact whole number of thousandths (1.5 is 1500), so the
delay is exact for any multiplier written with up to three decimals and
does not depend on how a platform's libm computes a floating point power."""

from __future__ import annotations

from fractions import Fraction

MAX_BACKOFF_MS = 86_400_000
# Retry numbers beyond this back off as much as this one (a day, long before).
MAX_EXPONENT = 64
_PER_UNIT = 1000


def nearest_thousandths(multiplier: float | int) -> int:
    """The multiplier as a whole number of thousandths, the nearest one
    (ties to even) for a value with more decimals. Exact: a float is
    converted to the rational number it is, never multiplied as a float."""
    if isinstance(multiplier, float) and multiplier.is_integer():
        return int(multiplier) * _PER_UNIT  # exact, and far cheaper than a Fraction
    return round(Fraction(multiplier) * _PER_UNIT)


def exact_thousandths(multiplier: float | int) -> int | None:
    """The multiplier in thousandths when it is written with at most three
    decimals (the float nearest to n/1000 for a whole n), else None."""
    thousandths = nearest_thousandths(multiplier)
    if isinstance(multiplier, int):
        return thousandths
    # `int / int` is correctly rounded, so this asks whether `multiplier` is
    # the float that the decimal n/1000 parses to.
    return thousandths if thousandths / _PER_UNIT == multiplier else None


def backoff_delay_ms(backoff_ms: int, multiplier_thousandths: int, retry_number: int) -> int:
    """Milliseconds to wait before retry `retry_number` (1-based): 1x, then
    the multiplier once more per retry, rounded down, at most a day."""
    exponent = min(max(retry_number - 1, 0), MAX_EXPONENT)
    numerator, denominator = backoff_ms, 1
    for _ in range(exponent):
        if multiplier_thousandths >= _PER_UNIT and numerator >= MAX_BACKOFF_MS * denominator:
            break  # growing, and already over the cap
        numerator *= multiplier_thousandths
        denominator *= _PER_UNIT
    return min(numerator // denominator, MAX_BACKOFF_MS)

"""The contract's enums by the lower-case names Cortex keeps in SQLite and
logs: `dead_letter` is TaskState TASK_STATE_DEAD_LETTER, `node_status` is
EventType EVENT_TYPE_NODE_STATUS. Every enum of cortex.v1 names its values
PREFIX_NAME, with PREFIX_UNSPECIFIED as zero, so one rule serves them all."""

from __future__ import annotations

import functools
from typing import Any, TypeVar, cast

Enum = TypeVar("Enum", bound=int)

UNSPECIFIED = 0


def _prefix(enum: Any) -> str:
    return str(enum.DESCRIPTOR.values[0].name).removesuffix("UNSPECIFIED")


def enum_value(enum: type[Enum], name: str | None) -> Enum:
    """`("dead_letter")` -> TASK_STATE_DEAD_LETTER; UNSPECIFIED (0) for None,
    "" and names the enum does not have (an event of a newer node)."""
    wrapper: Any = enum
    if not name:
        return cast(Enum, UNSPECIFIED)
    return cast(Enum, _value(wrapper, name))


@functools.lru_cache(maxsize=4096)
def _value(enum: Any, name: str) -> int:
    # Cached: a listing page looks up the same few names for every row.
    try:
        return int(enum.Value(_prefix(enum) + name.upper()))
    except ValueError:
        return UNSPECIFIED


def enum_name(enum: Any, value: int) -> str:
    """TASK_STATE_DEAD_LETTER -> "dead_letter"; "" for UNSPECIFIED and values
    the enum does not have."""
    return _name(enum, int(value))


@functools.lru_cache(maxsize=4096)
def _name(enum: Any, value: int) -> str:
    # Cached, as `_value`: rendering a listing names the same few values for
    # every row, and `enum.values()` builds the enum's list on every call.
    if value == UNSPECIFIED or value not in enum.values():
        return ""
    return str(enum.Name(value)).removeprefix(_prefix(enum)).lower()


def enum_names(enum: Any) -> list[str]:
    """Every name of the enum but UNSPECIFIED, in value order."""
    return [enum_name(enum, value) for value in enum.values() if value != UNSPECIFIED]

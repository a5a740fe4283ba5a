"""Bounds of the numbers the interfaces take (MCP tool arguments, CLI
flags), read from where Cortex keeps them rather than written again: the
task spec and config models (`cortex.spec`, `cortex.config`), the request
limits every interface applies (`cortex.requests`) and, for a number the
spec leaves open on a side, the range of its field on the wire. A change in
any of those changes the tools' input schemas and the flags' checks too."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

if TYPE_CHECKING:
    # Only `with_wire_bounds` needs pydantic at run time: the CLI reads
    # wire ranges at every start and should not pay for importing it.
    from pydantic import BaseModel

__all__ = [
    "INT32_MAX",
    "INT64_MAX",
    "spec_bounds",
    "wire_range",
    "with_wire_bounds",
]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
_WIRE_RANGES: dict[int, tuple[int | float, int | float]] = {
    FieldDescriptor.TYPE_INT32: (-(2**31), INT32_MAX),
    FieldDescriptor.TYPE_SINT32: (-(2**31), INT32_MAX),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), INT32_MAX),
    FieldDescriptor.TYPE_INT64: (-(2**63), INT64_MAX),
    FieldDescriptor.TYPE_SINT64: (-(2**63), INT64_MAX),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), INT64_MAX),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_DOUBLE: (-sys.float_info.max, sys.float_info.max),
    FieldDescriptor.TYPE_FLOAT: (-3.4028234663852886e38, 3.4028234663852886e38),
}
_BOUND_NAMES = ("ge", "gt", "le", "lt")

M = TypeVar("M", bound="BaseModel")


def wire_range(message: type[Message], field: str) -> tuple[int | float, int | float]:
    """The values field `field` of `message` can carry: (lowest, highest)."""
    return _WIRE_RANGES[message.DESCRIPTOR.fields_by_name[field].type]


def spec_bounds(model: type[BaseModel], field: str) -> dict[str, Any]:
    """The bounds the model puts on `field`, as `Field` keyword arguments
    (`ge`, `gt`, `le`, `lt`)."""
    bounds: dict[str, Any] = {}
    for constraint in model.model_fields[field].metadata:
        for name in _BOUND_NAMES:
            value = getattr(constraint, name, None)
            if value is not None:
                bounds[name] = value
    return bounds


def _closing_bounds(model: type[BaseModel], field: str, message: type[Message]) -> dict[str, Any]:
    """The wire range's side for each side the model leaves open."""
    bounds = spec_bounds(model, field)
    lowest, highest = wire_range(message, field)
    closing: dict[str, Any] = {}
    if "ge" not in bounds and "gt" not in bounds:
        closing["ge"] = lowest
    if "le" not in bounds and "lt" not in bounds:
        closing["le"] = highest
    return closing


def with_wire_bounds(model: type[M], message: type[Message]) -> type[M]:
    """`model` with each number it leaves open on a side bounded there by
    the range of the same-named field of `message`: what the wire can carry
    is the most a number can be anyway."""
    from pydantic import Field, create_model

    fields: dict[str, Any] = {}
    wire_fields = message.DESCRIPTOR.fields_by_name
    for name, info in model.model_fields.items():
        if info.annotation not in (int, float) or name not in wire_fields:
            continue
        closing = _closing_bounds(model, name, message)
        if closing:
            fields[name] = (Annotated[info.annotation, Field(**closing)], info)
    bounded: type[M] = create_model(  # type: ignore[call-overload]
        model.__name__, __base__=model, __module__=model.__module__, __doc__=model.__doc__, **fields
    )
    return bounded

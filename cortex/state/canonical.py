"""The one JSON text apply stores for a value: keys sorted, no spaces, ASCII
only; what `json.dumps(value, sort_keys=True, separators=(",", ":"))` writes,
byte for byte, from an encoder made once instead of once per call."""

from __future__ import annotations

import json
from json import encoder as json_encoder
from typing import Any

_C_MAKE_ENCODER = getattr(json_encoder, "c_make_encoder", None)
_FALLBACK = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
_ENCODE = (
    _C_MAKE_ENCODER(
        None,
        _FALLBACK.default,
        json_encoder.encode_basestring_ascii,
        None,
        ":",
        ",",
        True,
        False,
        True,
    )
    if _C_MAKE_ENCODER is not None
    else None
)


def dump(value: Any) -> str:
    """`value` as canonical JSON text (NaN and infinities as `json` spells them)."""
    if _ENCODE is None:
        return _FALLBACK.encode(value)
    return "".join(_ENCODE(value, 0))

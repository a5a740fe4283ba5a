"""The JSON apply writes, from encoders made once instead of once per call:
compact, ASCII only. `dump` is the one text apply stores for a value (keys
sorted): what `json.dumps(value, sort_keys=True, separators=(",", ":"))`
writes, byte for byte."""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder as json_encoder
from typing import Any

_C_MAKE_ENCODER = getattr(json_encoder, "c_make_encoder", None)


def compact_encoder(
    sort_keys: bool, default: Callable[[Any], Any] | None = None
) -> Callable[[Any], str]:
    """What `json.JSONEncoder(sort_keys=..., separators=(",", ":"),
    default=...).encode` writes, from the encoder's C core made here once
    (`encode` builds it anew on every call)."""
    fallback = json.JSONEncoder(sort_keys=sort_keys, separators=(",", ":"), default=default)
    if _C_MAKE_ENCODER is None:
        return fallback.encode
    encode = _C_MAKE_ENCODER(
        None,
        fallback.default,
        json_encoder.encode_basestring_ascii,
        None,
        ":",
        ",",
        sort_keys,
        False,
        True,
    )
    return lambda value: "".join(encode(value, 0))


# `value` as canonical JSON text (NaN and infinities as `json` spells them).
dump = compact_encoder(sort_keys=True)

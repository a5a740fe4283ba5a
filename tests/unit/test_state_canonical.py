"""The canonical JSON apply stores is exactly what `json.dumps` with sorted
keys and compact separators writes, for any JSON-like value, NaN, infinities
and lone surrogates included: it is in every node's state and digest."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cortex.state.canonical import dump

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(), st.just("\ud800")
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(deadline=None, max_examples=500)
@given(VALUES)
def test_dump_writes_what_json_dumps_writes(value: Any) -> None:
    assert dump(value) == json.dumps(value, sort_keys=True, separators=(",", ":"))

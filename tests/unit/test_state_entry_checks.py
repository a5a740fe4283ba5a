"""The quick paths of decoding hold to the full checks they stand in for:
an envelope or payload they pass is one the full checks pass, the byte
scans of a batch answer as the regular expressions they replace would, and
a batch decoded without finding its strings first is decoded, or refused,
as it was when every batch was scanned first."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cortex.state import entries as e
from cortex.state.reasons import Rejected
from cortex.state.spec_rules import plain_json_problem

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False),
    st.text(max_size=5),
)
JSON_VALUES = st.one_of(
    JSON_SCALARS,
    st.lists(JSON_SCALARS, max_size=2),
    st.dictionaries(st.text(max_size=3), JSON_SCALARS, max_size=2),
)


def _fields(cls: type[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts of some of `cls`'s field names (and perhaps an unknown one)
    holding values of any JSON type."""
    names = [*e._fields_of(cls), "unknown"]
    return st.dictionaries(st.sampled_from(names), JSON_VALUES, max_size=len(names))


def _passes(check: Any, *args: Any) -> bool:
    try:
        check(*args)
    except Rejected:
        return False
    return True


@settings(deadline=None, max_examples=300)
@given(st.data())
def test_payload_fields_the_quick_test_passes_pass_the_full_checks(data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(list(e.PAYLOAD_TYPES.values())))
    fields = data.draw(_fields(cls))
    if e._plain_fields(fields, cls):
        assert _passes(cls._check_fields, fields)


@settings(deadline=None, max_examples=300)
@given(_fields(e.Assignment))
def test_records_the_quick_test_passes_pass_the_full_checks(fields: dict[str, Any]) -> None:
    if e._plain_fields(fields, e.Assignment):
        assert _passes(e._check_record, "TASK_ASSIGN", "assignments[0]", fields, e.Assignment)


def test_the_quick_test_passes_well_formed_payloads() -> None:
    assert e._plain_fields({"task_id": "t", "attempt": 1, "node": "n1"}, e.TaskStarted)
    assert e._plain_fields({"task_id": "t", "attempt": 1, "node": "n1", "pid": None}, e.TaskStarted)
    assert not e._plain_fields({"task_id": "t", "attempt": True, "node": "n1"}, e.TaskStarted)
    assert not e._plain_fields({"task_id": "t", "attempt": 2**63, "node": "n1"}, e.TaskStarted)
    assert not e._plain_fields({"task_id": "t", "node": "n1"}, e.TaskStarted)


ENVELOPE_NAMES = [*e._ENVELOPE_TYPES, "unknown"]


@settings(deadline=None, max_examples=300)
@given(
    st.dictionaries(
        st.sampled_from(ENVELOPE_NAMES),
        st.one_of(JSON_VALUES, st.integers(min_value=e.MAX_TS_MS - 2, max_value=e.MAX_TS_MS + 2)),
        max_size=len(ENVELOPE_NAMES),
    )
)
def test_envelopes_the_quick_test_passes_pass_the_full_checks(raw: dict[str, Any]) -> None:
    if e._plain_envelope(raw):
        assert _passes(e._check_envelope, raw)


def test_the_quick_test_passes_well_formed_envelopes() -> None:
    raw = e.as_dict(e.Entry.create(e.TaskCancel("t"), "n1", ts=5))
    assert e._plain_envelope(raw)
    assert not e._plain_envelope({**raw, "ts": e.MAX_TS_MS + 1})
    assert not e._plain_envelope({**raw, "v": False})


# What `_beyond_limits` searched for with regular expressions before it
# searched the bytes' number shapes.
_LONG_NUMBER_PATTERN = re.compile(rb"[0-9]{%d}" % (e.MAX_NUMBER_DIGITS + 1))
_NOT_FINITE_PATTERN = re.compile(rb"[NI]|[eE][+-]?[0-9]{3}")


def _beyond_limits_by_patterns(data: bytes) -> tuple[str | None, bool]:
    outside_strings = e._outside_strings(data)
    if e._nesting(outside_strings) > e.MAX_NESTING:
        return f"the batch nests deeper than {e.MAX_NESTING} levels", False
    if _LONG_NUMBER_PATTERN.search(outside_strings):
        return f"the batch has a number of more than {e.MAX_NUMBER_DIGITS} digits", False
    plain = (
        data.isascii()
        and _NOT_FINITE_PATTERN.search(outside_strings) is None
        and (b"\\" not in data or e._SURROGATE_ESCAPE.search(data) is None)
    )
    return None, plain


# Bytes that numbers, strings and nesting are made of, and a non-ASCII one.
PIECES = [bytes([byte]) for byte in b'09eE+-NI."\\[]'] + [b"\xc3\xa9"]


@settings(deadline=None, max_examples=1000)
@given(st.lists(st.sampled_from(PIECES), max_size=40))
def test_the_batch_scan_answers_as_the_patterns_did(parts: list[bytes]) -> None:
    data = b"".join(parts)
    assert e._beyond_limits(data) == _beyond_limits_by_patterns(data)


def test_a_long_number_is_found_as_the_pattern_found_it() -> None:
    for digits in (e.MAX_NUMBER_DIGITS, e.MAX_NUMBER_DIGITS + 1):
        number = (b"1234567890" * digits)[:digits]
        for data in (b"[-" + number + b"]", b'["' + number + b'"]', b"[1E-" + number + b"]"):
            assert e._beyond_limits(data) == _beyond_limits_by_patterns(data)


def _outcome(decoded: tuple[list[e.Entry | e.EntryDecodeError], bool]) -> list[Any]:
    """A decoded batch as comparable values (`repr`: a NaN equals itself)."""
    return [
        (item.code, item.text, item.entry_id, item.entry_type)
        if isinstance(item, e.EntryDecodeError)
        else repr(item)
        for item in decoded[0]
    ]


def _assert_decoded_as_when_scanned_first(data: bytes) -> None:
    quick = e.decode_batch_scanned(data)
    assert _outcome(quick) == _outcome(e._decode_scanned_first(data)), data
    if quick[1]:
        # Plain: apply skips looking for NaN, infinities and lone surrogates.
        raw = json.loads(data)
        assert plain_json_problem(raw) is None, data


# The pieces above and what objects, lists and values are made of, so that
# some of what they join is JSON: strings next to numbers (a string between
# two runs of digits joins them once strings are taken out), long runs of
# digits, NaN, numbers too large for a float, and many brackets.
JSON_PIECES = [
    *PIECES,
    *(bytes([byte]) for byte in b"{},: a1"),
    b'"k"',
    b"0" * 130,
    b"NaN",
    b"1e999",
    b"[" * 300,
]


@settings(deadline=None, max_examples=2000)
@given(st.lists(st.sampled_from(JSON_PIECES), max_size=40))
def test_a_batch_decodes_as_when_every_batch_was_scanned_first(parts: list[bytes]) -> None:
    _assert_decoded_as_when_scanned_first(b"".join(parts))


NESTED_VALUES = st.recursive(
    st.one_of(
        JSON_SCALARS,
        st.floats(),
        st.integers(min_value=-(10**300), max_value=10**300),
        st.text(alphabet='0123456789e"\\[]{}', max_size=300),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=40,
)


@settings(deadline=None, max_examples=500)
@given(st.lists(NESTED_VALUES, max_size=4), st.integers(min_value=0, max_value=600))
def test_a_json_batch_decodes_as_when_every_batch_was_scanned_first(
    values: list[Any], depth: int
) -> None:
    nested: Any = values
    for _ in range(depth):
        nested = [nested]
    _assert_decoded_as_when_scanned_first(json.dumps(nested).encode())


def test_digits_a_string_joins_are_a_long_number_in_a_batch_that_is_not_json() -> None:
    """No run of digits in these bytes is too long, but taken out of the
    string between them, two runs make one: the quick test passes the batch,
    json cannot decode it, and the refusal names the number, as it did."""
    data = b"[1" + b"0" * 200 + b'"a"' + b"0" * 100 + b"]"
    assert e._surely_within_limits(data)
    (refused,), plain = e.decode_batch_scanned(data)
    assert isinstance(refused, e.EntryDecodeError) and not plain
    assert refused.text == f"the batch has a number of more than {e.MAX_NUMBER_DIGITS} digits"


def test_a_node_s_batches_are_judged_without_finding_their_strings() -> None:
    spec = {"type": "shell", "command": 'echo "done" > /tmp/x', "labels": {"a": "1e999"}}
    entries = [
        e.Entry.create(e.TaskSubmit(f"t{number}", spec, f"key-{number}"), "n1")
        for number in range(20)
    ]
    data = e.encode_batch(entries)
    assert e._surely_within_limits(data)
    decoded, plain = e.decode_batch_scanned(data)
    assert plain and [item.payload["spec"] for item in decoded] == [spec] * 20  # type: ignore[union-attr]


def test_a_number_that_decodes_to_an_infinity_is_not_plain() -> None:
    for token, finite in (
        (b"1e999", False),
        (b"-1E+400", False),
        (b"1e-400", True),
        (b"NaN", False),
    ):
        data = b'[{"labels":[' + token + b"]}]"
        decoded, plain = e.decode_batch_scanned(data)
        assert plain is finite, token
        assert isinstance(decoded[0], e.EntryDecodeError)  # no envelope: refused as a payload
        assert math.isfinite(json.loads(data)[0]["labels"][0]) is finite

"""Tool arguments checked against the input schema the tool publishes,
before anything is called: every problem becomes one line naming the
argument as the caller wrote it (`retry_policy.maxRetries: must be an
integer (got "many")`).

The schemas are the ones pydantic writes for the tools' signatures, so the
checker knows the keywords those use (see `SUPPORTED_KEYWORDS`); beyond the
schema, every value must be plain JSON: finite numbers, text that is valid
Unicode (no lone surrogates) and string keys."""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = [
    "SUPPORTED_KEYWORDS",
    "argument_path",
    "argument_problems",
    "readable",
    "unsupported_keywords",
]

# Keywords that constrain values, and those that only describe them.
_CHECKED = {
    "type", "properties", "required", "additionalProperties", "items", "anyOf", "$ref",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
    "minItems", "maxItems", "enum", "const",
}  # fmt: skip
_DESCRIPTIVE = {"$defs", "title", "description", "default", "examples"}
SUPPORTED_KEYWORDS = frozenset(_CHECKED | _DESCRIPTIVE)
MAX_PROBLEMS = 10
_SHOWN_CHARS = 80
_TYPE_WORDS = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "null": "null",
    "array": "an array",
    "object": "an object",
}
_PLURALS = {"integer": "integers", "number": "numbers", "string": "strings",
            "boolean": "booleans", "array": "arrays", "object": "objects"}  # fmt: skip


def readable(text: str) -> str:
    """`text` as valid Unicode: characters that are not (lone surrogates)
    written as their `\\udXXX` escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def argument_path(parts: Sequence[str | int]) -> str:
    """The place of a value among the arguments: `retry_policy.maxRetries`,
    `command.0` (an empty name shows as `""`)."""
    return ".".join(readable(str(part)) if part != "" else '""' for part in parts)


def argument_problems(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """What is wrong with `arguments` for a tool whose input schema is
    `schema`: one readable line per problem, each starting with the path of
    the argument at fault (at most `MAX_PROBLEMS`, then how many more)."""
    checker = _Checker(schema)
    checker.check(schema, arguments, ())
    problems = checker.problems
    if len(problems) > MAX_PROBLEMS:
        problems = [*problems[:MAX_PROBLEMS], f"and {len(problems) - MAX_PROBLEMS} more problems"]
    return problems


def unsupported_keywords(schema: Mapping[str, Any]) -> set[str]:
    """The keywords in `schema` (at any depth) the checker does not know."""
    found: set[str] = set()
    for part in _subschemas(schema):
        found |= set(part) - SUPPORTED_KEYWORDS
    return found


def _subschemas(schema: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield schema
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            yield from _subschemas(schema[key])
    for key in ("properties", "$defs"):
        for part in schema.get(key, {}).values():
            yield from _subschemas(part)
    for part in schema.get("anyOf", []):
        yield from _subschemas(part)


def _json_type(value: Any) -> str | None:
    """The JSON type of a value as JSON Schema sees it (1.0 is an integer)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if math.isfinite(value) and value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return None


def _types(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type")
    return [kind] if isinstance(kind, str) else list(kind or [])


def _shown(value: Any) -> str:
    """A value as the caller sent it, cut short when long."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if _json_type(value) is None:
        return f"a {type(value).__name__}"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return f"a {type(value).__name__}"
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)


def _bounds_text(schema: Mapping[str, Any]) -> str:
    """`between 0 and 10`, `at least 1`, ... as the schema's bounds say."""
    integer = "integer" in _types(schema)
    low, high = schema.get("minimum"), schema.get("maximum")
    low_word = high_word = ""
    if schema.get("exclusiveMinimum") is not None:
        low = schema["exclusiveMinimum"]
        if integer:
            low = math.floor(low) + 1
        else:
            low_word = "more than "
    if schema.get("exclusiveMaximum") is not None:
        high = schema["exclusiveMaximum"]
        if integer:
            high = math.ceil(high) - 1
        else:
            high_word = "less than "
    if low is not None and high is not None:
        if not low_word and not high_word:
            return f"between {_number(low)} and {_number(high)}"
        return (
            f"{low_word or 'at least '}{_number(low)} and {high_word or 'at most '}{_number(high)}"
        )
    if low is not None:
        return f"{low_word or 'at least '}{_number(low)}"
    return f"{high_word or 'at most '}{_number(high)}"


def _out_of_bounds(schema: Mapping[str, Any], value: int | float) -> bool:
    if "minimum" in schema and value < schema["minimum"]:
        return True
    if "maximum" in schema and value > schema["maximum"]:
        return True
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        return True
    return "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values (True is not 1)."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _closest(key: str, known: Sequence[str]) -> str:
    match = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f"; did you mean {match[0]}?" if match else ""


class _Checker:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self._root = root
        self.problems: list[str] = []

    def _problem(self, path: Sequence[str | int], text: str) -> None:
        self.problems.append(f"{argument_path(path) or 'arguments'}: {text}")

    def _resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        while "$ref" in schema:
            name = schema["$ref"].removeprefix("#/$defs/")
            schema = self._root["$defs"][name]
        return schema

    def describe(self, schema: Mapping[str, Any]) -> str:
        """What a value must be, in words: `an integer`, `a string or null`."""
        schema = self._resolve(schema)
        if "anyOf" in schema:
            return " or ".join(self.describe(part) for part in schema["anyOf"])
        if "enum" in schema:
            return "one of " + ", ".join(_shown(choice) for choice in schema["enum"])
        if "const" in schema:
            return _shown(schema["const"])
        words = []
        for kind in _types(schema):
            word = _TYPE_WORDS[kind]
            items = self._resolve(schema.get("items", {}))
            item_types = _types(items)
            if kind == "array" and len(item_types) == 1:
                word += f" of {_PLURALS.get(item_types[0], item_types[0])}"
            words.append(word)
        return " or ".join(words) or "a JSON value"

    def _fits_type(self, schema: Mapping[str, Any], value: Any) -> bool:
        schema = self._resolve(schema)
        if "anyOf" in schema:
            return any(self._fits_type(part, value) for part in schema["anyOf"])
        kinds = _types(schema)
        if not kinds:
            return True
        kind = _json_type(value)
        return kind in kinds or (kind == "integer" and "number" in kinds)

    def check(self, schema: Mapping[str, Any], value: Any, path: tuple[str | int, ...]) -> None:
        schema = self._resolve(schema)
        if "anyOf" in schema:
            self._any_of(schema, value, path)
            return
        if isinstance(value, float) and not math.isfinite(value):
            kinds = _types(schema)
            if not kinds or {"number", "integer"} & set(kinds):
                self._problem(path, f"must be a finite number (got {_shown(value)})")
            else:
                self._problem(path, f"must be {self.describe(schema)} (got {_shown(value)})")
            return
        if not self._fits_type(schema, value):
            self._problem(path, f"must be {self.describe(schema)} (got {_shown(value)})")
            return
        if "enum" in schema and not any(_same(value, choice) for choice in schema["enum"]):
            self._problem(path, f"must be {self.describe(schema)} (got {_shown(value)})")
            return
        if "const" in schema and not _same(value, schema["const"]):
            self._problem(path, f"must be {self.describe(schema)} (got {_shown(value)})")
            return
        kind = _json_type(value)
        if kind == "string":
            self._string(schema, value, path)
        elif kind in ("integer", "number"):
            if _out_of_bounds(schema, value):
                self._problem(path, f"must be {_bounds_text(schema)} (got {_shown(value)})")
        elif kind == "array":
            self._array(schema, value, path)
        elif kind == "object":
            self._object(schema, value, path)
        elif kind is None:
            self._problem(path, f"must be {self.describe(schema)} (got {_shown(value)})")

    def _any_of(self, schema: Mapping[str, Any], value: Any, path: tuple[str | int, ...]) -> None:
        fitting = [part for part in schema["anyOf"] if self._fits_type(part, value)]
        if not fitting:
            self._problem(path, f"must be {self.describe(schema)} (got {_shown(value)})")
            return
        first_problems: list[str] | None = None
        for part in fitting:
            before = self.problems
            self.problems = []
            self.check(part, value, path)
            found, self.problems = self.problems, before
            if not found:
                return
            first_problems = first_problems or found
        self.problems.extend(first_problems or [])

    def _string(self, schema: Mapping[str, Any], value: str, path: tuple[str | int, ...]) -> None:
        problem = _text_problem(value)
        if problem:
            self._problem(path, f"must be valid text ({problem})")
            return
        shortest, longest = schema.get("minLength"), schema.get("maxLength")
        if shortest is not None and len(value) < shortest:
            wanted = (
                "must not be empty" if shortest == 1 else f"must have {shortest} or more characters"
            )
            self._problem(path, f"{wanted} (got {_shown(value)})")
        elif longest is not None and len(value) > longest:
            self._problem(path, f"must have at most {longest} characters (got {len(value)})")

    def _array(
        self, schema: Mapping[str, Any], value: Sequence[Any], path: tuple[str | int, ...]
    ) -> None:
        if "minItems" in schema and len(value) < schema["minItems"]:
            self._problem(path, f"must have {schema['minItems']} or more items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            self._problem(path, f"must have at most {schema['maxItems']} items (got {len(value)})")
        items = schema.get("items")
        for index, item in enumerate(value):
            if isinstance(items, Mapping) and items:
                self.check(items, item, (*path, index))
            else:
                self._plain(item, (*path, index))

    def _object(
        self, schema: Mapping[str, Any], value: Mapping[Any, Any], path: tuple[str | int, ...]
    ) -> None:
        properties: Mapping[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if not isinstance(key, str):
                self._problem(path, f"keys must be strings (got {_shown(key)})")
                continue
            where = (*path, key)
            if key in properties:
                self.check(properties[key], item, where)
            elif extra is False:
                known = list(properties)
                what = "unknown argument" if not path else "unknown key"
                self._problem(
                    where, f"{what}{_closest(key, known)} (known: {', '.join(known) or 'none'})"
                )
            elif (problem := _text_problem(key)) is not None:
                self._problem(where, f"the name must be valid text ({problem})")
            elif isinstance(extra, Mapping) and extra:
                self.check(extra, item, where)
            else:
                self._plain(item, where)
        for name in schema.get("required", []):
            if name not in value:
                self._problem((*path, name), "missing (a required argument)")

    def _plain(self, value: Any, path: tuple[str | int, ...]) -> None:
        """A value no schema describes must still be plain JSON."""
        pending: list[tuple[Any, tuple[str | int, ...]]] = [(value, path)]
        while pending:
            current, where = pending.pop()
            kind = _json_type(current)
            if kind is None:
                self._problem(where, f"must be a JSON value (got {_shown(current)})")
            elif isinstance(current, float) and not math.isfinite(current):
                self._problem(where, f"must be a finite number (got {_shown(current)})")
            elif kind == "string" and (problem := _text_problem(current)) is not None:
                self._problem(where, f"must be valid text ({problem})")
            elif kind == "array":
                pending.extend((item, (*where, i)) for i, item in enumerate(current))
            elif kind == "object":
                for key, item in current.items():
                    if not isinstance(key, str):
                        self._problem(where, f"keys must be strings (got {_shown(key)})")
                    elif (problem := _text_problem(key)) is not None:
                        self._problem((*where, key), f"the name must be valid text ({problem})")
                    else:
                        pending.append((item, (*where, key)))


def _text_problem(text: str) -> str | None:
    """Why `text` is not valid Unicode text, or None when it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        bad = readable(text[err.start : err.end])
        return f"a lone surrogate {bad} at position {err.start}"
    return None

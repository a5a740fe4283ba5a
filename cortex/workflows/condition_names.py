"""Which tasks a condition names, found without running it.

A condition reads its parents' results as `parent.KEY`, `parent?.KEY`,
`parent['KEY']`, `parent["KEY"]` or ``parent[`KEY`]``. The condition is
split into JavaScript tokens (comments, strings, template literals and
regular expression literals kept whole, escapes in names and strings
decoded), and every `parent` that is not itself a property (`x.parent`) and
is followed by one of those forms is a reference to the task KEY.

Anything else done with `parent` (a computed key `parent[k]`,
`Object.values(parent)`, destructuring, passing it to a function) cannot be
resolved without running the condition, so it is not checked here: at run
time such a condition still sees only the tasks upstream of it, and one that
throws fails its task. A local name that shadows `parent` is read as the
input all the same. Where `/` could start a regular expression or divide
(after `)` or `}`), it is read as division, so no code is ever skipped as a
regular expression; a condition whose tokens cannot be read at all gives
None (it does not compile either)."""

from __future__ import annotations

import re
from dataclasses import dataclass

INPUT_NAME = "parent"

_LINE_TERMINATORS = "\n\r\u2028\u2029"
_NUMBER = re.compile(
    r"(?:0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+"
    r"|(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)(?:[eE][+-]?[0-9][0-9_]*)?)n?"
)
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", "v": "\v"}
# After these names an expression starts, so `/` opens a regular expression.
_EXPRESSION_KEYWORDS = frozenset(
    {"return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case",
     "do", "else", "yield", "await"}
)  # fmt: skip


@dataclass(frozen=True)
class ParentReference:
    """`key` named as `text` (e.g. `parent.build`) in a condition."""

    key: str
    text: str


@dataclass(frozen=True)
class _Token:
    # name, string (a literal whose value is known), template (a template
    # literal with substitutions, or its last part), template_open (a part
    # ending in `${`), number, regex, punct
    kind: str
    value: str | None
    start: int
    end: int


class _Unreadable(Exception):
    pass


def parent_references(condition: str) -> list[ParentReference] | None:
    """The tasks `condition` names statically, in order of appearance; None
    when its tokens cannot be read."""
    try:
        tokens = _tokens(condition)
    except _Unreadable:
        return None
    found = []
    for number, token in enumerate(tokens):
        if token.kind != "name" or token.value != INPUT_NAME:
            continue
        if number and _is_punct(tokens[number - 1], ".", "?."):
            continue  # a property called parent, not the input
        member = _member(tokens[number + 1 : number + 5])
        if member is not None:
            key, end = member
            found.append(ParentReference(key, condition[token.start : end]))
    return found


def _member(rest: list[_Token]) -> tuple[str, int] | None:
    """The key and end offset of `.KEY`, `?.KEY`, `[LITERAL]` or `?.[LITERAL]`."""
    if rest and _is_punct(rest[0], ".", "?.") and len(rest) > 1 and rest[1].kind == "name":
        assert rest[1].value is not None
        return rest[1].value, rest[1].end
    if rest and _is_punct(rest[0], "?."):
        rest = rest[1:]
    if (
        len(rest) >= 3
        and _is_punct(rest[0], "[")
        and rest[1].kind == "string"
        and rest[1].value is not None
        and _is_punct(rest[2], "]")
    ):
        return rest[1].value, rest[2].end
    return None


def _is_punct(token: _Token, *values: str) -> bool:
    return token.kind == "punct" and token.value in values


def _regex_allowed(tokens: list[_Token]) -> bool:
    """Whether a `/` here starts a regular expression (else: division)."""
    if not tokens:
        return True
    last = tokens[-1]
    if last.kind == "name":
        before = tokens[-2] if len(tokens) > 1 else None
        is_property = before is not None and _is_punct(before, ".", "?.")
        return last.value in _EXPRESSION_KEYWORDS and not is_property
    if last.kind == "template_open":
        return True
    if last.kind == "punct":
        return last.value not in (")", "]", "}", "++", "--")
    return False


def _tokens(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    # Brace depth where each open template substitution began.
    substitutions: list[int] = []
    depth = 0
    i, n = 0, len(source)
    while i < n:
        char = source[i]
        if char.isspace() or char == "\ufeff":
            i += 1
        elif source.startswith("//", i):
            i = _line_end(source, i)
        elif source.startswith("/*", i):
            end = source.find("*/", i + 2)
            if end < 0:
                raise _Unreadable
            i = end + 2
        elif char in "'\"":
            value, end = _string(source, i)
            tokens.append(_Token("string", value, i, end))
            i = end
        elif char == "`" or (char == "}" and substitutions and substitutions[-1] == depth):
            if char == "}":
                substitutions.pop()
            value, end, opened = _template_part(source, i + 1)
            if opened:
                substitutions.append(depth)
                tokens.append(_Token("template_open", None, i, end))
            elif char == "`":
                tokens.append(_Token("string", value, i, end))
            else:
                tokens.append(_Token("template", None, i, end))
            i = end
        elif char.isdigit() or (char == "." and i + 1 < n and source[i + 1].isdigit()):
            match = _NUMBER.match(source, i)
            assert match is not None
            tokens.append(_Token("number", match.group(), i, match.end()))
            i = match.end()
        elif char == "\\" or char == "$" or char.isidentifier():
            name, end = _name(source, i)
            tokens.append(_Token("name", name, i, end))
            i = end
        elif char == "/" and _regex_allowed(tokens):
            end = _regex_end(source, i)
            tokens.append(_Token("regex", None, i, end))
            i = end
        else:
            punct = _punct(source, i)
            if punct == "{":
                depth += 1
            elif punct == "}":
                depth -= 1
            tokens.append(_Token("punct", punct, i, i + len(punct)))
            i += len(punct)
    if substitutions:
        raise _Unreadable
    return tokens


def _punct(source: str, i: int) -> str:
    if source.startswith("?.", i) and not source[i + 2 : i + 3].isdigit():
        return "?."
    for punct in ("...", "++", "--"):
        if source.startswith(punct, i):
            return punct
    return source[i]


def _line_end(source: str, i: int) -> int:
    while i < len(source) and source[i] not in _LINE_TERMINATORS:
        i += 1
    return i


def _name(source: str, i: int) -> tuple[str, int]:
    """An identifier name, its `\\u` escapes decoded."""
    chars = []
    while i < len(source):
        char = source[i]
        if char == "\\":
            if not source.startswith("\\u", i):
                raise _Unreadable
            decoded, i = _unicode_escape(source, i + 2)
            chars.append(decoded)
        elif char == "$" or char in "\u200c\u200d" or ("a" + char).isidentifier():
            chars.append(char)
            i += 1
        else:
            break
    return "".join(chars), i


def _unicode_escape(source: str, i: int) -> tuple[str, int]:
    """The character of `\\uXXXX` or `\\u{X...}`, `i` just after the `u`."""
    if source.startswith("{", i):
        end = source.find("}", i)
        digits = source[i + 1 : end] if end > 0 else ""
        i = end + 1
    else:
        digits = source[i : i + 4]
        i += 4
        if len(digits) != 4:
            raise _Unreadable
    try:
        code = int(digits, 16)
        if not digits or code > 0x10FFFF:
            raise ValueError
    except ValueError:
        raise _Unreadable from None
    return chr(code), i


def _escape(source: str, i: int) -> tuple[str | None, int]:
    """The character(s) an escape stands for, `i` just after the backslash;
    None for a legacy octal escape (its value is not worked out here)."""
    if i >= len(source):
        raise _Unreadable
    char = source[i]
    if char in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[char], i + 1
    if char == "x":
        try:
            return chr(int(source[i + 1 : i + 3], 16)), i + 3
        except ValueError:
            raise _Unreadable from None
    if char == "u":
        return _unicode_escape(source, i + 1)
    if char == "\r" and source.startswith("\n", i + 1):
        return "", i + 2
    if char in _LINE_TERMINATORS:
        return "", i + 1
    if char.isdigit() and (char != "0" or source[i + 1 : i + 2].isdigit()):
        return None, i + 1
    if char == "0":
        return "\0", i + 1
    return char, i + 1


def _string(source: str, i: int) -> tuple[str | None, int]:
    """A quoted string starting at `i`: its value (None when it holds a legacy
    octal escape) and where it ends."""
    quote, i = source[i], i + 1
    chars: list[str] = []
    known = True
    while i < len(source):
        char = source[i]
        if char == quote:
            return ("".join(chars) if known else None), i + 1
        if char == "\\":
            decoded, i = _escape(source, i + 1)
            if decoded is None:
                known = False
            else:
                chars.append(decoded)
        elif char in "\n\r":
            break
        else:
            chars.append(char)
            i += 1
    raise _Unreadable


def _template_part(source: str, i: int) -> tuple[str | None, int, bool]:
    """A template literal's text from `i` up to its closing backtick or its
    next `${`: the text's value, where the part ends, and whether a
    substitution opens there."""
    chars: list[str] = []
    known = True
    while i < len(source):
        char = source[i]
        if char == "`":
            return ("".join(chars) if known else None), i + 1, False
        if source.startswith("${", i):
            return None, i + 2, True
        if char == "\\":
            decoded, i = _escape(source, i + 1)
            if decoded is None:
                known = False
            else:
                chars.append(decoded)
        else:
            chars.append(char)
            i += 1
    raise _Unreadable


def _regex_end(source: str, i: int) -> int:
    """Where the regular expression literal starting at `i` (its `/`) ends,
    flags included."""
    i += 1
    in_class = False
    while i < len(source):
        char = source[i]
        if char in _LINE_TERMINATORS:
            break
        if char == "\\":
            i += 2
            continue
        if char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        elif char == "/" and not in_class:
            _, end = _name(source, i + 1) if i + 1 < len(source) else ("", i + 1)
            return end
        i += 1
    raise _Unreadable

"""How the command line checks what it is given, in one place: every flag's
value goes through a type here, so a bad value is refused while parsing,
as one line naming the flag as typed, before anything is sent.

Bounds are read from where the rules live (the task spec and node config
models, the API's field types), so the CLI cannot drift from what a node
accepts. Every value must also be UTF-8 text: argv arrives decoded with
surrogate escapes, and a message carrying one could not be sent."""

from __future__ import annotations

import argparse
import importlib
import math
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn

from google.protobuf.message import Message

from cortex.bounds import spec_bounds, wire_range
from cortex.durations import format_duration_ms, parse_duration_ms
from cortex.errors import ConfigError, InvalidArgument
from cortex.state.spec_rules import key_problem

if TYPE_CHECKING:
    from pydantic import BaseModel

# A model class named "module:Class", imported when a flag's bounds are
# first needed: the models bring pydantic, which most commands never need,
# and importing it costs a command about a third of its start.
ModelClass = str


def _model(named: ModelClass) -> type[BaseModel]:
    module, _, name = named.partition(":")
    model: type[BaseModel] = getattr(importlib.import_module(module), name)
    return model


# Seconds a duration flag may name when the rule sets no upper bound: a
# century, well inside what timestamps and timers can carry.
MAX_SECONDS = 100 * 365 * 86_400.0


def text(value: str) -> str:
    """The value itself, if it is valid UTF-8 (argv decodes undecodable
    bytes to lone surrogates, which no message can carry)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        bad = value[err.start : err.end].encode("utf-8", "surrogateescape")
        raise argparse.ArgumentTypeError(
            f"not valid UTF-8 text (byte {bad[:1].hex(' ')} at position {err.start})"
        ) from None
    return value


def parse_pairs(items: list[str], what: str) -> dict[str, str]:
    """`KEY=VALUE` items (of the flag `what`) as a mapping."""
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{what} {item!r} is not KEY=VALUE")
        pairs[key] = value
    return pairs


class Integer:
    """A whole number between `low` and `high`, both included."""

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high

    def __call__(self, value: str) -> int:
        raw = text(value).strip()
        try:
            number = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be a whole number from {self.low} to {self.high} (got {value!r})"
            ) from None
        if not self.low <= number <= self.high:
            raise argparse.ArgumentTypeError(
                f"must be from {self.low} to {self.high} (got {_shown(raw)})"
            )
        return number

    def __repr__(self) -> str:  # argparse names the type in some messages
        return "integer"

    @classmethod
    def of_field(cls, model: ModelClass, name: str, high: int | None = None) -> Integer:
        """The bounds of a pydantic model's field; `high` where it sets none."""
        return _IntegerOfField(model, name, high)

    @classmethod
    def of_proto(cls, message: type[Message], name: str, low: int = 0) -> Integer:
        """From `low` to the largest value the API field's type can carry."""
        return cls(low, int(wire_range(message, name)[1]))


class Number:
    """A finite decimal number in a range; `low_open` excludes the low end."""

    def __init__(self, low: float, high: float, *, low_open: bool = False) -> None:
        self.low, self.high, self.low_open = float(low), float(high), low_open

    def __call__(self, value: str) -> float:
        raw = text(value).strip()
        try:
            number = float(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be a number {self._range()} (got {value!r})"
            ) from None
        too_low = number <= self.low if self.low_open else number < self.low
        if not math.isfinite(number) or too_low or number > self.high:
            raise argparse.ArgumentTypeError(f"must be {self._range()} (got {_shown(raw)})")
        return number

    def __repr__(self) -> str:
        return "number"

    def _range(self) -> str:
        low, high = _plain(self.low), _plain(self.high)
        if self.low_open:
            return f"above {low} and at most {high}"
        return f"from {low} to {high}"

    @classmethod
    def of_field(cls, model: ModelClass, name: str, high: float = MAX_SECONDS) -> Number:
        """The bounds of a pydantic model's field; `high` where it sets none."""
        return _NumberOfField(model, name, high)


class _IntegerOfField(Integer):
    """`Integer.of_field`: its bounds read from the model when first asked for."""

    def __init__(self, model: ModelClass, name: str, high: int | None) -> None:
        self._model, self._name, self._high = model, name, high

    def __getattr__(self, attribute: str) -> Any:
        if attribute not in ("low", "high"):
            raise AttributeError(attribute)
        model = _model(self._model)
        bounds = spec_bounds(model, self._name)
        upper = bounds.get("le", bounds["lt"] - 1 if "lt" in bounds else self._high)
        if upper is None:
            raise ValueError(f"{model.__name__}.{self._name} has no upper bound: give one")
        start = bounds.get("ge", bounds["gt"] + 1 if "gt" in bounds else 0)
        Integer.__init__(self, int(start), int(upper))
        return getattr(self, attribute)


class _NumberOfField(Number):
    """`Number.of_field`: its bounds read from the model when first asked for."""

    def __init__(self, model: ModelClass, name: str, high: float) -> None:
        self._model, self._name, self._high = model, name, high

    def __getattr__(self, attribute: str) -> Any:
        if attribute not in ("low", "high", "low_open"):
            raise AttributeError(attribute)
        bounds = spec_bounds(_model(self._model), self._name)
        Number.__init__(
            self,
            float(bounds.get("ge", bounds.get("gt", 0.0))),
            float(bounds.get("le", self._high)),
            low_open="gt" in bounds,
        )
        return getattr(self, attribute)


class Duration:
    """A span as people write it (`30s`, `5m`, `1h30m`; `cortex.durations`),
    in milliseconds, from `low_ms` to `high_ms`."""

    def __init__(self, low_ms: int, high_ms: int) -> None:
        self.low_ms, self.high_ms = low_ms, high_ms

    def __call__(self, value: str) -> int:
        raw = text(value).strip()
        try:
            ms = parse_duration_ms(raw)
        except InvalidArgument:
            raise argparse.ArgumentTypeError(
                f"must be a duration such as 30s, 5m, 2h, 1d or 1h30m (got {_shown(raw)!r})"
            ) from None
        if not self.low_ms <= ms <= self.high_ms:
            low, high = format_duration_ms(self.low_ms), format_duration_ms(self.high_ms)
            raise argparse.ArgumentTypeError(f"must be from {low} to {high} (got {_shown(raw)})")
        return ms

    def __repr__(self) -> str:
        return "duration"


def rate_per_minute(value: str) -> int:
    """A rate such as `5/s` or `30/m`, as starts per minute."""
    from cortex.limit_operations import parse_rate
    from cortex.state.limit_bounds import MAX_RATE_PER_MIN

    raw = text(value).strip()
    try:
        per_minute = parse_rate(raw)
    except InvalidArgument as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if per_minute > MAX_RATE_PER_MIN:
        raise argparse.ArgumentTypeError(
            f"must be at most {MAX_RATE_PER_MIN // 60}/s (got {_shown(raw)})"
        )
    return per_minute


def key_name(value: str) -> str:
    """A concurrency key, fairness key or schedule name: 1 to 128 ASCII
    letters, digits or `._:@/-`, starting with a letter or digit."""
    raw = text(value)
    problem = key_problem(raw)
    if problem:
        raise argparse.ArgumentTypeError(f"{problem} (got {_shown(raw)!r})")
    return raw


def listen_address(value: str) -> str:
    """HOST:PORT to listen on, the port from 1 to 65535; IPv6 in brackets
    (`[::1]:7300`)."""
    raw = text(value).strip()
    host, sep, port = raw.rpartition(":")
    bare_ipv6 = ":" in host and not (host.startswith("[") and host.endswith("]"))
    if not sep or not host.strip("[]") or bare_ipv6 or any(c.isspace() or c == "/" for c in raw):
        raise argparse.ArgumentTypeError(f"must be HOST:PORT, e.g. 127.0.0.1:7300 (got {value!r})")
    if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(
            f"the port must be a whole number from 1 to 65535 (got {_shown(port)!r})"
        )
    return raw


_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d|w)", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def point_in_time(value: str, now: Callable[[], float] | None = None) -> float:
    """An age (`90s`, `10m`, `2h`, `3d`, `1w`: that long ago) or an ISO-8601
    date or time (`2026-11-24`, `2026-11-24T09:30`, with an offset or local
    time), as Unix seconds."""
    raw = text(value).strip()
    age = _AGE.fullmatch(raw)
    if age:
        seconds = float(age.group(1)) * _UNIT_SECONDS[age.group(2).lower()]
        if seconds > MAX_SECONDS:
            raise argparse.ArgumentTypeError(f"is more than a century ago (got {raw!r})")
        return (now or _now)() - seconds
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an age such as 30s, 10m, 2h, 3d, 1w or an ISO-8601 time such as "
            f"2026-11-24T09:30 (got {value!r})"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # the local time zone, as people read dates
    return moment.astimezone(UTC).timestamp()


def _now() -> float:
    return datetime.now(UTC).timestamp()


def _plain(number: float) -> str:
    return str(int(number)) if number.is_integer() else f"{number:g}"


def _shown(raw: str) -> str:
    return raw if len(raw) <= 40 else f"{raw[:20]}…{raw[-8:]} ({len(raw)} characters)"


# -- the parser ------------------------------------------------------------


class CortexArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line naming the problem
    and where to read more, exit code 2; options are never abbreviated.

    With `command_after_dashes` set to a positional's dest, the words after
    the first `--` are that positional (a command to run), whatever other
    positionals come before it: argparse alone gives a command in
    `NAME [OPTIONS] -- CMD` either every option after NAME or nothing."""

    def __init__(self, *args: Any, command_after_dashes: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.command_after_dashes = command_after_dashes

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        words = list(sys.argv[1:] if args is None else args)
        dest = self.command_after_dashes
        if dest is None or "--" not in words:
            return super().parse_known_args(words, namespace)
        cut = words.index("--")
        found, extras = super().parse_known_args(words[:cut], namespace)
        try:
            command = [text(word) for word in words[cut + 1 :]]
        except argparse.ArgumentTypeError as err:
            self.error(f"argument {self._metavar_of(dest)}: {err}")
        if getattr(found, dest, None):
            self.error(f"give {self._metavar_of(dest)} after --, not before it")
        setattr(found, dest, command)
        return found, extras

    def _metavar_of(self, dest: str) -> str:
        action = next((a for a in self._actions if a.dest == dest), None)
        return str(action.metavar or dest) if action is not None else dest

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            # Never fail on printing: a message may quote undecodable bytes.
            sys.stderr.write(message.encode("utf-8", "backslashreplace").decode("utf-8"))
        sys.exit(status)


def usage_error(prog: str, problem: str) -> int:
    """Prints a problem found once the arguments are parsed (flags that do
    not go together, a file that cannot be read) as the parser prints its
    own; returns exit code 2."""
    print(f"{prog}: {problem} (see `{prog} --help`)", file=sys.stderr)
    return 2


def walk(parser: argparse.ArgumentParser) -> Iterator[tuple[list[str], argparse.ArgumentParser]]:
    """Every parser in the tree with the words that reach it, root first."""
    yield [], parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for word, sub in action.choices.items():
                for words, found in walk(sub):
                    yield [word, *words], found


def require_text(parser: argparse.ArgumentParser) -> None:
    """Gives every value-taking argument of the tree that has no type of its
    own the UTF-8 check; typed ones check it themselves."""
    for _, found in walk(parser):
        for action in found._actions:
            if action.nargs == 0 or isinstance(action, argparse._SubParsersAction):
                continue
            if action.type is None:
                action.type = text

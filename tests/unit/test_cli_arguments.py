"""Every flag of every `cortex` subcommand, given a bad value, is refused
while parsing: exit code 2, one line naming the flag as typed, never a
traceback. And the global options work after any subcommand."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from cortex.cli.main import main
from cortex.cli.options import (
    Duration,
    Integer,
    Number,
    key_name,
    listen_address,
    point_in_time,
    rate_per_minute,
    text,
    walk,
)
from cortex.cli.parser import build_parser, label_requirement, node_address

NOT_UTF8 = "caf\udce9"  # b"caf\xe9" as argv decodes it


def _leaves() -> Iterator[tuple[list[str], argparse.ArgumentParser]]:
    for words, parser in walk(build_parser()):
        if words and not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
            yield words, parser


def _positional_dummies(parser: argparse.ArgumentParser) -> list[str]:
    """Valid values for the required positionals, so only the flag under
    test can fail."""
    return [d for a, d in _named_dummies(parser) if a.nargs not in ("?", "*")]


def _named_dummies(parser: argparse.ArgumentParser) -> list[tuple[argparse.Action, str]]:
    pairs = []
    for action in parser._actions:
        if action.option_strings or action.nargs == argparse.REMAINDER:
            continue
        dummy = str(action.type.low) if isinstance(action.type, Integer) else "abc123"
        pairs.append((action, action.choices and next(iter(action.choices)) or dummy))
    return pairs


def _bad_values(action: argparse.Action) -> list[str]:
    kind = action.type
    if isinstance(kind, Integer):
        bad = [str(kind.high + 1), str(kind.low - 1), "abc", "1.5", str(2**70), NOT_UTF8]
        return bad + (["-1"] if kind.low >= 0 else [])
    if isinstance(kind, Number):
        return [str(kind.high * 10 + 1), "-1e300", "nan", "inf", "ten", NOT_UTF8]
    if isinstance(kind, Duration):
        too_short = [f"{kind.low_ms - 1}ms"] if kind.low_ms > 0 else []
        return ["5x", "1.5m", "-1s", "", f"{kind.high_ms + 1}ms", *too_short, NOT_UTF8]
    if kind is rate_per_minute:
        return ["5/x", "5", "-1/s", "1.5/s", f"{10**9}/s", NOT_UTF8]
    if kind is key_name:
        return ["", ".lead", "a b", "a%b", "k" * 129, NOT_UTF8]
    if kind is point_in_time:
        return ["3 fortnights", "2026-13-45", "99999999w", NOT_UTF8]
    if kind is node_address:
        return ["127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:http", "a b", NOT_UTF8]
    if kind is listen_address:
        return ["127.0.0.1:99999", "127.0.0.1:0", "127.0.0.1", ":7300", "::1:7300", "a b:1",
                "127.0.0.1:http", NOT_UTF8]  # fmt: skip
    if kind is label_requirement:
        return ["", "=v", " =v", NOT_UTF8]
    if kind is text:
        return [NOT_UTF8, "x\udcff\udcfe"] + (["bogus-choice"] if action.choices else [])
    raise AssertionError(f"{action.option_strings or action.dest}: type {kind!r} checks nothing")


# Every leaf command's words and parser, from one build of the parser.
LEAVES = list(_leaves())
PARSERS = {" ".join(words): parser for words, parser in LEAVES}


def _value_flags() -> list[tuple[list[str], str, argparse.Action]]:
    found = []
    for words, parser in LEAVES:
        for action in parser._actions:
            if action.nargs == 0 or isinstance(action, argparse._HelpAction):
                continue
            found.append(
                (words, action.option_strings[-1] if action.option_strings else "", action)
            )
    return found


FLAGS = _value_flags()


def test_the_walk_finds_every_command_and_typed_flag() -> None:
    commands = set(PARSERS)
    assert {"task submit", "task list", "logs", "events", "node drain", "dev", "mcp"} <= commands
    assert len(FLAGS) > 120


@pytest.mark.parametrize(
    ("words", "flag", "action"),
    FLAGS,
    ids=[f"{' '.join(w)} {f or a.metavar or a.dest}" for w, f, a in FLAGS],
)
def test_a_bad_value_is_one_line_naming_the_flag(
    words: list[str], flag: str, action: argparse.Action, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = PARSERS[" ".join(words)]
    for value in _bad_values(action):
        if flag:
            argv = [*words, f"{flag}={value}", *_positional_dummies(parser)]
        elif action.nargs == argparse.REMAINDER:
            argv = [*words, "--", "echo", value]
        else:  # a positional: the value takes its place
            named = _named_dummies(parser)
            argv = [*words, *(value if a.dest == action.dest else d for a, d in named)]
        with pytest.raises(SystemExit) as exited:
            main(argv)
        err = capsys.readouterr().err
        assert exited.value.code == 2, (argv, err)
        assert "Traceback" not in err
        assert err.endswith("\n") and err.count("\n") == 1, err
        named = flag or action.metavar or action.dest
        assert f"argument {named}" in err or f"argument {'/'.join(action.option_strings)}" in err, (
            argv,
            err,
        )


@pytest.mark.parametrize("words", [w for w, _ in LEAVES], ids=lambda w: " ".join(w))
def test_global_options_after_the_subcommand(words: list[str]) -> None:
    parser = build_parser()
    leaf = PARSERS[" ".join(words)]
    globals_after = ["--node", "10.1.2.3", "--consistency", "session", "--token", "tok-123"]
    argv = [*words, *_positional_dummies(leaf), *globals_after]
    if words == ["task", "submit"]:
        argv = [*words, *globals_after, "--", "echo", "hi"]
    args = parser.parse_args(argv)
    assert args.node == "10.1.2.3:7200"
    assert args.consistency == "session"
    assert args.token == "tok-123"


def test_a_global_option_after_the_subcommand_wins_over_one_before() -> None:
    args = build_parser().parse_args(
        ["--node", "10.0.0.1:1", "task", "--node", "10.0.0.2", "list", "--node", "[::1]:7300"]
    )
    assert args.node == "[::1]:7300"
    before = build_parser().parse_args(["--node", "10.0.0.1:7", "task", "list"])
    assert before.node == "10.0.0.1:7"


def test_options_are_never_abbreviated(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["task", "list", "--lim", "5"])
    assert exited.value.code == 2
    assert "--lim" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("cortex 0.")


def test_a_bad_node_address_in_the_environment_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CORTEX_NODE", "127.0.0.1:70000")
    assert main(["status"]) == 1
    err = capsys.readouterr().err
    assert "$CORTEX_NODE" in err and "70000" in err and err.count("\n") == 1


def test_token_and_token_file_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--token", "abcdefgh", "status", "--token-file", "/nonexistent"]) == 1
    assert "--token and --token-file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("10.0.0.5", "10.0.0.5:7200"),
        ("node-a.example", "node-a.example:7200"),
        ("node-a:7300", "node-a:7300"),
        ("[::1]", "[::1]:7200"),
        ("[::1]:7300", "[::1]:7300"),
    ],
)
def test_node_addresses_get_the_default_port(given: str, expected: str) -> None:
    assert node_address(given) == expected


def test_point_in_time_reads_ages_and_iso_times() -> None:
    assert point_in_time("10m", now=lambda: 10_000.0) == 9_400.0
    assert point_in_time("2h", now=lambda: 10_000.0) == 2_800.0
    assert point_in_time("2026-11-24T00:00:00+00:00") == 1_795_478_400.0


def test_a_refusal_naming_a_spec_field_names_the_flag() -> None:
    from cortex.cli.tasks import named_by_flag

    assert named_by_flag("spec.type: Input should be 'shell' or 'noop'") == (
        "--type: Input should be 'shell' or 'noop'"
    )
    assert named_by_flag("spec.constraints.nodeLabels.0: empty; spec.cwd: bad") == (
        "--label: empty; --cwd: bad"
    )
    assert named_by_flag("idempotency key 'k' is already used") == (
        "idempotency key 'k' is already used"
    )

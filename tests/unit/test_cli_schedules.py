"""`cortex schedule create` and `cortex limit ...` given bad input: refused
before anything is sent, as one line naming the flag, exit code 2 (no node
listens where they point). And the command after `--` of `schedule create`
is read whatever options come before it."""

from __future__ import annotations

import pytest

from cortex.cli.main import main
from cortex.cli.parser import build_parser

NOWHERE = ["--node", "127.0.0.1:1"]


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line `cortex argv` printed on stderr, exit code 2."""
    try:
        code = main([*NOWHERE, *argv])
    except SystemExit as exited:
        code = exited.code  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["schedule", "create", "s", "--", "true"], ["give --cron EXPR or --every DURATION"]),
        (["schedule", "create", "s", "--every", "5x", "--", "true"],
         ["argument --every", "30s, 5m", "'5x'"]),
        (["schedule", "create", "s", "--every", "500ms", "--", "true"],
         ["argument --every", "from 1s to 366d"]),
        (["schedule", "create", "s", "--every", "5m", "--cron", "* * * * *", "--", "true"],
         ["argument --cron: not allowed with argument --every"]),
        (["schedule", "create", "s", "--cron", "0 3 * *", "--", "true"],
         ["argument --cron", "five fields"]),
        (["schedule", "create", "s", "--cron", "0 3 31 2 *", "--", "true"],
         ["argument --cron", "never matches"]),
        (["schedule", "create", "s", "--cron", "0 3 * * *", "--timezone", "Mars/Base", "--",
          "true"], ["argument --timezone", "Mars/Base"]),
        (["schedule", "create", "s", "--every", "5m", "--timezone", "UTC", "--", "true"],
         ["--timezone applies to --cron only"]),
        (["schedule", "create", "s", "--every", "5m"], ["no command given"]),
        (["schedule", "create", "s", "--every", "5m", "--workflow", "w.yaml", "--", "true"],
         ["not both"]),
        (["schedule", "create", "s", "--every", "5m", "--workflow", "w.yaml", "--priority", "3",
          "--concurrency-key", "k"], ["--workflow cannot be combined with --priority, --concurrency-key"]),
        (["schedule", "create", "s", "--every", "5m", "--overlap", "sometimes", "--", "true"],
         ["argument --overlap", "sometimes"]),
        (["schedule", "create", "s", "--every", "5m", "--catchup-window", "1y", "--", "true"],
         ["argument --catchup-window"]),
        (["schedule", "create", ".hidden", "--every", "5m", "--", "true"],
         ["argument NAME", "ASCII letters"]),
        (["task", "submit", "--concurrency-key", "a b", "--", "true"],
         ["argument --concurrency-key", "'a b'"]),
        (["task", "submit", "--fairness-key", "", "--", "true"], ["argument --fairness-key"]),
        (["limit", "set", "deploy", "--rate", "5/x"],
         ["argument --rate", "'5/x' must read N/s or N/m"]),
        (["limit", "set", "deploy", "--rate", "5"], ["argument --rate", "N/s or N/m"]),
        (["limit", "set", "deploy", "--max-running", "-1"], ["argument --max-running"]),
        (["limit", "set", "deploy"], ["give --max-running N, --rate N/s or both"]),
        (["limit", "set", "deploy", "--burst", "3"], ["give --max-running N, --rate N/s or both"]),
        (["limit", "set", "a%b", "--max-running", "1"], ["argument KEY", "'a%b'"]),
        (["limit", "set-weight", "team", "0"], ["argument WEIGHT", "from 1 to 10000"]),
        (["limit", "set-weight", "team", "heavy"], ["argument WEIGHT", "whole number"]),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_naming_the_problem_exit_2(
    argv: list[str], needles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refused(argv, capsys)
    for needle in needles:
        assert needle in line, line


def test_the_command_follows_the_dashes_whatever_comes_before() -> None:
    parser = build_parser()
    args = parser.parse_args(
        ["schedule", "create", "nightly", "--cron", "0 3 * * *", "--node", "10.0.0.1",
         "--concurrency-key", "deploy", "--", "sh", "-c", "echo hi", "--node", "x"]
    )  # fmt: skip
    assert args.name == "nightly" and args.cron == "0 3 * * *"
    assert args.node == "10.0.0.1:7200" and args.concurrency_key == "deploy"
    assert args.argv == ["sh", "-c", "echo hi", "--node", "x"]
    assert parser.parse_args(["schedule", "create", "n", "--every", "90s"]).every == 90_000
    limit = parser.parse_args(["limit", "set", "deploy", "--rate", "30/m", "--max-running", "2"])
    assert (limit.key, limit.rate, limit.max_running, limit.burst) == ("deploy", 30, 2, 0)
    assert parser.parse_args(["limit", "set", "k", "--rate", "5/s"]).rate == 300

"""The commands that only read or change tasks start without importing
pydantic and the models (`cortex.config`, `cortex.spec`): their import is
about a third of what a command costs to start (a flag the models bound,
such as `--priority`, imports them when given). Each command runs in a
fresh interpreter against a port nothing listens on, and says which of
those modules it loaded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("pydantic", "cortex.config", "cortex.spec", "yaml")

PROBE = """
import contextlib, io, json, sys
from cortex.cli.main import main
with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exit:
        code = exit.code
heavy = json.loads(sys.stdin.read())
print(json.dumps({"code": code, "error": err.getvalue(),
                  "loaded": [name for name in heavy if name in sys.modules]}))
"""


def _run(*argv: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--node", "127.0.0.1:1", *argv],
        input=json.dumps(HEAVY),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["task", "get", "abcdefgh"],
        ["task", "list", "--state", "running"],
        ["task", "submit", "--label", "team=a", "--", "echo", "hi"],
        ["task", "cancel", "abcdefgh"],
        ["dlq", "list"],
        ["workflow", "list"],
        ["node", "list"],
    ],
    ids=" ".join,
)
def test_a_command_that_needs_no_model_does_not_import_one(argv: list[str]) -> None:
    result = _run(*argv)
    # It got as far as calling the node (nothing listens there).
    assert result["code"] == 1 and "cannot reach" in str(result["error"]), result
    assert result["loaded"] == [], result


def test_a_flag_bounded_by_a_model_still_checks_its_value() -> None:
    result = _run("task", "submit", "--priority", "11", "--", "echo", "hi")
    assert result["code"] == 2, result
    assert "--priority" in str(result["error"]) and "from 0 to 10" in str(result["error"]), result

"""The built-in executors on real subprocesses: argv and shell strings, env
and cwd, exit codes, capped output tails, and timeouts and cancellation that
take the whole process group down."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cortex.executors import (
    BUILTIN_EXECUTORS,
    NoopExecutor,
    ShellExecutor,
    TaskEnvironment,
    secret_values,
)
from cortex.executors.base import Execution, ExecutionResult, ExecutorSettings, TailBuffer
from cortex.spec import TaskSpec


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


def process_gone(pid: int) -> bool:
    """True once `pid` has exited; a zombie nobody reaps yet counts as gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def read_pid(path: Path) -> int:
    wait_for(lambda: path.exists() and path.read_text().strip().isdigit(), 5, f"pid in {path}")
    return int(path.read_text())


def execution(tmp_path: Path, spec: dict[str, Any], **kwargs: Any) -> Execution:
    return Execution(
        task_id=kwargs.pop("task_id", "task-1"),
        attempt=kwargs.pop("attempt", 1),
        spec=TaskSpec.model_validate(spec),
        work_dir=str(tmp_path / "attempt"),
        **kwargs,
    )


def run_shell(tmp_path: Path, spec: dict[str, Any], **kwargs: Any) -> ExecutionResult:
    return ShellExecutor().run(execution(tmp_path, spec, **kwargs), threading.Event())


def kill_leftover(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------- shell basics


def test_argv_runs_without_a_shell(tmp_path: Path) -> None:
    result = run_shell(tmp_path, {"command": ["echo", "$HOME", "a b"]})
    assert result.exit_code == 0 and result.succeeded
    assert result.stdout == b"$HOME a b\n"
    assert result.stderr == b""
    assert not result.stdout_truncated and not result.timed_out and result.error is None
    assert result.pid is not None and result.pid > 0


def test_string_runs_through_bin_sh(tmp_path: Path) -> None:
    result = run_shell(tmp_path, {"command": "echo $((6 * 7)); echo oops >&2; exit 3"})
    assert result.exit_code == 3
    assert not result.succeeded
    assert result.stdout == b"42\n"
    assert result.stderr == b"oops\n"


@pytest.mark.parametrize("code", [0, 1, 7, 255])
def test_exit_code_is_captured(tmp_path: Path, code: int) -> None:
    assert run_shell(tmp_path, {"command": ["sh", "-c", f"exit {code}"]}).exit_code == code


def test_killed_by_a_signal_reports_128_plus_signal(tmp_path: Path) -> None:
    result = run_shell(tmp_path, {"command": "kill -9 $$"})
    assert result.exit_code == 137


def test_env_cwd_and_cortex_variables(tmp_path: Path) -> None:
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    script = (
        "import os; print(os.getcwd()); "
        "print(*[os.environ.get(k, '-') for k in "
        "('GREETING', 'CORTEX_TASK_ID', 'CORTEX_ATTEMPT', 'CORTEX_IDEMPOTENCY_KEY', 'PATH')], sep='|')"
    )
    result = run_shell(
        tmp_path,
        {
            "command": [sys.executable, "-c", script],
            "cwd": str(workdir),
            # The engine's own variables win over a spec trying to set them.
            "env": {"GREETING": "hello", "CORTEX_TASK_ID": "spoofed"},
        },
        env={"CORTEX_TASK_ID": "task-9", "CORTEX_ATTEMPT": "2", "CORTEX_IDEMPOTENCY_KEY": "abc"},
    )
    assert result.exit_code == 0, result.stderr
    cwd, values = result.stdout.decode().splitlines()
    assert os.path.realpath(cwd) == os.path.realpath(workdir)
    greeting, task_id, attempt, key, path = values.split("|")
    assert (greeting, task_id, attempt, key) == ("hello", "task-9", "2", "abc")
    assert path == os.environ["PATH"]  # PATH is on the allow-list of inherited variables


def test_output_files_hold_everything(tmp_path: Path) -> None:
    result = run_shell(tmp_path, {"command": "printf out; printf err >&2"})
    assert (tmp_path / "attempt" / "stdout").read_bytes() == b"out"
    assert (tmp_path / "attempt" / "stderr").read_bytes() == b"err"
    assert result.stdout == b"out"


def test_tails_are_capped_with_a_truncated_flag(tmp_path: Path) -> None:
    script = (
        "import sys; sys.stdout.write('a' * 5000 + 'END'); sys.stdout.flush(); "
        "sys.stderr.write('e' * 10)"
    )
    result = run_shell(tmp_path, {"command": [sys.executable, "-c", script]}, tail_bytes=1024)
    assert result.exit_code == 0
    assert len(result.stdout) == 1024
    assert result.stdout == (b"a" * 5000 + b"END")[-1024:]
    assert result.stdout_truncated is True
    assert result.stderr == b"e" * 10 and result.stderr_truncated is False
    assert len((tmp_path / "attempt" / "stdout").read_bytes()) == 5003
    replicated = result.to_dict()
    assert replicated["stdout_truncated"] is True and replicated["stdout"].endswith("END")
    assert replicated["exit_code"] == 0


def test_output_exactly_at_the_limit_is_not_truncated(tmp_path: Path) -> None:
    result = run_shell(tmp_path, {"command": "printf 'xxxxxxxxxx'"}, tail_bytes=10)
    assert result.stdout == b"x" * 10 and not result.stdout_truncated


def test_missing_command_gives_127_with_an_error(tmp_path: Path) -> None:
    result = run_shell(tmp_path, {"command": ["/nonexistent/cortex-no-such-binary", "x"]})
    assert result.exit_code == 127
    assert result.error and "cortex-no-such-binary" in result.error
    assert not result.succeeded


def test_missing_command_through_the_shell_gives_127(tmp_path: Path) -> None:
    result = run_shell(tmp_path, {"command": "cortex-no-such-binary-xyz"})
    assert result.exit_code == 127
    assert b"cortex-no-such-binary-xyz" in result.stderr
    assert not result.permanent  # the shell ran; what its script does is the task's business


# ---------------------------------------------------------------- permanent failures


def test_what_can_never_start_is_a_permanent_failure(tmp_path: Path) -> None:
    not_executable = tmp_path / "script.sh"
    not_executable.write_text("#!/bin/sh\necho hi\n")
    bad_interpreter = tmp_path / "interpreted"
    bad_interpreter.write_text("#!/nonexistent/interpreter\n")
    bad_interpreter.chmod(0o755)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    cases = [
        ({"command": ["cortex-no-such-binary-xyz"]}, "cortex-no-such-binary-xyz: command not found"),
        ({"command": ["/nonexistent/bin/x"]}, "/nonexistent/bin/x: command not found"),
        ({"command": [str(not_executable)]}, f"{not_executable}: permission denied"),
        ({"command": [str(bad_interpreter)]}, "its interpreter (#! line) was not found"),
        ({"command": ["true"], "cwd": str(tmp_path / "gone")},
         f"working directory {tmp_path / 'gone'}: does not exist"),
        ({"command": ["true"], "cwd": str(a_file)}, f"working directory {a_file}: not a directory"),
        ({"command": ["echo", "a\x00b"]}, "embedded null byte"),
        ({"command": ["true"], "env": {"A": "x\x00y"}}, "embedded null byte"),
    ]  # fmt: skip
    for spec, words in cases:
        result = run_shell(tmp_path, spec)
        assert result.permanent, (spec, result)
        assert result.exit_code == 127 and not result.succeeded
        assert result.error is not None and result.error.startswith("could not start command: ")
        assert words in result.error, (spec, result.error)


def test_running_out_of_resources_is_not_permanent(tmp_path: Path) -> None:
    """E2BIG (an argv over the kernel's limit) is a failure to start, but not
    one of the kinds that says the task itself can never run."""
    result = run_shell(tmp_path, {"command": ["true", "x" * 200_000] * 100})
    assert result.exit_code == 127 and result.error and not result.permanent


# ---------------------------------------------------------------- the inherited environment

SECRET_VALUE = "cluster-secret-value-0123456789"


def print_env(tmp_path: Path, executor: ShellExecutor, **spec: Any) -> dict[str, str]:
    result = executor.run(
        execution(tmp_path, {"command": ["env", "-0"], **spec}, env={"CORTEX_TASK_ID": "t-1"}),
        threading.Event(),
    )
    assert result.exit_code == 0, result
    pairs = [item.split("=", 1) for item in result.stdout.decode().split("\0") if item]
    return dict(pairs)


def test_tasks_never_inherit_the_node_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("CORTEX_SECRET", "CORTEX_API_TOKEN", "CORTEX_MCP_TOKEN"):
        monkeypatch.setenv(name, f"{name.lower()}-value")
    monkeypatch.setenv("DATABASE_PASSWORD", "hunter2")
    monkeypatch.setenv("APP_MODE", "fast")
    monkeypatch.setenv("APP_KEY_COPY", SECRET_VALUE)
    monkeypatch.setenv("LC_TIME", "C")
    environment = TaskEnvironment(("APP_*",), secret_values(os.environ, SECRET_VALUE))
    seen = print_env(
        tmp_path, ShellExecutor(ExecutorSettings(environment=environment)), env={"OWN": "mine"}
    )
    assert seen["PATH"] == os.environ["PATH"] and seen["LC_TIME"] == "C"
    assert seen["APP_MODE"] == "fast"  # matched by the operator's pattern
    assert seen["OWN"] == "mine" and seen["CORTEX_TASK_ID"] == "t-1"
    for hidden in ("CORTEX_SECRET", "CORTEX_API_TOKEN", "CORTEX_MCP_TOKEN", "DATABASE_PASSWORD",
                   "APP_KEY_COPY"):  # fmt: skip
        assert hidden not in seen, hidden
    text = "\n".join(f"{k}={v}" for k, v in seen.items())
    for value in ("cortex_secret-value", "cortex_api_token-value", "cortex_mcp_token-value",
                  SECRET_VALUE, "hunter2"):  # fmt: skip
        assert value not in text


def test_a_pattern_matching_everything_still_keeps_the_secrets_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORTEX_SECRET", SECRET_VALUE)
    monkeypatch.setenv("ANYTHING", "passes")
    seen = print_env(tmp_path, ShellExecutor(ExecutorSettings(environment=TaskEnvironment(("*",)))))
    assert seen["ANYTHING"] == "passes" and "CORTEX_SECRET" not in seen


def test_the_default_shell_executor_inherits_only_the_allow_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORTEX_API_TOKEN", "the-token-value")
    monkeypatch.setenv("SOME_SERVICE_URL", "http://x")
    seen = print_env(tmp_path, BUILTIN_EXECUTORS["shell"])  # type: ignore[arg-type]
    assert "CORTEX_API_TOKEN" not in seen and "SOME_SERVICE_URL" not in seen
    inherited = set(seen) - {"CORTEX_TASK_ID"}
    assert inherited and all(TaskEnvironment().allows(name) for name in inherited), inherited


# ---------------------------------------------------------------- process groups


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    # The grandchild ignores SIGTERM, so only a group-wide SIGKILL removes it.
    command = f"(trap '' TERM; exec sleep 30) & echo $! > {pid_file}; wait"
    started = time.monotonic()
    result = run_shell(tmp_path, {"command": command, "timeoutMs": 500}, kill_grace_s=0.5)
    elapsed = time.monotonic() - started
    pid = read_pid(pid_file)
    try:
        assert result.timed_out is True and not result.cancelled
        assert result.exit_code != 0 and not result.succeeded
        assert result.error and "timed out" in result.error
        assert elapsed < 15, "the attempt ran to the grandchild's end instead of timing out"
        wait_for(lambda: process_gone(pid), 2, f"grandchild {pid} to die")
    finally:
        kill_leftover(pid)


def test_timeout_escalates_to_sigkill_after_the_grace_period(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    # Everything in the group ignores SIGTERM.
    command = f"trap '' TERM; sleep 30 & echo $! > {pid_file}; wait"
    result = run_shell(tmp_path, {"command": command, "timeoutMs": 300}, kill_grace_s=0.3)
    pid = read_pid(pid_file)
    try:
        assert result.timed_out is True
        assert result.exit_code == 137  # SIGKILL
        wait_for(lambda: process_gone(pid), 2, f"grandchild {pid} to die")
    finally:
        kill_leftover(pid)


def test_cancel_event_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    command = f"(trap '' TERM; exec sleep 30) & echo $! > {pid_file}; wait"
    cancel = threading.Event()
    outcome: list[ExecutionResult] = []
    runner = threading.Thread(
        target=lambda: outcome.append(
            ShellExecutor().run(execution(tmp_path, {"command": command}, kill_grace_s=0.5), cancel)
        ),
        daemon=True,
    )
    runner.start()
    pid = read_pid(pid_file)
    try:
        assert runner.is_alive() and not process_gone(pid)
        cancel.set()
        runner.join(timeout=15)
        assert not runner.is_alive(), "run() did not return after cancel"
        (result,) = outcome
        assert result.cancelled is True and not result.timed_out
        assert not result.succeeded
        wait_for(lambda: process_gone(pid), 2, f"grandchild {pid} to die")
    finally:
        kill_leftover(pid)


def test_leftover_background_process_does_not_hold_the_attempt(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    # The main process exits at once but leaves a child holding stdout open.
    command = f"sleep 30 & echo $! > {pid_file}; echo done"
    started = time.monotonic()
    result = run_shell(tmp_path, {"command": command})
    pid = read_pid(pid_file)
    try:
        assert result.exit_code == 0 and result.stdout == b"done\n"
        assert time.monotonic() - started < 15
        wait_for(lambda: process_gone(pid), 2, f"leftover {pid} to die")
    finally:
        kill_leftover(pid)


# ---------------------------------------------------------------- noop and helpers


def test_noop_executor(tmp_path: Path) -> None:
    noop = NoopExecutor()
    assert noop.name == "noop" and BUILTIN_EXECUTORS["noop"].name == "noop"
    plain = noop.run(execution(tmp_path, {"type": "noop"}), threading.Event())
    assert plain.exit_code == 0 and plain.succeeded and not plain.cancelled
    failing = noop.run(
        execution(tmp_path, {"type": "noop", "options": {"exit_code": 3}}), threading.Event()
    )
    assert failing.exit_code == 3 and not failing.succeeded
    short = noop.run(
        execution(tmp_path, {"type": "noop", "options": {"duration_ms": 20}}), threading.Event()
    )
    assert short.exit_code == 0 and not short.cancelled


def test_noop_raises_on_options_it_cannot_take(tmp_path: Path) -> None:
    """Submit refuses them; an entry from before that check still reaches the
    executor only through the agent, which reports the exception."""
    with pytest.raises(ValueError, match="duration_ms"):
        NoopExecutor().run(
            execution(tmp_path, {"type": "noop", "options": {"duration_ms": "abc"}}),
            threading.Event(),
        )


def test_noop_honours_cancel(tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    started = time.monotonic()
    result = NoopExecutor().run(
        execution(tmp_path, {"type": "noop", "options": {"duration_ms": 60_000}}), cancel
    )
    assert result.cancelled is True and not result.succeeded
    assert time.monotonic() - started < 10


def test_builtin_executor_registry() -> None:
    assert set(BUILTIN_EXECUTORS) == {"shell", "noop"}
    assert isinstance(BUILTIN_EXECUTORS["shell"], ShellExecutor)


def test_tail_buffer_keeps_the_last_bytes() -> None:
    tail = TailBuffer(8)
    for chunk in (b"abc", b"defgh", b"", b"ijklmnopqrst", b"uv"):
        tail.write(chunk)
    assert tail.value() == b"opqrstuv"
    assert tail.truncated is True
    small = TailBuffer(8)
    small.write(b"12345678")
    assert small.value() == b"12345678" and small.truncated is False


def test_result_to_dict_replaces_invalid_utf8() -> None:
    result = ExecutionResult(exit_code=1, stdout=b"ok \xff", stderr=b"", error="boom")
    replicated = result.to_dict()
    assert replicated["stdout"] == "ok \ufffd"
    assert (replicated["exit_code"], replicated["error"]) == (1, "boom")
    assert not result.succeeded

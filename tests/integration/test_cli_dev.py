"""`cortex dev` and `cortex demo` say up front which ports and data dir they
use, refuse ports in use naming `--base-port`, and `cortex dev` prints a
stop command that works from any directory."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import free_base_port, pid_alive, wait_until

pytestmark = pytest.mark.cluster

CLI = [sys.executable, "-m", "cortex.cli.main"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env["COLUMNS"] = "250"
    env.update(extra)
    return env


def _cli(
    *args: str, cwd: Path, timeout: float = 90, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
        env=_env(**env), stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _describe(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def _pids(data_dir: Path) -> list[int]:
    state = data_dir / "dev-cluster.json"
    return [n["pid"] for n in json.loads(state.read_text())["nodes"]] if state.exists() else []


@pytest.fixture
def leftovers() -> Iterator[list[Path]]:
    """Data dirs of dev clusters to stop, should a test not stop its own."""
    data_dirs: list[Path] = []
    yield data_dirs
    for data_dir in data_dirs:
        for pid in _pids(data_dir):
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def _expect_ports(line: str, base: int, count: int) -> None:
    for i in range(count):
        assert (
            f"node-{i + 1} raft 127.0.0.1:{base + i} grpc 127.0.0.1:{base + 100 + i}"
            f" http 127.0.0.1:{base + 200 + i}"
        ) in line, line


def test_dev_first_line_has_ports_data_dir_and_a_stop_command_for_any_directory(
    tmp_path: Path, leftovers: list[Path]
) -> None:
    started_in, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    started_in.mkdir()
    elsewhere.mkdir()
    data_dir = started_in / "dev"
    leftovers.append(data_dir)
    base = free_base_port(2)
    # A relative --data-dir: the output must still name it absolutely.
    started = _cli(
        "dev", "--nodes", "2", "--data-dir", "dev", "--base-port", str(base), cwd=started_in
    )
    assert started.returncode == 0, _describe(started)
    first = started.stdout.splitlines()[0]
    _expect_ports(first, base, 2)
    assert f"data in {data_dir}" in first, first
    stop = re.search(r"stop it with: (cortex dev stop .*)$", first)
    assert stop, first
    assert stop.group(1) == f"cortex dev stop --data-dir {data_dir}"
    pids = _pids(data_dir)
    assert len(pids) == 2 and all(pid_alive(pid) for pid in pids)

    # The printed command, exactly, from another directory.
    stop_words = shlex.split(stop.group(1))
    stopped = _cli(*stop_words[1:], cwd=elsewhere)
    assert stopped.returncode == 0, _describe(stopped)
    wait_until(lambda: not any(pid_alive(pid) for pid in pids), 30, what="dev nodes to exit")
    assert not (data_dir / "dev-cluster.json").exists()

    # Without --data-dir, elsewhere: the error says which one to give.
    missing = _cli("dev", "stop", cwd=elsewhere)
    assert missing.returncode == 1, _describe(missing)
    assert "--data-dir" in missing.stderr and str(elsewhere / "cortex-dev") in missing.stderr


def test_dev_and_demo_refuse_ports_in_use_naming_base_port(tmp_path: Path) -> None:
    base = free_base_port(2)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", base + 101))
        taken.listen()
        for args in (
            ["dev", "--nodes", "2", "--data-dir", str(tmp_path / "dev")],
            ["demo", "--nodes", "2"],
        ):
            refused = _cli(*args, "--base-port", str(base), cwd=tmp_path, TMPDIR=str(scratch))
            assert refused.returncode == 1, _describe(refused)
            assert refused.stdout == "", _describe(refused)
            lines = refused.stderr.strip().splitlines()
            assert len(lines) == 1, _describe(refused)
            assert f"127.0.0.1:{base + 101}" in lines[0] and "--base-port" in lines[0], lines[0]
    assert not (tmp_path / "dev").exists()
    assert list(scratch.iterdir()) == [], "the demo left a data dir behind"


def test_demo_says_its_ports_and_data_dir_first(tmp_path: Path, leftovers: list[Path]) -> None:
    base = free_base_port(2)
    data_dir = tmp_path / "demo"
    leftovers.append(data_dir)
    result = _cli(
        "demo", "--nodes", "2", "--base-port", str(base), "--data-dir", str(data_dir),
        cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, _describe(result)
    first = result.stdout.splitlines()[0]
    _expect_ports(first, base, 2)
    assert f"data in {data_dir}" in first, first
    assert "hello from Cortex" in result.stdout
    assert result.stdout.rstrip().endswith("cluster stopped")


def test_demo_without_base_port_says_which_ports_it_found(
    tmp_path: Path, leftovers: list[Path]
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    result = _cli("demo", "--nodes", "1", "--keep", cwd=tmp_path, timeout=120, TMPDIR=str(scratch))
    data_dirs = list(scratch.glob("cortex-demo-*"))
    leftovers.extend(data_dirs)
    assert result.returncode == 0, _describe(result)
    first = result.stdout.splitlines()[0]
    found = re.search(
        r"node-1 raft 127\.0\.0\.1:(\d+) grpc 127\.0\.0\.1:(\d+) http 127\.0\.0\.1:(\d+)", first
    )
    assert found, first
    raft, grpc, http = (int(port) for port in found.groups())
    assert raft >= 17100 and grpc == raft + 100 and http == raft + 200, first
    assert "the first free from 17100; --base-port N chooses" in first
    assert len(data_dirs) == 1 and f"data in {data_dirs[0]}" in first, first
    stop = _cli("dev", "stop", "--data-dir", str(data_dirs[0]), cwd=tmp_path)
    assert stop.returncode == 0, _describe(stop)


def test_dev_nodes_run_the_cortex_that_started_them_beside_another_one(
    tmp_path: Path, leftovers: list[Path]
) -> None:
    """Started in a directory that holds a `cortex` package of its own
    (another checkout, say), the nodes still run the Cortex of the command
    that started them: the current directory does not come first on their
    import path."""
    here = tmp_path / "checkout"
    (here / "cortex").mkdir(parents=True)
    (here / "cortex" / "__init__.py").write_text(
        "raise SystemExit('the cortex package of the current directory was imported')\n"
    )
    data_dir = here / "dev"
    leftovers.append(data_dir)
    launcher = [sys.executable, "-P", "-m", "cortex.cli.main"]
    base = free_base_port(1)
    started = subprocess.run(
        [*launcher, "dev", "--nodes", "1", "--data-dir", "dev", "--base-port", str(base)],
        capture_output=True, text=True, timeout=90, cwd=here, env=_env(),
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert started.returncode == 0, _describe(started)
    pids = _pids(data_dir)
    assert len(pids) == 1 and pid_alive(pids[0])
    stopped = subprocess.run(
        [*launcher, "dev", "stop", "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=90, cwd=tmp_path, env=_env(),
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert stopped.returncode == 0, _describe(stopped)
    wait_until(lambda: not pid_alive(pids[0]), 30, what="the dev node to exit")


def test_a_node_that_exits_while_starting_is_reported_at_once_with_its_log(
    tmp_path: Path,
) -> None:
    from cortex.cli.dev import start_cluster, stop_cluster, wait_ready
    from cortex.errors import Unavailable

    data_dir = tmp_path / "dev"
    nodes = start_cluster(2, free_base_port(2), data_dir, ["--no-such-option"])
    try:
        began = time.monotonic()
        with pytest.raises(Unavailable) as raised:
            wait_ready(nodes, timeout_s=60)
        # Reported as soon as a node ended, not at the timeout.
        assert time.monotonic() - began < 30
        message = str(raised.value)
        assert re.search(r"node-\d exited while starting \(exit status 2\)", message), message
        assert "node.log" in message and "--no-such-option" in message, message
    finally:
        stop_cluster(data_dir)

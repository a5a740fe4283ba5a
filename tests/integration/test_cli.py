"""The `cortex` command line, run as real subprocesses against real nodes on
127.0.0.1: node start, task submit/get/list/cancel, status, dev, demo, and
the one-line errors every failure must become."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, free_base_port, free_ports, shell_spec, wait_until

pytestmark = pytest.mark.cluster

CLI = [sys.executable, "-m", "cortex.cli.main"]
TERMINAL = {"completed", "failed", "cancelled", "skipped", "dead_letter"}


def _env(**extra: str) -> dict[str, str]:
    """The caller's environment minus any CORTEX_* settings (so a developer's
    CORTEX_NODE cannot leak in), wide enough that rich never wraps a line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env["COLUMNS"] = "250"
    env.update(extra)
    return env


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60.0,
    command: list[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(command or CLI), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env if env is not None else _env(),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def _describe(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def run_json(*args: str, **kwargs: Any) -> Any:
    result = run_cli(*args, **kwargs)
    assert result.returncode == 0, _describe(result)
    return json.loads(result.stdout)


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 1, nothing on stdout, exactly one non-empty stderr line that is
    not a traceback and contains every needle (case-insensitive)."""
    assert result.returncode == 1, _describe(result)
    assert result.stdout.strip() == "", _describe(result)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, _describe(result)
    line = lines[0]
    assert "Traceback" not in line, line
    for needle in needles:
        assert needle.lower() in line.lower(), f"{needle!r} not in {line!r}"
    return line


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pid_running(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _pid_cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def _processes_of_task(task_id: str) -> list[int]:
    """Pids whose environment carries CORTEX_TASK_ID=task_id (the executor's children)."""
    marker = f"CORTEX_TASK_ID={task_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0") and _pid_running(int(entry.name)):
            found.append(int(entry.name))
    return found


def _state(task: pb.Task) -> str:
    return enum_name(pb.TaskState, task.state)


def _wait_state(
    cluster: Cluster, node_index: int, task_id: str, states: set[str], timeout: float = 30.0
) -> None:
    with cluster.nodes[node_index].client(timeout_s=5) as client:
        wait_until(
            lambda: _state(client.get_task(task_id).task) in states,
            timeout,
            what=f"task {task_id} in {sorted(states)} on {cluster.nodes[node_index].node_id}",
        )


# --- cortex node start -------------------------------------------------------


def test_node_start_without_flags_runs_a_single_node_cluster_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    if not (_port_free(7100) and _port_free(7200) and _port_free(7300)):
        pytest.skip("ports 7100/7200/7300 (the defaults of `cortex node start`) are already in use")
    workdir = tmp_path / "empty"
    workdir.mkdir()
    log_path = tmp_path / "node.out"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [*CLI, "node", "start"],
            cwd=workdir,
            env=_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        wait_until(lambda: (workdir / "cortex-data").is_dir(), 30, what="./cortex-data")

        def ready() -> dict[str, Any] | None:
            assert process.poll() is None, f"node exited early:\n{log_path.read_text()}"
            result = run_cli("status", "--json", cwd=workdir, timeout=15)
            if result.returncode != 0:
                return None
            status = json.loads(result.stdout)
            if status["leader"] and any(n["node_id"] == status["node_id"] for n in status["nodes"]):
                return status
            return None

        status = wait_until(ready, 30, interval=0.2, what="single node to lead and register")
        assert status["leader"] == status["node_id"]
        assert len(status["nodes"]) == 1
        me = status["nodes"][0]
        assert me["raft_address"] == "127.0.0.1:7100"
        assert me["grpc_address"] == "127.0.0.1:7200"
        assert me["status"] == "active"
        assert (workdir / "cortex-data" / "state.db").exists()

        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log_path.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


# --- cortex task ... ---------------------------------------------------------


def test_task_submit_json_wait_prints_the_result(make_cluster) -> None:
    cluster = make_cluster(3)
    node_ids = {n.node_id for n in cluster.nodes}
    task = run_json(
        "--node", cluster.nodes[1].grpc, "task", "submit", "--json", "--wait", "--wait-timeout", "30",
        "--", "sh", "-c", "echo out; echo err >&2",
    )  # fmt: skip
    assert task["id"]
    assert task["state"] == "completed"
    assert task["attempt"] >= 1
    assert task["node"] in node_ids
    assert task["result"]["exit_code"] == 0
    assert task["result"]["stdout"] == "out\n"
    assert task["result"]["stderr"] == "err\n"


def test_idempotency_key_twice_gives_the_same_task(make_cluster) -> None:
    cluster = make_cluster(3)
    args = ["task", "submit", "--json", "--idempotency-key", "cli-idem-1", "--", "echo", "once"]
    first = run_json("--node", cluster.nodes[0].grpc, *args)
    second = run_json("--node", cluster.nodes[2].grpc, *args)
    assert first["id"] and first["created"] is True
    assert second["id"] == first["id"]
    assert second["created"] is False
    _wait_state(cluster, 0, first["id"], TERMINAL)
    listed = run_json("--node", cluster.nodes[0].grpc, "task", "list", "--json")
    assert [t["id"] for t in listed["tasks"]].count(first["id"]) == 1
    assert listed["total"] == 1


def test_submit_wait_of_a_failing_command_exits_non_zero(make_cluster) -> None:
    cluster = make_cluster(3)
    result = run_cli(
        "--node", cluster.nodes[0].grpc, "task", "submit", "--json", "--wait", "--wait-timeout", "30",
        "--max-retries", "0", "--", "sh", "-c", "echo broken >&2; exit 3",
    )  # fmt: skip
    assert result.returncode != 0, _describe(result)
    task = json.loads(result.stdout)
    assert task["state"] in {"failed", "dead_letter"}
    assert task["result"]["exit_code"] == 3
    assert task["result"]["stderr"] == "broken\n"


def test_submit_without_a_command_is_a_one_line_error() -> None:
    (port,) = free_ports(1)
    # Rejected before any node is contacted, so nothing needs to listen.
    for args in (["task", "submit"], ["task", "submit", "--"], ["task", "submit", "--json", "--"]):
        result = run_cli("--node", f"127.0.0.1:{port}", *args, timeout=30)
        assert_one_line_error(result, "command")


def test_task_get_json_shows_id_state_attempt_node_and_result(make_cluster) -> None:
    cluster = make_cluster(3)
    with cluster.nodes[0].client() as client:
        task_id = client.submit_task(shell_spec(["sh", "-c", "echo out; echo err >&2"])).task.id
    _wait_state(cluster, 2, task_id, TERMINAL)
    task = run_json("--node", cluster.nodes[2].grpc, "task", "get", task_id, "--json")
    assert task["id"] == task_id
    assert task["state"] == "completed"
    assert task["attempt"] == 1
    assert task["node"] in {n.node_id for n in cluster.nodes}
    assert task["result"]["exit_code"] == 0
    assert task["result"]["stdout"] == "out\n"
    assert task["result"]["stderr"] == "err\n"

    with_events = run_json(
        "--node", cluster.nodes[2].grpc, "task", "get", task_id, "--json", "--events"
    )
    assert [ev["to"] for ev in with_events["events"]][-1] == "completed"

    human = run_cli("--node", cluster.nodes[2].grpc, "task", "get", task_id, timeout=30)
    assert human.returncode == 0, _describe(human)
    assert task_id in human.stdout and "completed" in human.stdout and "out" in human.stdout


def test_task_list_json_lists_submitted_tasks(make_cluster) -> None:
    cluster = make_cluster(3)
    with cluster.nodes[0].client() as client:
        ids = [client.submit_task(shell_spec(["echo", f"list-{i}"])).task.id for i in range(3)]
    for task_id in ids:
        _wait_state(cluster, 1, task_id, {"completed"})
    listed = run_json("--node", cluster.nodes[1].grpc, "task", "list", "--json")
    assert listed["total"] == 3
    # Newest first.
    assert [t["id"] for t in listed["tasks"]] == ids[::-1]
    assert listed["next_page_token"] is None
    by_id = {t["id"]: t for t in listed["tasks"]}
    for task_id in ids:
        assert by_id[task_id]["state"] == "completed"
        assert by_id[task_id]["result"]["exit_code"] == 0
    assert by_id[ids[1]]["result"]["stdout"] == "list-1\n"

    only_failed = run_json(
        "--node", cluster.nodes[1].grpc, "task", "list", "--json", "--state", "failed"
    )
    assert only_failed["tasks"] == [] and only_failed["total"] == 0
    limited = run_json("--node", cluster.nodes[1].grpc, "task", "list", "--json", "--limit", "2")
    assert len(limited["tasks"]) == 2 and limited["total"] == 3
    assert [t["id"] for t in limited["tasks"]] == [ids[2], ids[1]]
    # The page token is opaque: printed as the node gave it, passed back unchanged.
    token = limited["next_page_token"]
    assert isinstance(token, str) and token
    rest = run_json(
        "--node", cluster.nodes[2].grpc, "task", "list", "--json", "--limit", "2",
        "--page-token", token,
    )  # fmt: skip
    assert [t["id"] for t in rest["tasks"]] == [ids[0]]
    assert rest["total"] == 3 and rest["next_page_token"] is None


def test_task_cancel_stops_a_running_task(make_cluster) -> None:
    cluster = make_cluster(3)
    with cluster.nodes[0].client() as client:
        task_id = client.submit_task(shell_spec(["sleep", "600"])).task.id
    try:
        _wait_state(cluster, 1, task_id, {"running"})
        wait_until(lambda: _processes_of_task(task_id), 15, what="the sleep process")
        cancelled = run_json("--node", cluster.nodes[1].grpc, "task", "cancel", task_id, "--json")
        assert cancelled["id"] == task_id
        assert cancelled["state"] == "cancelled"
        for index in range(3):
            _wait_state(cluster, index, task_id, {"cancelled"})
        again = run_json("--node", cluster.nodes[2].grpc, "task", "get", task_id, "--json")
        assert again["state"] == "cancelled"
        wait_until(
            lambda: not _processes_of_task(task_id), 20, what="the sleep process to be killed"
        )
    finally:
        with cluster.nodes[0].client(timeout_s=5) as client:
            if _state(client.get_task(task_id).task) not in TERMINAL:
                client.cancel_task(task_id, "test cleanup")


def test_cortex_node_env_var_is_used_without_node_flag(make_cluster) -> None:
    cluster = make_cluster(3)
    target = cluster.nodes[1]
    status = run_json("status", "--json", env=_env(CORTEX_NODE=target.grpc))
    assert status["node_id"] == target.node_id
    with target.client() as client:
        task_id = client.submit_task(shell_spec(["echo", "via env"])).task.id
    _wait_state(cluster, 1, task_id, {"completed"})
    task = run_json("task", "get", task_id, "--json", env=_env(CORTEX_NODE=target.grpc))
    assert task["result"]["stdout"] == "via env\n"
    # An explicit --node wins over the environment.
    other = run_json(
        "--node", cluster.nodes[2].grpc, "status", "--json", env=_env(CORTEX_NODE=target.grpc)
    )
    assert other["node_id"] == cluster.nodes[2].node_id


# --- read consistency --------------------------------------------------------


def test_a_read_through_another_node_sees_what_an_earlier_invocation_wrote(make_cluster) -> None:
    cluster = make_cluster(3)
    for i in range(4):
        writer = cluster.nodes[i % 3].grpc
        reader = cluster.nodes[(i + 1) % 3].grpc
        submitted = run_json("--node", writer, "task", "submit", "--json", "--", "echo", f"rw-{i}")
        task = run_json("--node", reader, "task", "get", submitted["id"], "--json")
        assert task["id"] == submitted["id"]
        listed = run_json("--node", reader, "task", "list", "--json", "--limit", "1")
        assert [t["id"] for t in listed["tasks"]] == [submitted["id"]]
        assert listed["total"] == i + 1


def test_status_and_node_list_answer_without_a_leader_and_task_reads_say_why_not(
    make_cluster,
) -> None:
    cluster = make_cluster(3)
    survivor = cluster.nodes[0]
    with survivor.client() as client:
        task_id = client.submit_task(shell_spec(["echo", "before"])).task.id
    _wait_state(cluster, 0, task_id, {"completed"})
    for node in cluster.nodes[1:]:
        node.kill9()

    status = run_json("--node", survivor.grpc, "status", "--json")
    assert status["node_id"] == survivor.node_id
    assert status["last_applied"] >= status["applied_index"] >= 1
    nodes = run_json("--node", survivor.grpc, "node", "list", "--json")
    assert {n["node_id"] for n in nodes} == {n.node_id for n in cluster.nodes}

    # A linearizable read (the default for tasks) needs a leader with a quorum.
    refused = run_cli("--node", survivor.grpc, "task", "get", task_id, "--json", timeout=60)
    assert_one_line_error(refused)
    for consistency in ("stale", "session"):
        task = run_json(
            "--node", survivor.grpc, "--consistency", consistency, "task", "get", task_id, "--json"
        )
        assert task["state"] == "completed" and task["result"]["stdout"] == "before\n"


# --- cortex status -----------------------------------------------------------


def test_status_json_shows_leader_term_nodes_and_digest(make_cluster) -> None:
    cluster = make_cluster(3)
    cluster.wait_converged()
    node_ids = {n.node_id for n in cluster.nodes}
    statuses = [run_json("--node", n.grpc, "status", "--json") for n in cluster.nodes]
    for node, status in zip(cluster.nodes, statuses, strict=True):
        assert status["node_id"] == node.node_id
        assert status["leader"] in node_ids
        assert isinstance(status["term"], int) and status["term"] >= 1
        assert isinstance(status["last_applied"], int) and status["last_applied"] >= 1
        assert re.fullmatch(r"[0-9a-f]{16,}", status["state_digest"])
        assert {n["node_id"] for n in status["nodes"]} == node_ids
        listed = {n["node_id"]: n for n in status["nodes"]}
        assert listed[node.node_id]["grpc_address"] == node.grpc
        assert listed[node.node_id]["raft_address"] == node.raft
        # The default range (test_election_timeout checks one given).
        assert status["election_timeout_s"] == [0.4, 1.4]
    assert len({s["leader"] for s in statuses}) == 1
    assert len({s["state_digest"] for s in statuses}) == 1

    human = run_cli("--node", cluster.nodes[0].grpc, "status", timeout=30)
    assert human.returncode == 0, _describe(human)
    for node_id in node_ids:
        assert node_id in human.stdout
    assert "election timeout 0.4–1.4 s" in human.stdout


# --- errors: one readable line, exit 1 ----------------------------------------


def test_task_get_of_an_unknown_id_is_a_one_line_not_found_error(make_cluster) -> None:
    cluster = make_cluster(3)
    unknown = "00000000-0000-4000-8000-000000000000"
    result = run_cli("--node", cluster.nodes[0].grpc, "task", "get", unknown, "--json", timeout=30)
    line = assert_one_line_error(result, unknown)
    assert "not found" in line.lower() or "no task" in line.lower(), line


@pytest.mark.parametrize(
    "args",
    [["status"], ["task", "list"], ["task", "get", "some-id", "--json"]],
    ids=["status", "list", "get"],
)
def test_node_address_where_nothing_listens_is_a_one_line_error(args: list[str]) -> None:
    (port,) = free_ports(1)
    address = f"127.0.0.1:{port}"
    result = run_cli("--node", address, *args, timeout=30)
    assert_one_line_error(result, address)


def test_node_start_with_a_bad_raft_address_names_the_key(tmp_path: Path) -> None:
    result = run_cli("node", "start", "--raft", "nonsense", cwd=tmp_path, timeout=30)
    assert_one_line_error(result, "raft", "nonsense")


def test_node_start_on_a_raft_port_in_use_fails_instead_of_running_cut_off(
    tmp_path: Path,
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        raft = f"127.0.0.1:{taken.getsockname()[1]}"
        result = run_cli(
            "node", "start", "--raft", raft, "--grpc", f"127.0.0.1:{free_ports(1)[0]}",
            "--data-dir", str(tmp_path / "data"), cwd=tmp_path, timeout=30,
        )  # fmt: skip
    assert_one_line_error(result, "raft", raft, "in use")


def test_node_start_with_an_unknown_config_key_names_the_key(tmp_path: Path) -> None:
    config = tmp_path / "node.yaml"
    config.write_text("node_id: cfg-node\nno_such_setting: 3\n")
    result = run_cli("node", "start", "--config", str(config), cwd=tmp_path, timeout=30)
    assert_one_line_error(result, "no_such_setting")


@pytest.mark.parametrize(("below", "words"), [("", "not a directory"), ("data", "cannot make")])
def test_node_start_with_a_data_dir_it_cannot_use_names_the_key(
    below: str, words: str, tmp_path: Path
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n")
    data_dir = a_file / below if below else a_file
    result = run_cli(
        "node", "start", "--grpc", f"127.0.0.1:{free_ports(1)[0]}", "--data-dir", str(data_dir),
        cwd=tmp_path, timeout=30,
    )  # fmt: skip
    assert_one_line_error(result, "data_dir", str(data_dir), words)


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [("--label", "=gpu", "no key"), ("--resource", "gaming=maybe", "true or false")],
)
def test_node_start_with_a_malformed_label_or_resource_names_it(
    flag: str, value: str, words: str, tmp_path: Path
) -> None:
    result = run_cli(
        "node", "start", flag, value, "--data-dir", str(tmp_path / "data"), cwd=tmp_path,
        timeout=30,
    )  # fmt: skip
    assert_one_line_error(result, flag, value, words)
    assert not (tmp_path / "data").exists()


def test_node_start_with_peers_and_no_secret_asks_for_the_secret(tmp_path: Path) -> None:
    raft_a, raft_b = (f"127.0.0.1:{p}" for p in free_ports(2))
    result = run_cli(
        "node", "start", "--raft", raft_a, "--grpc", f"127.0.0.1:{free_ports(1)[0]}",
        "--peers", f"{raft_a},{raft_b}", "--data-dir", str(tmp_path / "data"),
        cwd=tmp_path, timeout=30,
    )  # fmt: skip
    assert_one_line_error(result, "secret")


# --- cortex dev / cortex demo -------------------------------------------------


def _kill_leftovers(pids: list[int], marker: str) -> None:
    """SIGKILLs dev-cluster processes that are still up (only ours: their
    command line names our data dir)."""
    for pid in pids:
        if _pid_running(pid) and marker in _pid_cmdline(pid):
            os.kill(pid, signal.SIGKILL)


def test_dev_starts_a_three_node_cluster_and_dev_stop_stops_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "dev"
    base = free_base_port(3)
    state_file = data_dir / "dev-cluster.json"
    pids: list[int] = []
    try:
        started = run_cli(
            "dev", "--nodes", "3", "--data-dir", str(data_dir), "--base-port", str(base),
            cwd=tmp_path, timeout=90,
        )  # fmt: skip
        if state_file.exists():
            pids = [n["pid"] for n in json.loads(state_file.read_text())["nodes"]]
        assert started.returncode == 0, _describe(started)
        for i in range(3):
            assert f"127.0.0.1:{base + i}" in started.stdout
            assert f"127.0.0.1:{base + 100 + i}" in started.stdout
            assert f"http 127.0.0.1:{base + 200 + i}" in started.stdout
        assert f"cortex dev stop --data-dir {data_dir}" in started.stdout
        assert len(pids) == 3 and all(_pid_running(pid) for pid in pids)

        status = run_json("--node", f"127.0.0.1:{base + 101}", "status", "--json")
        assert status["leader"]
        assert len(status["nodes"]) == 3
        # Every node's resources are known before it returns, so the first
        # tasks are not all placed on the leader for want of reports.
        listed = run_json("--node", f"127.0.0.1:{base + 101}", "node", "list", "--json")
        assert all(n["resources"] for n in listed), listed
        assert {n["grpc_address"] for n in status["nodes"]} == {
            f"127.0.0.1:{base + 100 + i}" for i in range(3)
        }

        stopped = run_cli("dev", "stop", "--data-dir", str(data_dir), cwd=tmp_path, timeout=60)
        assert stopped.returncode == 0, _describe(stopped)
        wait_until(lambda: not any(_pid_running(pid) for pid in pids), 20, what="dev nodes to exit")
        assert not state_file.exists()
        gone = run_cli("--node", f"127.0.0.1:{base + 100}", "status", timeout=30)
        assert_one_line_error(gone, f"127.0.0.1:{base + 100}")
    finally:
        if state_file.exists():
            pids = pids or [n["pid"] for n in json.loads(state_file.read_text())["nodes"]]
            run_cli("dev", "stop", "--data-dir", str(data_dir), cwd=tmp_path, timeout=60)
        _kill_leftovers(pids, str(data_dir))


def test_demo_runs_tasks_and_shows_matching_digests(tmp_path: Path) -> None:
    cortex = shutil.which("cortex")
    assert cortex, "the `cortex` console script is not installed"
    # mkdtemp honours TMPDIR, so the demo's cluster lives under tmp_path and
    # can be found (and stopped) if the demo does not clean up itself.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    try:
        result = run_cli(
            "demo", command=[cortex], env=_env(TMPDIR=str(scratch)), cwd=tmp_path, timeout=120
        )
        assert result.returncode == 0, _describe(result)
        out = result.stdout
        rows = [line.split() for line in out.splitlines()]
        task_rows = {
            row[0]: row
            for row in rows
            if len(row) >= 5 and row[0] in {"hello", "where", "python", "sum", "fails"}
        }
        assert set(task_rows) == {"hello", "where", "python", "sum", "fails"}, out
        for name in ("hello", "where", "python", "sum"):
            assert task_rows[name][3] == "completed", out
            assert task_rows[name][4] == "0", out
        assert "hello from Cortex" in out
        assert "sum of 1..1000 = 500500" in out
        # The example workflow: its condition took report and skipped alert.
        assert re.search(r"^demo completed [0-9a-f-]{36}$", out, re.MULTILINE), out
        states = dict(re.findall(r"(fetch|count|report|alert) [0-9a-f]{8} (\w+)", out))
        assert states == {
            "fetch": "completed", "count": "completed", "report": "completed", "alert": "skipped"
        }, out  # fmt: skip
        assert '"records": 3' in out, out
        digests = re.findall(
            r"^\s*(node-\d+): applied (\d+)\s+digest ([0-9a-f]+)\s*$", out, re.MULTILINE
        )
        assert len(digests) == 3, out
        assert len({(applied, digest) for _, applied, digest in digests}) == 1, out
        assert "cluster stopped" in out
        assert list(scratch.glob("cortex-demo-*")) == [], "the demo left its data dir behind"
    finally:
        for state_file in scratch.glob("cortex-demo-*/dev-cluster.json"):
            pids = [n["pid"] for n in json.loads(state_file.read_text())["nodes"]]
            run_cli("dev", "stop", "--data-dir", str(state_file.parent), timeout=60)
            _kill_leftovers(pids, str(state_file.parent))

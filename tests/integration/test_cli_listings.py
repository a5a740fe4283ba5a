"""Listings that scale, through the `cortex` command line against a real
3-node cluster: newest first, --sort, --since/--until, --all streaming every
page exactly once (10,000 tasks), the `next:` hint, the output formats,
unique id prefixes wherever an id is taken (and refused when ambiguous),
and tables that keep to 80 columns without cutting an id."""

from __future__ import annotations

import bisect
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from rich.cells import cell_len

from cortex.api.client import CortexClient
from cortex.errors import InvalidArgument, NotFound
from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, ClusterNode, shared_cluster, wait_until

pytestmark = pytest.mark.cluster

CLI = [sys.executable, "-m", "cortex.cli.main"]
BULK_TASKS = 10_000
# Something that looks like an id or a prefix of one (8 or more hex digits,
# maybe with a UUID's dashes), or such a thing cut with an ellipsis.
ID_TOKEN = re.compile(r"(?<![0-9a-z-])[0-9a-f]{8}[0-9a-f-]*…?")
UUID = re.compile(r"^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$")


def _env(columns: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env["COLUMNS"] = str(columns)
    return env


def cli(
    node: ClusterNode, *args: str, columns: int = 250, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "--node", node.grpc, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(columns),
        stdin=subprocess.DEVNULL,
    )


def _describe(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr}"


def ok(node: ClusterNode, *args: str, columns: int = 250) -> str:
    result = cli(node, *args, columns=columns)
    assert result.returncode == 0, _describe(result)
    return result.stdout


def names(node: ClusterNode, *args: str) -> list[str]:
    return ok(node, *args, "-o", "name").split()


def refused(node: ClusterNode, *args: str) -> str:
    """The one stderr line of a command that must fail with exit 1."""
    result = cli(node, *args)
    assert result.returncode == 1 and not result.stdout.strip(), _describe(result)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in lines[0], _describe(result)
    return lines[0]


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def noop(client: CortexClient) -> pb.Task:
    return client.submit_task(pb.TaskSpec(type="noop")).task


def dead_letter(client: CortexClient) -> pb.Task:
    """A task that fails, is retried once at once and fails again, once
    dead-lettered."""
    policy = pb.RetryPolicy(max_retries=1)
    policy.backoff.FromMilliseconds(10)
    spec = pb.TaskSpec(command=["false"], retry_policy=policy)
    task_id = client.submit_task(spec).task.id

    def dead() -> pb.Task | None:
        task = client.get_task(task_id).task
        return task if task.state == pb.TASK_STATE_DEAD_LETTER else None

    task = wait_until(dead, 60, what=f"task {task_id} dead-lettered")
    assert task is not None
    return task


def submit_workflow(client: CortexClient, name: str, tasks: dict[str, Any]) -> str:
    definition = json.dumps({"name": name, "tasks": tasks})
    return client.submit_workflow(definition, pb.DEFINITION_FORMAT_JSON).workflow_id


def create_ms(message: Any) -> int:
    return int(message.create_time.ToMilliseconds())


def every_id(client: CortexClient, kinds: tuple[str, ...] = ("tasks", "workflows")) -> list[str]:
    """Every task and (or) workflow id in the cluster, sorted."""
    ids: list[str] = []
    for kind in kinds:
        method = client.list_tasks if kind == "tasks" else client.list_workflows
        token = ""
        while True:
            page = method(page_size=1000, page_token=token)
            ids += [item.id for item in getattr(page, kind)]
            token = page.next_page_token
            if not token:
                break
    return sorted(ids)


ACTIVE = [
    pb.TASK_STATE_PENDING,
    pb.TASK_STATE_QUEUED,
    pb.TASK_STATE_ASSIGNED,
    pb.TASK_STATE_RUNNING,
]


def settle(client: CortexClient) -> None:
    """Once no task is left to run (so two listings in a row agree)."""
    wait_until(
        lambda: client.list_tasks(states=ACTIVE, page_size=1).total_size == 0,
        120,
        what="every task to end",
    )


SHELL_TASK = {"a": {"spec": {"command": "true"}}}


def matching(ids: list[str], prefix: str) -> list[str]:
    """The ids of a sorted list that start with `prefix`."""
    start = bisect.bisect_left(ids, prefix)
    found = []
    for item in ids[start:]:
        if not item.startswith(prefix):
            break
        found.append(item)
    return found


def check_ids_shown(output: str, ids: list[str]) -> list[str]:
    """Every id-like token in `output` is complete or a prefix of exactly one
    real id (a token cut with "…" would say so; none is expected); returns
    the full ids they name."""
    named = []
    for token in ID_TOKEN.findall(output):
        assert not token.endswith("…") or not UUID.match(token[:-1]), token
        if token.endswith("…"):
            continue
        found = matching(ids, token)
        assert len(found) == 1, f"{token!r} names {len(found)} ids, not one:\n{output}"
        named.append(found[0])
    return named


def check_fits(output: str, width: int = 80) -> list[str]:
    lines = output.splitlines()
    wide = [line for line in lines if cell_len(line.rstrip()) > width]
    assert not wide, f"lines wider than {width}:\n" + "\n".join(wide)
    return lines


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Cluster]:
    yield from shared_cluster(tmp_path_factory, request, "listings")


@dataclass(frozen=True)
class Bulk:
    workflow_id: str
    task_ids: list[str]


@pytest.fixture(scope="module")
def bulk(cluster: Cluster) -> Bulk:
    """10,000 noop tasks, submitted through the batch path (one workflow that
    travels in parts of 100 tasks), running while the tests list them."""
    tasks = {f"bulk-{i:05d}": {"type": "noop"} for i in range(BULK_TASKS)}
    with cluster.nodes[0].client(timeout_s=120) as client:
        workflow_id = submit_workflow(client, "bulk", tasks)
        workflow = client.get_workflow(workflow_id).workflow
    ids = [task.task_id for task in workflow.tasks]
    assert len(set(ids)) == BULK_TASKS
    return Bulk(workflow_id, ids)


# -- order and time windows -----------------------------------------------------------


def test_listings_are_newest_first_unless_sorted_oldest_first(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    with node.client() as client:
        workflows = [submit_workflow(client, f"order-{i}", SHELL_TASK) for i in range(3)]
        tasks = [noop(client).id for _ in range(5)]
        dead = [dead_letter(client).id for _ in range(2)]
        assert [t.id for t in client.list_tasks(page_size=2).tasks] == dead[::-1]

    reader = cluster.nodes[1]
    newest = names(reader, "task", "list", "--type", "noop", "--limit", "5")
    assert newest == tasks[::-1]
    oldest = names(reader, "task", "list", "--type", "noop", "--sort", "oldest", "--all")
    assert oldest[-5:] == tasks
    assert names(reader, "workflow", "list", "--limit", "3") == workflows[::-1]
    assert names(reader, "workflow", "list", "--sort", "oldest", "--all")[-3:] == workflows
    assert names(reader, "dlq", "list", "--limit", "2") == dead[::-1]
    assert names(reader, "dlq", "list", "--sort", "oldest", "--all")[-2:] == dead


def test_since_and_until_select_by_submit_time(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    with node.client() as client:
        before = [noop(client) for _ in range(3)]
        dead_before = dead_letter(client)
        workflow_before = submit_workflow(client, "before", SHELL_TASK)
        first_ms = create_ms(before[0])
        boundary_ms = (
            max(
                [create_ms(t) for t in (*before, dead_before)]
                + [create_ms(client.get_workflow(workflow_before).workflow)]
            )
            + 1
        )
        wait_until(lambda: time.time() * 1000 > boundary_ms + 5, 5, 0.005, "the clock to move on")
        after = [noop(client) for _ in range(3)]
        dead_after = dead_letter(client)
        workflow_after = submit_workflow(client, "after", SHELL_TASK)
        assert all(create_ms(t) >= boundary_ms for t in (*after, dead_after))

        # The API itself: a window of create times, and a window that is empty.
        window = pb.TimeRange()
        window.start_time.FromMilliseconds(boundary_ms)
        listed = client.list_tasks(type="noop", create_time_range=window)
        assert [t.id for t in listed.tasks] == [t.id for t in after[::-1]]
        assert listed.total_size == 3
        window.end_time.FromMilliseconds(boundary_ms)
        with pytest.raises(InvalidArgument, match="end_time must be after start_time"):
            client.list_tasks(create_time_range=window)

    reader = cluster.nodes[2]
    since = names(reader, "task", "list", "--type", "noop", "--since", iso(boundary_ms), "--all")
    assert since == [t.id for t in after[::-1]]
    between = names(
        reader, "task", "list", "--type", "noop",
        "--since", iso(first_ms), "--until", iso(boundary_ms), "--all",
    )  # fmt: skip
    assert between == [t.id for t in before[::-1]]
    recent = set(names(reader, "task", "list", "--since", "10m", "--all"))
    assert {t.id for t in (*before, *after)} <= recent
    assert not {t.id for t in (*before, *after)} & set(
        names(reader, "task", "list", "--until", "10m", "--all")
    )
    assert names(reader, "dlq", "list", "--since", iso(boundary_ms)) == [dead_after.id]
    dead_until = names(reader, "dlq", "list", "--until", iso(boundary_ms), "--all")
    assert dead_before.id in dead_until and dead_after.id not in dead_until
    assert names(reader, "workflow", "list", "--since", iso(boundary_ms)) == [workflow_after]
    workflows_until = names(reader, "workflow", "list", "--until", iso(boundary_ms), "--all")
    assert workflow_before in workflows_until and workflow_after not in workflows_until
    line = refused(reader, "task", "list", "--since", "1m", "--until", "2m")
    assert "--until" in line and "--since" in line


def test_the_next_hint_names_a_command_that_lists_the_next_page(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    with node.client() as client:
        start_ms = int(time.time() * 1000) - 1
        submitted = [noop(client).id for _ in range(5)]
    seen: list[str] = []
    command = [*CLI, "--node", node.grpc, "task", "list", "--type", "noop", "-o", "name",
               "--since", iso(start_ms), "--limit", "2"]  # fmt: skip
    for _ in range(5):
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, env=_env(80))
        assert result.returncode == 0, _describe(result)
        seen += result.stdout.split()
        hints = [line for line in result.stderr.splitlines() if line.startswith("next: ")]
        if not hints:
            break
        words = shlex.split(hints[0].removeprefix("next: "))
        assert words[0] == "cortex" and "--page-token" in words, hints
        # Relative or not, the window is repeated exactly (the token holds to it).
        assert words[words.index("--since") + 1] == iso(start_ms)
        command = [*CLI, *words[1:]]
    assert seen == submitted[::-1]
    every = cli(node, "task", "list", "--type", "noop", "--limit", "2", "--all")
    assert every.returncode == 0 and "next:" not in every.stderr, _describe(every)


# -- output formats -------------------------------------------------------------------


def test_output_formats_agree(cluster: Cluster) -> None:
    node = cluster.nodes[1]
    with node.client() as client:
        submit_workflow(client, "formats", SHELL_TASK)
        dead_letter(client)
        ids = [noop(client).id for _ in range(3)]
        settle(client)
    for listing in (["task", "list"], ["workflow", "list"], ["dlq", "list"]):
        args = [*listing, "--limit", "3"]
        as_json = json.loads(ok(node, *args, "-o", "json"))
        key = "workflows" if listing[0] == "workflow" else "tasks"
        listed = [item["id"] for item in as_json[key]]
        assert json.loads(ok(node, *args, "--json")) == as_json
        assert yaml.safe_load(ok(node, *args, "-o", "yaml")) == as_json
        assert names(node, *args) == listed
        wide = ok(node, *args, "-o", "wide")
        assert all(item in wide for item in listed), wide
        streamed = json.loads(ok(node, *listing, "--all", "--limit", "2", "-o", "json"))
        assert streamed[:3] == as_json[key]
        streamed_ids = [item["id"] for item in streamed]
        assert len(set(streamed_ids)) == len(streamed_ids) == as_json["total"]
        as_yaml = yaml.safe_load(ok(node, *listing, "--all", "--limit", "2", "-o", "yaml"))
        assert [item["id"] for item in as_yaml] == streamed_ids
    assert names(node, "task", "list", "--limit", "3") == ids[::-1]
    nodes = json.loads(ok(node, "node", "list", "-o", "json"))
    assert [n["node_id"] for n in nodes] == names(node, "node", "list")
    assert [n["node_id"] for n in yaml.safe_load(ok(node, "node", "list", "-o", "yaml"))] == [
        n["node_id"] for n in nodes
    ]
    assert "grpc" in ok(node, "node", "list", "--wide")
    line = refused(node, "task", "list", "--json", "-o", "yaml")
    assert "--json" in line and "yaml" in line


# -- ids by unique prefix -------------------------------------------------------------


def unique_prefix(ids: list[str], full: str, at_least: int) -> str:
    """`full`'s shortest prefix of `at_least` or more characters that no other
    id of the sorted `ids` starts with."""
    length = at_least
    while len(matching(ids, full[:length])) > 1:
        length += 1
    return full[:length]


def test_unique_id_prefixes_are_accepted_wherever_an_id_is_taken(cluster: Cluster) -> None:
    node, other = cluster.nodes[0], cluster.nodes[2]
    with node.client() as client:
        done = client.submit_task(pb.TaskSpec(command=["echo", "prefix-output"])).task.id
        client.get_task_result(done, wait=True, timeout_ms=60_000)
        sleeper = client.submit_task(pb.TaskSpec(command=["sleep", "120"])).task.id
        dead = dead_letter(client).id
        finished = submit_workflow(client, "prefixes", SHELL_TASK)
        running = submit_workflow(client, "to-cancel", {"s": {"spec": {"command": "sleep 120"}}})
        # Ids made in the same tenth of a second share three characters
        # (`cortex.ids`): a prefix is taken as long as it is unique.
        ids = every_id(client)

    def short(full: str, at_least: int) -> str:
        return unique_prefix(ids, full, at_least)

    assert json.loads(ok(other, "task", "get", short(done, 8), "-o", "json"))["id"] == done
    assert done in ok(other, "task", "get", short(done, 6))
    assert ok(other, "logs", short(done, 5)) == "prefix-output\n"
    events = [
        json.loads(line)
        for line in ok(other, "events", "--task", short(done, 7), "--json").splitlines()
    ]
    assert events and {event["task_id"] for event in events} == {done}
    status = json.loads(ok(other, "workflow", "status", short(finished, 8), "-o", "json"))
    assert status["id"] == finished
    assert finished in ok(other, "workflow", "status", short(finished, 4))

    # Writes resolve the prefix before proposing: the entry carries the full id.
    assert ok(other, "task", "cancel", short(sleeper, 8)).split() == [sleeper, "cancelled"]
    assert ok(other, "workflow", "cancel", short(running, 8)).split() == [running, "cancelled"]
    assert ok(other, "dlq", "retry", short(dead, 8)) == (
        f"{dead} queued again with a fresh retry budget (1 retry)\n"
    )
    with node.client() as client:
        assert client.get_task(sleeper).task.state == pb.TASK_STATE_CANCELLED
        assert client.get_workflow(running).workflow.state == pb.WORKFLOW_STATE_CANCELLED
        retried = client.get_task(dead, include_events=True).events
        assert pb.EVENT_TYPE_RETRIED in [event.type for event in retried]
        # The gRPC API resolves prefixes for every client (the MCP tools too).
        assert client.get_task(short(done, 4)).task.id == done
        assert client.get_task_result(short(done, 9)).task.id == done
        assert client.get_workflow(short(finished, 6)).workflow.id == finished
        with pytest.raises(NotFound, match="at least 4 characters"):
            client.get_task(done[:3])
    cluster.wait_converged()

    assert "at least 4 characters" in refused(other, "task", "get", done[:3])
    assert "no task with id zzzzzzzz" in refused(other, "task", "get", "zzzzzzzz")
    assert "no workflow with id zzzzzzzz" in refused(other, "workflow", "status", "zzzzzzzz")


# -- tables at 80 columns -------------------------------------------------------------


def test_every_table_fits_80_columns_and_never_cuts_an_id(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    long_command = ["echo", *[f"word{i}" for i in range(40)]]
    with node.client() as client:
        for _ in range(3):
            noop(client)
        task = client.submit_task(pb.TaskSpec(command=long_command)).task.id
        client.get_task_result(task, wait=True, timeout_ms=60_000)
        dead_letter(client)
        keys: dict[str, Any] = {
            f"a-rather-long-task-key-number-{i}": {"type": "noop"} for i in range(4)
        }
        keys["after"] = {"type": "noop", "dependsOn": list(keys)}
        workflow = submit_workflow(
            client, "a-workflow-with-a-name-much-longer-than-a-column-should-be", keys
        )
        tasks_of_workflow = {t.key: t.task_id for t in client.get_workflow(workflow).workflow.tasks}
        settle(client)
        ids = every_id(client)

    for listing, key in (("task", "tasks"), ("workflow", "workflows"), ("dlq", "tasks")):
        table = ok(node, listing, "list", "--limit", "10", columns=80)
        lines = check_fits(table)
        page = json.loads(ok(node, listing, "list", "--limit", "10", "-o", "json"))
        expected = [item["id"] for item in page[key]]
        rows = lines[1:-1]
        assert [check_ids_shown(row.split()[0], ids) for row in rows] == [[i] for i in expected]
        check_ids_shown(table, ids)
    header = ok(node, "workflow", "list", columns=80).splitlines()[0].split()
    assert header == ["id", "name", "state", "tasks", "age", "took", "error"]
    assert task[:8] in ok(node, "task", "list", "--limit", "10", columns=80)

    nodes = check_fits(ok(node, "node", "list", columns=80))
    assert nodes[0].split() == ["node", "status", "cpu", "memory", "disk", "tasks", "labels"]
    assert [line.split()[0] for line in nodes[1:]] == [n.node_id for n in cluster.nodes]

    status = check_fits(ok(node, "status", columns=80))
    for member in cluster.nodes:
        assert any(member.grpc in line and member.raft in line for line in status), status

    tree = ok(node, "workflow", "status", workflow[:8], columns=80)
    check_fits(tree)
    shown = check_ids_shown(tree, ids)
    assert workflow in shown
    assert set(tasks_of_workflow.values()) <= set(shown)


def test_a_long_chain_says_what_is_hidden_and_all_shows_every_task(cluster: Cluster) -> None:
    node = cluster.nodes[1]
    chain: dict[str, Any] = {"t0": {"type": "noop"}}
    chain.update({f"t{i}": {"type": "noop", "dependsOn": [f"t{i - 1}"]} for i in range(1, 500)})
    with node.client() as client:
        workflow = submit_workflow(client, "chain", chain)
    label = re.compile(r"[└├]── (t\d+) ")

    tree = ok(node, "workflow", "status", workflow, columns=80)
    check_fits(tree)
    shown = label.findall(tree)
    hidden = re.search(r"… ([\d,]+)[\s│]+more[\s│]+tasks[\s│]+below.*?--all[\s│]+shows", tree, re.S)
    assert hidden, tree
    assert shown == [f"t{i}" for i in range(len(shown))]
    assert len(shown) + int(hidden.group(1).replace(",", "")) == 500

    everything = ok(node, "workflow", "status", workflow, "--all", columns=80)
    check_fits(everything)
    assert label.findall(everything) == list(chain)
    assert "more tasks below" not in everything


# -- one task with huge lists ---------------------------------------------------------


def test_task_get_bounds_huge_lists_and_json_keeps_them(cluster: Cluster) -> None:
    node = cluster.nodes[2]
    spec = pb.TaskSpec(command=["echo", *[f"arg{i}" for i in range(5000)]])
    spec.constraints.node_labels.extend(f"l{i}" for i in range(100_000))
    with node.client() as client:
        task_id = client.submit_task(spec).task.id
    try:
        shown = ok(node, "task", "get", task_id[:8], columns=80)
        check_fits(shown)
        assert len(shown) < 20_000, len(shown)
        # (The count may wrap onto the next line at 80 columns.)
        assert re.search(r"…\s+4,9\d\d\s+more\s+arguments", shown), shown
        assert re.search(r"…\s+99,\d{3}\s+more\s+labels", shown), shown
        waiting = re.findall(r"n\d: missing labels l0, l1, [^…]*…\s+99,\d{3}\s+more", shown)
        assert len(waiting) == len(cluster.nodes), shown
        full = json.loads(ok(node, "task", "get", task_id[:8], "-o", "json"))
        assert full["pending_reasons"], full.keys()
        assert all("l99999" in reason for reason in full["pending_reasons"])
        assert len(full["command"]) == 5001
    finally:
        with node.client() as client:
            client.cancel_task(task_id)


# -- 10,000 tasks: --all, and a prefix they share -----------------------------------


def test_an_ambiguous_prefix_is_refused_naming_its_candidates(cluster: Cluster, bulk: Bulk) -> None:
    node = cluster.nodes[1]
    ordered = sorted(bulk.task_ids)
    common, prefix = 0, ""
    for a, b in zip(ordered, ordered[1:], strict=False):
        length = len(os.path.commonprefix([a, b]))
        if length > common:
            common, prefix = length, a[:length]
    assert common >= 4, "10,000 random ids share a 4-character prefix somewhere"
    with node.client() as client:
        candidates = matching(every_id(client, ("tasks",)), prefix)
        with pytest.raises(InvalidArgument, match="ambiguous id prefix"):
            client.get_task(prefix)
        with pytest.raises(InvalidArgument, match="ambiguous id prefix"):
            client.cancel_task(prefix)
    assert len(candidates) >= 2
    for command in (["task", "get", prefix], ["logs", prefix], ["task", "cancel", prefix]):
        line = refused(node, *command)
        assert f"ambiguous id prefix '{prefix}'" in line, line
        for candidate in candidates[:3]:
            assert candidate in line, line
        assert ("…" in line) == (len(candidates) > 3), line


def test_all_streams_every_page_exactly_once(cluster: Cluster, bulk: Bulk) -> None:
    node = cluster.nodes[2]
    expected = set(bulk.task_ids)
    started = time.monotonic()
    listed = names(node, "task", "list", "--workflow", bulk.workflow_id[:8], "--all")
    took = time.monotonic() - started
    print(f"task list --all -o name: {len(listed)} tasks in {took:.1f}s (pages of 100)")
    assert len(listed) == BULK_TASKS and set(listed) == expected

    oldest = names(
        node, "task", "list", "--workflow", bulk.workflow_id, "--all", "--sort", "oldest",
        "--limit", "1000",
    )  # fmt: skip
    assert oldest == listed[::-1]

    started = time.monotonic()
    as_json = json.loads(
        ok(node, "task", "list", "--workflow", bulk.workflow_id, "--all", "-o", "json")
    )
    print(f"task list --all -o json: {len(as_json)} tasks in {time.monotonic() - started:.1f}s")
    assert [task["id"] for task in as_json] == listed

    started = time.monotonic()
    table = ok(node, "task", "list", "--workflow", bulk.workflow_id, "--all", columns=80)
    print(f"task list --all (table): {time.monotonic() - started:.1f}s")
    lines = check_fits(table)
    assert lines[0].split()[:2] == ["id", "state"]
    assert sum(line.startswith("id ") for line in lines) == 1
    assert lines[-1] == f"{BULK_TASKS:,} tasks"
    rows = [row.split()[0] for row in lines[1:-1]]
    assert len(rows) == BULK_TASKS
    # Each a prefix of its task's id, unique within its page of 100.
    assert all(
        len(short) >= 8 and full.startswith(short) for short, full in zip(rows, listed, strict=True)
    )
    for start in range(0, BULK_TASKS, 100):
        page = sorted(listed[start : start + 100])
        assert all(len(matching(page, short)) == 1 for short in rows[start : start + 100])

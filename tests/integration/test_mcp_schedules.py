"""The schedule, limit and fairness tools of the MCP server, in-process (the
official client over memory streams) against a real one-node cluster: what
each returns, the cluster status resource's new sections, and bad arguments
as tool errors naming the argument, with nothing created."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import pytest
from mcp import Client

from cortex.mcp import build_server
from tests.cluster import Cluster, shared_cluster

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Cluster]:
    yield from shared_cluster(tmp_path_factory, request, "mcp-schedules", size=1)


def _data(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content) if set(content) == {"result"} else content
    return json.loads(result.content[0].text)


def _error_text(result: Any) -> str:
    assert result.is_error, result
    return str(result.content[0].text)


async def _until(
    fetch: Callable[[], Awaitable[Any]], done: Callable[[Any], bool], what: str
) -> Any:
    """What a tool answers once `done` holds for it (polled for up to 20 s)."""
    deadline = time.monotonic() + 20
    while True:
        found = _data(await fetch())
        if done(found):
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {found}")
        await anyio.sleep(0.2)


def _session(cluster: Cluster, body: Any) -> None:
    server = build_server(cluster.nodes[0].grpc, tls=False)

    async def run() -> None:
        async with Client(server, read_timeout_seconds=60) as client:

            async def call(tool: str, arguments: dict[str, Any]) -> Any:
                return await client.call_tool(tool, arguments)

            await body(client, call)

    anyio.run(run)


def test_schedule_tools_from_create_to_delete(cluster: Cluster) -> None:
    async def body(client: Any, call: Any) -> None:
        arguments = {"name": "mcp-ticker", "every": "1s", "command": ["echo", "tick"],
                     "priority": 6, "concurrency_key": "mcp-key", "overlap": "allow_all",
                     "catchup_window": "30s"}  # fmt: skip
        created = _data(await call("create_schedule", arguments))
        assert created["created"] is True
        schedule = created["schedule"]
        assert schedule["name"] == "mcp-ticker" and schedule["every_ms"] == 1000
        assert schedule["overlap"] == "allow_all"
        assert schedule["catchup_window_ms"] == 30_000
        assert schedule["task"]["command"] == ["echo", "tick"]
        assert schedule["task"]["concurrencyKey"] == "mcp-key"
        again = _data(await call("create_schedule", arguments))
        assert again["created"] is False and again["schedule"]["id"] == schedule["id"]

        shown = await _until(
            lambda: call("get_schedule", {"schedule": "mcp-ticker"}),
            lambda schedule: schedule["fired"] >= 1,
            "a firing",
        )
        assert shown["recent"][0]["action"] == "fire" and shown["recent"][0]["task_id"]
        listed = _data(await call("list_schedules", {}))["schedules"]
        assert schedule["id"] in [s["id"] for s in listed]

        paused = _data(await call("pause_schedule", {"schedule": "mcp-ticker"}))
        assert paused["paused"] is True and paused["next_slot"] is None
        started = _data(await call("trigger_schedule", {"schedule": schedule["id"]}))
        assert started["task_id"] and started["workflow_id"] is None
        resumed = _data(await call("resume_schedule", {"schedule": "mcp-ticker"}))
        assert resumed["paused"] is False and resumed["next_slot"]
        assert resumed["recent"][0]["action"] == "trigger"

        status = json.loads(
            (await client.read_resource("cortex://cluster/status")).contents[0].text
        )
        assert status["schedules"]["count"] >= 1 and status["schedules"]["next"]["name"]
        assert isinstance(status["limits"], list)

        deleted = _data(await call("delete_schedule", {"schedule": "mcp-ticker"}))
        assert deleted["id"] == schedule["id"]
        assert _error_text(await call("get_schedule", {"schedule": "mcp-ticker"})) == (
            "not found: no schedule named 'mcp-ticker'"
        )

        workflow = {"name": "mcp-nightly", "tasks": {"a": {"type": "shell",
                                                           "spec": {"command": "echo a"}}}}  # fmt: skip
        nightly = _data(await call("create_schedule", {
            "name": "mcp-nightly", "cron": "30 2 * * *", "timezone": "Europe/Berlin",
            "workflow_definition": workflow, "paused": True}))["schedule"]  # fmt: skip
        assert nightly["timing"] == "30 2 * * * (Europe/Berlin)" and nightly["paused"] is True
        assert nightly["workflow_format"] == "json" and nightly["task"] is None
        run = _data(await call("trigger_schedule", {"schedule": "mcp-nightly"}))
        assert run["workflow_id"] and run["task_id"] is None
        _data(await call("delete_schedule", {"schedule": "mcp-nightly"}))

    _session(cluster, body)


def test_limit_and_fairness_tools(cluster: Cluster) -> None:
    async def body(client: Any, call: Any) -> None:
        limit = _data(await call("set_limit", {"key": "mcp-deploy", "max_running": 1,
                                               "rate": "30/m"}))  # fmt: skip
        assert limit["key"] == "mcp-deploy" and limit["max_running"] == 1
        assert limit["rate_per_minute"] == 30
        assert limit["rate"] == "30/m" and limit["burst"] == 1
        first = _data(await call("submit_task", {"command": ["sleep", "30"],
                                                 "concurrency_key": "mcp-deploy",
                                                 "fairness_key": "mcp-team"}))  # fmt: skip
        second = _data(await call("submit_task", {"command": "true",
                                                  "concurrency_key": "mcp-deploy"}))  # fmt: skip
        held = await _until(
            lambda: call("get_task_result", {"task_id": second["task_id"]}),
            lambda task: bool(task.get("pending_reasons")),
            "a reason it waits",
        )
        assert held["state"] == "queued"
        assert any("mcp-deploy at 1/1 running" in r for r in held["pending_reasons"])

        weight = _data(await call("set_fairness_weight", {"key": "mcp-team", "weight": 4}))
        assert weight == {"key": "mcp-team", "weight": 4, "queued": 0, "active": 1}
        listed = _data(await call("list_limits", {}))
        assert [x["running"] for x in listed["limits"] if x["key"] == "mcp-deploy"] == [1]
        assert weight in listed["weights"]
        status = json.loads(
            (await client.read_resource("cortex://cluster/status")).contents[0].text
        )
        assert "mcp-deploy" in [x["key"] for x in status["limits"]]

        deleted = _data(await call("delete_limit", {"key": "mcp-deploy"}))
        assert deleted["key"] == "mcp-deploy"
        assert _error_text(await call("delete_limit", {"key": "mcp-deploy"})) == (
            "not found: no limit on key 'mcp-deploy'"
        )
        done = _data(await call("get_task_result", {"task_id": second["task_id"], "wait": True,
                                                    "timeout_s": 20}))  # fmt: skip
        assert done["state"] == "completed"
        _data(await call("cancel_task", {"task_id": first["task_id"]}))

    _session(cluster, body)


def test_bad_arguments_are_tool_errors_and_create_nothing(cluster: Cluster) -> None:
    async def body(client: Any, call: Any) -> None:
        task = {"command": "true"}
        for tool, arguments, expected in (
            ("create_schedule", {"name": "s", "every": "5x", **task},
             "invalid argument: every '5x' must read like 30s"),
            ("create_schedule", {"name": "s", "every": "500ms", **task},
             "invalid argument: every must be from 1s to 366d"),
            ("create_schedule", {"name": "s", "every": "5m", "cron": "* * * * *", **task},
             "invalid argument: give exactly one of cron and every"),
            ("create_schedule", {"name": "s", "cron": "0 3 * *", **task},
             "invalid argument: cron '0 3 * *' must have five fields"),
            ("create_schedule", {"name": "s", "cron": "0 3 * * *", "timezone": "Mars/Base",
                                 **task}, "invalid argument: unknown timezone 'Mars/Base'"),
            ("create_schedule", {"name": "s", "every": "5m"},
             "invalid argument: give command (a task) or workflow_definition"),
            ("create_schedule", {"name": "s", "every": "5m", "workflow_definition": "{}",
                                 "priority": 3, **task},
             "invalid argument: workflow_definition cannot be combined with command, priority"),
            ("create_schedule", {"name": "s", "every": "5m", "overlap": "sometimes", **task},
             'overlap: must be one of "skip", "buffer_one", "allow_all", "cancel_previous"'),
            ("create_schedule", {"name": "s", "every": "5m", "concurrency_key": "a b", **task},
             "invalid argument: spec.concurrencyKey"),
            ("create_schedule", {"name": "", "every": "5m", **task}, "name: must not be empty"),
            ("set_limit", {"key": "k", "rate": "5/x"},
             "invalid argument: rate '5/x' must read N/s or N/m"),
            ("set_limit", {"key": "k"},
             "invalid argument: a limit needs a max running count, a rate, or both"),
            ("set_limit", {"key": "k", "max_running": -1}, "max_running: must be between 0 and"),
            ("set_fairness_weight", {"key": "k", "weight": 0},
             "weight: must be between 1 and 10000 (got 0)"),
            ("submit_task", {"command": "true", "fairness_key": "x" * 129},
             "fairness_key: must have at most 128 characters"),
            ("pause_schedule", {"schedule": "nope"}, "not found: no schedule named 'nope'"),
            ("trigger_schedule", {}, "schedule: missing (a required argument)"),
        ):  # fmt: skip
            text = _error_text(await call(tool, arguments))
            assert text.startswith(expected), (tool, arguments, text)
        assert "s" not in [s["name"] for s in _data(await call("list_schedules", {}))["schedules"]]
        assert "k" not in [x["key"] for x in _data(await call("list_limits", {}))["limits"]]

    _session(cluster, body)

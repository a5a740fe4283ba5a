"""The MCP server: every task-engine operation as a typed tool for agents,
mapped onto the gRPC client. Each tool's input schema is strict (no unknown
arguments, every number bounded, the bounds read from the task spec model
and the request limits); a call that breaks it, and any failure of the
node, is a tool error naming what went wrong; the server keeps serving."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError
from pydantic import Field, WithJsonSchema

from cortex.api.client import CortexClient
from cortex.api.convert import spec_to_proto
from cortex.api.limit_views import limit_json, weight_json
from cortex.api.schedule_views import schedule_json, schedules_summary
from cortex.api.tls import ClientTls, client_tls_from_env
from cortex.api.views import (
    enum_value,
    node_json,
    status_json,
    task_json,
    workflow_json,
)
from cortex.bounds import spec_bounds, wire_range, with_wire_bounds
from cortex.durations import parse_duration_ms
from cortex.errors import CortexError, InvalidArgument
from cortex.mcp.task_output import read_output
from cortex.mcp.tool_calls import CheckedServer, strict_tool
from cortex.mcp.tool_errors import cortex_tool_error, error_prefix
from cortex.proto_enums import enum_names
from cortex.requests import (
    MAX_DRAIN_DEADLINE_MS,
    MAX_ID_CHARS,
    MAX_IDEMPOTENCY_KEY,
    MAX_PAGE_SIZE,
    MAX_WAIT_MS,
)
from cortex.spec import Constraints, RetryPolicy, TaskSpec
from cortex.state.limit_bounds import MAX_BURST, MAX_RUNNING, MAX_WEIGHT
from cortex.state.schedule_bounds import MAX_CRON_CHARS
from cortex.v1 import cortex_pb2 as pb

if TYPE_CHECKING:
    from cortex.mcp.http import HttpListener

    ConstraintsArgument = Constraints
    RetryPolicyArgument = RetryPolicy
else:
    # The spec's models, each number the spec leaves open bounded by its wire field.
    ConstraintsArgument = with_wire_bounds(Constraints, pb.Constraints)
    RetryPolicyArgument = with_wire_bounds(RetryPolicy, pb.RetryPolicy)

T = TypeVar("T")

INSTRUCTIONS = """Cortex runs shell tasks and DAG workflows on a cluster of machines.
Submit work with submit_task or submit_workflow, follow it with get_task_result
(wait=true blocks until it ends) or stream_task_output (call repeatedly with the
returned next_offset until done is true), and react to failures with
list_dead_letter_tasks / retry_dead_letter_task. Run work on a clock with
create_schedule (cron or every); cap a kind of work with set_limit on a
concurrency_key, and share the cluster between fairness_keys by weight with
set_fairness_weight. Task states: pending, queued,
assigned, running, completed, failed, cancelled, skipped, dead_letter.
Arguments are checked against each tool's input schema: unknown ones and values
out of range are refused with a message naming the argument."""

# Most output one stream_task_output call returns, and longest it waits: an
# MCP call answers within a client's usual request timeout.
STREAM_CHUNK_LIMIT = 256 * 1024
MAX_STREAM_WAIT_S = 60
MAX_WAIT_S = MAX_WAIT_MS / 1000
MAX_DRAIN_DEADLINE_S = MAX_DRAIN_DEADLINE_MS / 1000

TaskStateName = Annotated[str, WithJsonSchema({"type": "string", "enum": enum_names(pb.TaskState)})]
WorkflowStateName = Annotated[
    str, WithJsonSchema({"type": "string", "enum": enum_names(pb.WorkflowState)})
]
# Executors are plugins: which types a cluster runs is known to its nodes
# (`cortex executors list`), which check the name when the task arrives.
ExecutorType = Annotated[str, Field(min_length=1, max_length=64)]
Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
PageSize = Annotated[int, Field(description="how many to return", ge=1, le=MAX_PAGE_SIZE)]
# A concurrency or fairness key, or a schedule's name.
Key = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]

# A task's spec, as submit_task and create_schedule take it.
Command = Annotated[
    list[str] | str | None,
    Field(
        description="argv list (['python', 'x.py']) or one string run with /bin/sh -c. "
        "Required for type 'shell'."
    ),
]
TaskType = Annotated[
    ExecutorType,
    Field(
        description="executor type: shell, noop, container (an image, on nodes with podman or "
        "docker), subagent (a prompt for the node's agent CLI), k8s_job, or one a plugin adds"
    ),
]
Options = Annotated[
    dict[str, Any] | None,
    Field(
        description="the executor's options, e.g. {'image': 'alpine:3', 'memoryMb': 256} for "
        "container, {'prompt': '...'} for subagent, {'duration_ms': 500} for noop"
    ),
]
Env = Annotated[dict[str, str] | None, Field(description="extra environment variables")]
Cwd = Annotated[str | None, Field(description="working directory on the executing node")]
TimeoutMs = Annotated[
    int | None,
    Field(description="kill the task after this long", **spec_bounds(TaskSpec, "timeout_ms")),
]
Priority = Annotated[
    int | None,
    Field(description="higher runs first (default 5)", **spec_bounds(TaskSpec, "priority")),
]
Placement = Annotated[
    ConstraintsArgument | None,
    Field(description="where it may run; nodeLabels are 'key=value' or 'key'"),
]
Retries = Annotated[
    RetryPolicyArgument | None,
    Field(description="retries after a failure, with a growing back-off"),
]
ConcurrencyKey = Annotated[
    Key | None,
    Field(
        description="run under this key's limits (set_limit): at most so many of its tasks "
        "at once, started no faster than its rate"
    ),
]
FairnessKey = Annotated[
    Key | None,
    Field(description="share placements with other keys by weight (set_fairness_weight)"),
]
OverlapPolicy = Annotated[
    str, WithJsonSchema({"type": "string", "enum": enum_names(pb.ScheduleOverlap)})
]


def _call(action: Callable[[], T]) -> T:
    """Runs a client call; Cortex errors become tool errors the agent can read."""
    try:
        return action()
    except CortexError as err:
        raise cortex_tool_error(err) from None


def _read(action: Callable[[], T]) -> T:
    """`_call` for resources."""
    try:
        return action()
    except CortexError as err:
        raise ResourceError(f"{error_prefix(err)}: {err}") from None


def _states(enum: Any, names: list[str] | None, what: str) -> list[int]:
    """State names ("running") as the enum's values."""
    return _call(lambda: [enum_value(enum, name, what) for name in names or []])


def _task_spec(
    command: list[str] | str | None,
    type: str,
    env: dict[str, str] | None,
    cwd: str | None,
    timeout_ms: int | None,
    priority: int | None,
    constraints: Constraints | None,
    retry_policy: RetryPolicy | None,
    concurrency_key: str | None = None,
    fairness_key: str | None = None,
    options: dict[str, Any] | None = None,
) -> pb.TaskSpec:
    """The spec as submitted: fields not given are left to the node's defaults."""
    spec: dict[str, Any] = {"type": type, "command": command, "env": env, "cwd": cwd,
                            "timeout_ms": timeout_ms, "concurrency_key": concurrency_key,
                            "fairness_key": fairness_key, "options": options}  # fmt: skip
    if priority is not None:
        spec["priority"] = priority
    if constraints is not None:
        spec["constraints"] = constraints.model_dump(exclude_unset=True)
    if retry_policy is not None:
        spec["retry_policy"] = retry_policy.model_dump(exclude_unset=True)
    message = spec_to_proto(spec)
    if priority is None:
        message.ClearField("priority")
    return message


def _span(text: str | None, what: str) -> timedelta | None:
    """A duration as people write it ("5m", "1h30m"); None when not given."""
    if text is None:
        return None
    return timedelta(milliseconds=_call(lambda: parse_duration_ms(text, what)))


def _schedule_target(
    command: list[str] | str | None,
    type: str,
    workflow_definition: str | dict[str, Any] | None,
    task_arguments: dict[str, Any],
) -> str | None:
    """The workflow text a schedule starts, or None when it starts a task;
    a tool error when it is given both, neither, or a workflow with task
    arguments."""
    if workflow_definition is None:
        if command is None and type == "shell":
            raise cortex_tool_error(
                InvalidArgument("give command (a task) or workflow_definition: what it starts")
            )
        return None
    given = [name for name, value in task_arguments.items() if value is not None]
    if type != "shell":
        given.insert(0, "type")
    if command is not None:
        given.insert(0, "command")
    if given:
        raise cortex_tool_error(
            InvalidArgument(
                f"workflow_definition cannot be combined with {', '.join(given)}: the "
                "definition describes its tasks"
            )
        )
    if isinstance(workflow_definition, str):
        return workflow_definition
    return json.dumps(workflow_definition)


def build_server(
    node_address: str,
    timeout_s: float = 30.0,
    tls: ClientTls | Literal[False] | None = None,
    http: HttpListener | None = None,
    consistency: int = pb.READ_CONSISTENCY_SESSION,
) -> CheckedServer:
    """An MCP server whose tools act on the Cortex node at `node_address`,
    reading at `consistency` (a ReadConsistency value).
    `tls` defaults to $CORTEX_TLS_CA and friends, read (and checked) now.
    With `http`, its HTTP transport refuses requests without that listener's
    bearer token."""
    node_tls = (client_tls_from_env() or False) if tls is None else tls
    # One client for the server's lifetime: its session (the highest Raft
    # index it has seen) makes every tool call read what earlier ones wrote.
    client = CortexClient(node_address, timeout_s=timeout_s, tls=node_tls, consistency=consistency)

    def submit_task(
        command: Command = None,
        type: TaskType = "shell",
        env: Env = None,
        cwd: Cwd = None,
        timeout_ms: TimeoutMs = None,
        priority: Priority = None,
        constraints: Placement = None,
        retry_policy: Retries = None,
        concurrency_key: ConcurrencyKey = None,
        fairness_key: FairnessKey = None,
        options: Options = None,
        idempotency_key: Annotated[
            str | None,
            Field(
                description="submitting again with the same key returns the same task instead of a new one; "
                "use it whenever you might retry",
                max_length=MAX_IDEMPOTENCY_KEY,
            ),
        ] = None,
        wait: Annotated[
            bool, Field(description="block until the task ends and return its result")
        ] = False,
        wait_timeout_s: Annotated[
            float, Field(description="how long wait blocks", gt=0, le=MAX_WAIT_S)
        ] = 60.0,
    ) -> dict[str, Any]:
        """Run one task on the cluster: a command (type shell), or what another
        executor type runs as its options say. The leader places it on the best node
        that runs its type, for its constraints. Returns {task_id, created}; with
        wait=true also the finished task (state, node, attempt, result with
        exit_code/stdout/stderr)."""
        spec = _task_spec(command, type, env, cwd, timeout_ms, priority, constraints,
                          retry_policy, concurrency_key, fairness_key, options)  # fmt: skip
        reply = _call(lambda: client.submit_task(spec, idempotency_key or ""))
        out: dict[str, Any] = {"task_id": reply.task.id, "created": reply.created}
        if wait:
            done = _call(
                lambda: client.get_task_result(reply.task.id, True, int(wait_timeout_s * 1000))
            )
            out["task"] = task_json(done.task)
        return out

    def submit_workflow(
        definition: Annotated[
            str | dict[str, Any],
            Field(
                description="the workflow: a JSON/YAML text or an object {name, tasks: {key: {type, spec, "
                "dependsOn, condition, constraints, retryPolicy, priority}}, context}; the node "
                "checks it whole and names every field at fault"
            ),
        ],
        idempotency_key: Annotated[
            str | None,
            Field(description="same key → same workflow", max_length=MAX_IDEMPOTENCY_KEY),
        ] = None,
    ) -> dict[str, Any]:
        """Submit a DAG workflow. Tasks run when their dependencies end: with no
        condition only if all dependencies completed; a JavaScript condition such as
        `parent.build.exitCode !== 0` decides otherwise (it must come to true or false;
        no `return`). Returns {workflow_id, created}; follow it with get_workflow_status."""
        text = definition if isinstance(definition, str) else json.dumps(definition)
        reply = _call(lambda: client.submit_workflow(text, idempotency_key=idempotency_key or ""))
        return {"workflow_id": reply.workflow_id, "created": reply.created}

    def get_task_result(
        task_id: Annotated[Id, Field(description="the id submit_task returned")],
        wait: Annotated[bool, Field(description="block until the task is terminal")] = False,
        timeout_s: Annotated[
            float, Field(description="how long wait blocks", gt=0, le=MAX_WAIT_S)
        ] = 60.0,
    ) -> dict[str, Any]:
        """A task's state, node, attempt and result (exit_code, stdout and stderr
        tails). With wait=true, returns once the task is terminal or timeout_s passes
        (check `state`). While queued, `pending_reasons` says why it is not placed;
        while assigned, why it has not started (its node's slots are all taken)."""
        reply = _call(lambda: client.get_task_result(task_id, wait, int(timeout_s * 1000)))
        return task_json(reply.task)

    def cancel_task(
        task_id: Id,
        reason: Annotated[str, Field(description="recorded in the task's events")] = "",
    ) -> dict[str, Any]:
        """Cancel a queued or running task; a running one has its whole process group
        killed. Fails if the task already ended."""
        return task_json(_call(lambda: client.cancel_task(task_id, reason)).task)

    def list_tasks(
        states: Annotated[
            list[TaskStateName] | None, Field(description="filter, e.g. ['running', 'failed']")
        ] = None,
        node: Annotated[str | None, Field(description="only tasks on this node")] = None,
        workflow_id: Annotated[str | None, Field(description="only tasks of this workflow")] = None,
        type: Annotated[ExecutorType | None, Field(description="executor type")] = None,
        limit: PageSize = 50,
        page_token: Annotated[str, Field(description="next_page_token of the previous page")] = "",
    ) -> dict[str, Any]:
        """Tasks, newest first, with filters and pagination; returns
        {tasks, total, next_page_token}."""
        wanted = _states(pb.TaskState, states, "states")
        reply = _call(lambda: client.list_tasks(states=wanted, node_id=node or "", workflow_id=workflow_id or "",
                                                type=type or "", page_size=limit, page_token=page_token))  # fmt: skip
        return {"tasks": [task_json(t) for t in reply.tasks], "total": reply.total_size,
                "next_page_token": reply.next_page_token or None}  # fmt: skip

    def list_workflows(
        states: Annotated[
            list[WorkflowStateName] | None, Field(description="filter, e.g. ['running']")
        ] = None,
        limit: PageSize = 50,
        page_token: Annotated[str, Field(description="next_page_token of the previous page")] = "",
    ) -> dict[str, Any]:
        """Workflows, newest first, with their state and per-state task counts."""
        wanted = _states(pb.WorkflowState, states, "states")
        reply = _call(
            lambda: client.list_workflows(states=wanted, page_size=limit, page_token=page_token)
        )
        return {"workflows": [workflow_json(w) for w in reply.workflows], "total": reply.total_size,
                "next_page_token": reply.next_page_token or None}  # fmt: skip

    def get_workflow_status(workflow_id: Id) -> dict[str, Any]:
        """The whole DAG: each task's key, state, attempt, node, dependencies,
        condition, skip reason and timing, plus the shared workflow context."""
        return workflow_json(_call(lambda: client.get_workflow(workflow_id)).workflow)

    def list_dead_letter_tasks(
        limit: PageSize = 50,
        page_token: Annotated[str, Field(description="next_page_token of the previous page")] = "",
    ) -> dict[str, Any]:
        """Tasks that failed after exhausting their retries, newest first. Inspect
        `result` and `error`, fix the cause, then retry_dead_letter_task."""
        reply = _call(lambda: client.list_dead_letter_tasks(limit, page_token))
        return {"tasks": [task_json(t) for t in reply.tasks], "total": reply.total_size,
                "next_page_token": reply.next_page_token or None}  # fmt: skip

    def retry_dead_letter_task(task_id: Id) -> dict[str, Any]:
        """Queue a dead-lettered task again with a fresh retry budget."""
        return task_json(_call(lambda: client.retry_dead_letter_task(task_id)).task)

    def drain_node_tasks(
        node_id: Annotated[Id, Field(description="a node id from the nodes resource")],
        action: Annotated[
            Literal["drain", "cordon", "uncordon"],
            Field(
                description="drain: move work off the node; cordon: no new work; uncordon: active again"
            ),
        ] = "drain",
        deadline_s: Annotated[
            float,
            Field(description="drain: time running tasks get", gt=0, le=MAX_DRAIN_DEADLINE_S),
        ] = 300,
    ) -> dict[str, Any]:
        """Take a node out of service (e.g. before maintenance): draining stops new
        assignments, moves its assigned tasks elsewhere without spending a retry and
        re-queues running ones after the deadline. `uncordon` brings it back."""
        if action == "drain":
            node = _call(lambda: client.drain_node(node_id, deadline_ms=int(deadline_s * 1000)))
        elif action == "cordon":
            node = _call(lambda: client.cordon_node(node_id))
        else:
            node = _call(lambda: client.uncordon_node(node_id))
        return node_json(node.node)

    def create_schedule(
        name: Annotated[
            Key,
            Field(
                description="unique in the cluster: 1 to 128 ASCII letters, digits or ._:@/-, "
                "starting with a letter or digit"
            ),
        ],
        cron: Annotated[
            str | None,
            Field(
                description="when it fires: five fields (minute hour day-of-month month "
                "day-of-week), e.g. '0 3 * * *'; give cron or every",
                max_length=MAX_CRON_CHARS,
            ),
        ] = None,
        timezone: Annotated[
            str | None,
            Field(description="the IANA time zone of cron (default UTC)", max_length=MAX_ID_CHARS),
        ] = None,
        every: Annotated[
            str | None,
            Field(
                description="when it fires: a fixed period from its creation, '30s', '5m', "
                "'1h30m' (1s to 366d); give cron or every",
                max_length=MAX_ID_CHARS,
            ),
        ] = None,
        command: Command = None,
        type: TaskType = "shell",
        env: Env = None,
        cwd: Cwd = None,
        timeout_ms: TimeoutMs = None,
        priority: Priority = None,
        constraints: Placement = None,
        retry_policy: Retries = None,
        concurrency_key: ConcurrencyKey = None,
        fairness_key: FairnessKey = None,
        options: Options = None,
        workflow_definition: Annotated[
            str | dict[str, Any] | None,
            Field(
                description="instead of a command: the workflow each firing starts, as "
                "submit_workflow takes it (at most 100 tasks)"
            ),
        ] = None,
        overlap: Annotated[
            OverlapPolicy,
            Field(
                description="a slot due while a run is active: skip it, keep one for when the "
                "run ends (buffer_one), fire anyway (allow_all), or cancel the run "
                "(cancel_previous)"
            ),
        ] = "skip",
        catchup_window: Annotated[
            str | None,
            Field(
                description="how late a slot may still fire after an outage, e.g. '10m' "
                "(default 1m; '0s': never late)",
                max_length=MAX_ID_CHARS,
            ),
        ] = None,
        paused: Annotated[bool, Field(description="create it paused")] = False,
    ) -> dict[str, Any]:
        """Start a task (command and the task arguments of submit_task) or a workflow
        (workflow_definition) at every slot of a cron expression or a fixed period.
        Creating it again with the same settings returns it (created false); the name
        taken by other settings is an error. Returns {created, schedule}."""
        task_arguments = {"env": env, "cwd": cwd, "timeout_ms": timeout_ms,
                          "priority": priority, "constraints": constraints,
                          "retry_policy": retry_policy, "concurrency_key": concurrency_key,
                          "fairness_key": fairness_key, "options": options}  # fmt: skip
        definition = _schedule_target(command, type, workflow_definition, task_arguments)
        task = None
        if definition is None:
            task = _task_spec(command, type, env, cwd, timeout_ms, priority, constraints,
                              retry_policy, concurrency_key, fairness_key, options)  # fmt: skip
        period, window = _span(every, "every"), _span(catchup_window, "catchup_window")
        reply = _call(
            lambda: client.create_schedule(
                name,
                cron=cron or "",
                every=period,
                timezone=timezone or "",
                task=task,
                workflow_definition=definition or "",
                overlap=overlap,
                catchup_window=window,
                paused=paused,
            )  # fmt: skip
        )
        return {"created": reply.created, "schedule": schedule_json(reply.schedule)}

    def list_schedules() -> dict[str, Any]:
        """Every schedule, by name: timing, overlap, paused, next and last firing,
        counts of fired/missed/skipped slots, active runs and recent firings."""
        reply = _call(client.list_schedules)
        return {"schedules": [schedule_json(schedule) for schedule in reply.schedules]}

    def get_schedule(
        schedule: Annotated[Id, Field(description="the schedule's name or id")],
    ) -> dict[str, Any]:
        """One schedule with its newest firings (newest first): for each slot what was
        decided (fire, trigger, missed, skipped, buffered, failed), why, the run it
        started and that run's state now."""
        return schedule_json(_call(lambda: client.get_schedule(schedule)).schedule)

    def pause_schedule(
        schedule: Annotated[Id, Field(description="the schedule's name or id")],
    ) -> dict[str, Any]:
        """Stop a schedule firing; the runs it started go on."""
        return schedule_json(_call(lambda: client.pause_schedule(schedule)).schedule)

    def resume_schedule(
        schedule: Annotated[Id, Field(description="the schedule's name or id")],
    ) -> dict[str, Any]:
        """Let a paused schedule fire again, from its next slot after now (the slots it
        was paused for are not caught up)."""
        return schedule_json(_call(lambda: client.resume_schedule(schedule)).schedule)

    def delete_schedule(
        schedule: Annotated[Id, Field(description="the schedule's name or id")],
    ) -> dict[str, Any]:
        """Delete a schedule; the tasks and workflows it started stay. Returns the
        schedule as it was."""
        return schedule_json(_call(lambda: client.delete_schedule(schedule)).schedule)

    def trigger_schedule(
        schedule: Annotated[Id, Field(description="the schedule's name or id")],
    ) -> dict[str, Any]:
        """Start a run of a schedule now, outside its slots (paused or not; its overlap
        policy does not apply). Returns {task_id, workflow_id}: the run it started."""
        started = _call(lambda: client.trigger_schedule(schedule))
        return {"task_id": started.task_id or None, "workflow_id": started.workflow_id or None}

    def set_limit(
        key: Annotated[Key, Field(description="the concurrency key tasks name")],
        max_running: Annotated[
            int,
            Field(
                description="at most this many of its tasks assigned or running at once "
                "(0: no such limit)",
                ge=0,
                le=MAX_RUNNING,
            ),
        ] = 0,
        rate: Annotated[
            str | None,
            Field(
                description="start at most N of its tasks per second ('5/s') or minute ('30/m')",
                max_length=MAX_ID_CHARS,
            ),
        ] = None,
        burst: Annotated[
            int,
            Field(
                description="starts allowed at once when the rate has saved them up (0: a "
                "second's worth of the rate, at least 1)",
                ge=0,
                le=MAX_BURST,
            ),
        ] = 0,
    ) -> dict[str, Any]:
        """Limit the tasks of a concurrency key (tasks name it with concurrency_key),
        replacing its limits: how many run at once, how fast they start, or both. A
        queued task held by a limit says so in its pending_reasons."""
        from cortex.limit_operations import parse_rate

        per_minute = _call(lambda: parse_rate(rate)) if rate is not None else 0
        reply = _call(
            lambda: client.set_limit(
                key, max_running=max_running, rate_per_minute=per_minute, burst=burst
            )
        )
        return limit_json(reply.limit)

    def list_limits() -> dict[str, Any]:
        """Every concurrency key with limits (with its tasks running and queued now and
        the starts its rate allows now), and every fairness key with its weight and its
        tasks queued and active."""
        limits = _call(client.list_limits).limits
        weights = _call(client.list_fairness_weights).weights
        return {"limits": [limit_json(limit) for limit in limits],
                "weights": [weight_json(weight) for weight in weights]}  # fmt: skip

    def delete_limit(
        key: Annotated[Key, Field(description="the concurrency key")],
    ) -> dict[str, Any]:
        """Remove a concurrency key's limits: its tasks are placed without them.
        Returns the limits as they were."""
        return limit_json(_call(lambda: client.delete_limit(key)).limit)

    def set_fairness_weight(
        key: Annotated[Key, Field(description="the fairness key tasks name")],
        weight: Annotated[
            int,
            Field(
                description="its share of placements (every key's default is 1)",
                ge=1,
                le=MAX_WEIGHT,
            ),
        ],  # fmt: skip
    ) -> dict[str, Any]:
        """Set a fairness key's weight: keys with tasks queued share placements in
        proportion to their weights, so a key of weight 3 gets three placements for
        each one of a key of weight 1."""
        return weight_json(_call(lambda: client.set_fairness_weight(key, weight)).weight)

    async def stream_task_output(
        ctx: Context,
        task_id: Id,
        from_offset: Annotated[
            int,
            Field(
                description="byte offset to read from; pass next_offset back",
                ge=0,
                le=wire_range(pb.StreamTaskOutputRequest, "from_offset")[1],
            ),
        ] = 0,
        attempt: Annotated[
            int,
            Field(
                description="0 = latest attempt",
                ge=0,
                le=wire_range(pb.StreamTaskOutputRequest, "attempt")[1],
            ),
        ] = 0,
        wait_s: Annotated[
            float,
            Field(description="wait up to this long for new output", ge=0, le=MAX_STREAM_WAIT_S),
        ] = 5.0,
        max_bytes: Annotated[
            int, Field(description="most output to return", ge=1, le=STREAM_CHUNK_LIMIT)
        ] = 64 * 1024,
    ) -> dict[str, Any]:
        """Output of a task (stdout and stderr interleaved) since from_offset. Returns
        {output, next_offset, done, attempt, state, ...}; call again with next_offset
        until done is true (the attempt is over: then exit_code and end_offset are set;
        task_finished says whether the task is, or a retry follows). Waits up to wait_s
        for new output. A from_offset past the end gets next_offset at the true end and
        a note saying whether the task is still running. Reports progress
        notifications when asked for them."""

        def read() -> dict[str, Any]:
            return read_output(client, task_id, from_offset, attempt, wait_s, max_bytes)

        result = await anyio.to_thread.run_sync(read)
        await ctx.report_progress(
            result["next_offset"], result.get("end_offset"), f"{result['next_offset']} bytes read"
        )
        return result

    tools = (
        submit_task, submit_workflow, get_task_result, cancel_task, list_tasks, list_workflows,
        get_workflow_status, list_dead_letter_tasks, retry_dead_letter_task, drain_node_tasks,
        stream_task_output, create_schedule, list_schedules, get_schedule, pause_schedule,
        resume_schedule, delete_schedule, trigger_schedule, set_limit, list_limits,
        delete_limit, set_fairness_weight,
    )  # fmt: skip
    server = CheckedServer(
        [strict_tool(tool) for tool in tools],
        name="cortex",
        title="Cortex task engine",
        instructions=INSTRUCTIONS,
        version="0.1.0",
        auth=http.auth_settings() if http else None,
        token_verifier=http.token_verifier() if http else None,
    )

    @server.resource("cortex://cluster/status", mime_type="application/json")
    def cluster_status() -> str:
        """Leader, term, applied index, state digest and task counts as seen by the
        node, with a summary of the schedules and the limits per concurrency key."""
        data = status_json(_read(client.get_cluster_status))
        data["schedules"] = schedules_summary(_read(client.list_schedules).schedules)
        data["limits"] = [limit_json(limit) for limit in _read(client.list_limits).limits]
        return json.dumps(data, indent=2)

    @server.resource("cortex://cluster/nodes", mime_type="application/json")
    def cluster_nodes() -> str:
        """Every node: status, labels, last resource report, active tasks."""
        return json.dumps([node_json(n) for n in _read(client.list_nodes).nodes], indent=2)

    return server

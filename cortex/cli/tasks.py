"""`cortex task ...` and `cortex status`."""

from __future__ import annotations

import argparse

from cortex.api.client import CortexClient
from cortex.api.views import enum_value
from cortex.cli import render
from cortex.cli.connect import connect
from cortex.cli.node import parse_pairs
from cortex.errors import InvalidArgument
from cortex.v1 import cortex_pb2 as pb


def _spec(args: argparse.Namespace) -> pb.TaskSpec:
    command = list(args.argv)
    if command and command[0] == "--":
        command = command[1:]
    if args.type == "shell" and not command:
        raise InvalidArgument("no command given: cortex task submit -- CMD [ARG...]")
    spec = pb.TaskSpec(type=args.type, env=parse_pairs(args.env, "--env"), cwd=args.cwd or "")
    if args.shell:
        spec.shell = " ".join(command)
    else:
        spec.command.extend(command)
    if args.timeout_ms is not None:
        spec.timeout.FromMilliseconds(args.timeout_ms)
    if args.priority is not None:
        spec.priority = args.priority
    if args.max_retries is not None:
        spec.retry_policy.max_retries = args.max_retries
    _constraints(spec.constraints, args)
    return spec


def _constraints(constraints: pb.Constraints, args: argparse.Namespace) -> None:
    constraints.node_labels.extend(args.label)
    constraints.allowed_nodes.extend(args.allow_node)
    constraints.forbidden_nodes.extend(args.forbid_node)
    constraints.requires_capabilities.update(parse_pairs(args.capability, "--capability"))
    constraints.requires_gpu = args.gpu
    constraints.avoid_gaming = args.avoid_gaming
    if args.min_memory_mb is not None:
        constraints.min_memory_mb = args.min_memory_mb
    if args.min_disk_gb is not None:
        constraints.min_disk_gb = args.min_disk_gb
    if args.target_node:
        constraints.target_node = args.target_node
    if args.max_parallel_per_node is not None:
        constraints.max_parallel_per_node = args.max_parallel_per_node


def submit(client: CortexClient, args: argparse.Namespace) -> int:
    reply = client.submit_task(_spec(args), args.idempotency_key)
    if not args.wait:
        if args.json:
            render.print_json({"id": reply.task.id, "created": reply.created})
        else:
            note = "" if reply.created else " (existing task for this idempotency key)"
            print(f"{reply.task.id}{note}")
        return 0
    task = client.get_task_result(
        reply.task.id, wait=True, timeout_ms=int(args.wait_timeout * 1000)
    ).task
    if args.json:
        render.print_json(render.task_json(task))
    else:
        render.print_task(task)
    if task.state == pb.TASK_STATE_COMPLETED:
        return 0
    return task.result.exit_code or 1 if task.HasField("result") else 1


def run(args: argparse.Namespace) -> int:
    with connect(args, "linearizable") as client:
        if args.task_command == "submit":
            return submit(client, args)
        if args.task_command == "get":
            found = client.get_task(args.task_id, include_events=args.events)
            if args.json:
                render.print_json(render.task_json(found.task, found.events))
            else:
                render.print_task(found.task, found.events)
            return 0
        if args.task_command == "list":
            reply = client.list_tasks(
                states=[enum_value(pb.TaskState, state, "--state") for state in args.state],
                node_id=args.on_node,
                page_size=args.limit,
                page_token=args.page_token,
            )
            if args.json:
                render.print_json(
                    {
                        "tasks": [render.task_json(t) for t in reply.tasks],
                        "total": reply.total_size,
                        "next_page_token": reply.next_page_token or None,
                    }
                )
            else:
                render.print_task_table(list(reply.tasks), reply.total_size, reply.next_page_token)
            return 0
        if args.task_command == "cancel":
            task = client.cancel_task(args.task_id, args.reason).task
            if args.json:
                render.print_json(render.task_json(task))
            else:
                print(f"{task.id} {render.state_name(task.state)}")
            return 0
    return 2


def run_dlq(args: argparse.Namespace) -> int:
    with connect(args, "linearizable") as client:
        if args.dlq_command == "list":
            reply = client.list_dead_letter_tasks(page_size=args.limit)
            if args.json:
                render.print_json(
                    {"tasks": [render.task_json(t) for t in reply.tasks], "total": reply.total_size}
                )
            else:
                render.print_task_table(list(reply.tasks), reply.total_size)
            return 0
        task = client.retry_dead_letter_task(args.task_id).task
    if args.json:
        render.print_json(render.task_json(task))
    else:
        print(f"{task.id} {render.state_name(task.state)}")
    return 0


def show_status(args: argparse.Namespace) -> int:
    with connect(args, "stale") as client:
        status = client.get_cluster_status()
    if args.json:
        render.print_json(render.status_json(status))
    else:
        render.print_status(status)
    return 0

"""`cortex limit set|list|delete|set-weight`: limits per concurrency key (how
many of its tasks run at once, how fast they start) and the weights fairness
keys share placements by."""

from __future__ import annotations

import argparse

from rich.text import Text

from cortex.api.limit_views import limit_json, rate_text, weight_json
from cortex.cli import render
from cortex.cli.connect import connect
from cortex.cli.options import usage_error
from cortex.cli.tables import Column, print_table
from cortex.v1 import cortex_pb2 as pb


def running_text(limit: pb.Limit) -> str:
    """Its tasks running, against its maximum when it has one ("2/5")."""
    return f"{limit.running}/{limit.max_running}" if limit.max_running else str(limit.running)


def limit_text(limit: pb.Limit) -> str:
    """A key's limits in words: "at most 2 running, 5/s (burst 5)"."""
    parts = []
    if limit.max_running:
        parts.append(f"at most {limit.max_running} running")
    if limit.rate_per_minute:
        parts.append(f"{rate_text(limit)} (burst {limit.burst})")
    return ", ".join(parts) or "no limits"


def print_limits(limits: list[pb.Limit]) -> None:
    columns = [
        Column("key", keep=True),
        Column("running", keep=True, justify="right"),
        Column("rate", keep=True),
        Column("burst", keep=True, justify="right"),
        Column("tokens", keep=True, justify="right"),
        Column("queued", keep=True, justify="right"),
    ]
    rows = []
    for limit in limits:
        full = bool(limit.max_running) and limit.running >= limit.max_running
        rows.append(
            [Text(limit.key), Text(running_text(limit), style="yellow" if full else ""),
             Text(rate_text(limit) or "-"), Text(str(limit.burst) if limit.rate_per_minute else "-"),
             Text(f"{limit.tokens:.1f}" if limit.rate_per_minute else "-"), Text(str(limit.queued))]
        )  # fmt: skip
    if rows:
        print_table(render.console, columns, rows)
    render.console.print(f"[dim]{render.counted(len(limits), 'limits')}[/]")


def print_weights(weights: list[pb.FairnessWeight]) -> None:
    columns = [
        Column("fairness key", keep=True),
        Column("weight", keep=True, justify="right"),
        Column("queued", keep=True, justify="right"),
        Column("active", keep=True, justify="right"),
    ]
    rows = [
        [Text(w.key), Text(str(w.weight)), Text(str(w.queued)), Text(str(w.active))]
        for w in weights
    ]
    if rows:
        print_table(render.console, columns, rows)
    render.console.print(f"[dim]{render.counted(len(weights), 'fairness keys')}[/]")


def run(args: argparse.Namespace) -> int:
    if args.limit_command == "set" and not (args.max_running or args.rate):
        return usage_error(
            "cortex limit set", "give --max-running N, --rate N/s or both: what to limit"
        )
    with connect(args, "linearizable") as client:
        command = args.limit_command
        if command == "list":
            limits = list(client.list_limits().limits)
            weights = list(client.list_fairness_weights().weights)
            fmt = render.output_format(args)
            if fmt in ("json", "yaml"):
                data = {
                    "limits": [limit_json(limit) for limit in limits],
                    "weights": [weight_json(weight) for weight in weights],
                }
                render.print_data(data, fmt)
            else:
                print_limits(limits)
                render.console.print()
                print_weights(weights)
            return 0
        if command == "set":
            limit = client.set_limit(
                args.key, max_running=args.max_running, rate_per_minute=args.rate, burst=args.burst
            ).limit
            _print_limit(limit, args, limit_text(limit))
            return 0
        if command == "delete":
            limit = client.delete_limit(args.key).limit
            _print_limit(limit, args, "limits deleted")
            return 0
        if command == "set-weight":
            weight = client.set_fairness_weight(args.key, args.weight).weight
            if args.json:
                render.print_json(weight_json(weight))
            else:
                render.console.print(f"{weight.key}: weight {weight.weight}")
            return 0
    return 2


def _print_limit(limit: pb.Limit, args: argparse.Namespace, done: str) -> None:
    if args.json:
        render.print_json(limit_json(limit))
    else:
        render.console.print(f"{limit.key}: {done}")

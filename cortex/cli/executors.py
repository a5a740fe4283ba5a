"""`cortex executors list`: what each node can run. A node's executors are
those it registered; its capabilities and the types it left out (a plugin
that failed to load, a runtime it lacks) come with its heartbeat."""

from __future__ import annotations

import argparse
from typing import Any

from rich.text import Text

from cortex.cli import render
from cortex.cli.connect import connect
from cortex.cli.tables import Column, print_table
from cortex.executors.discovery import UNAVAILABLE_PREFIX
from cortex.proto_enums import enum_name
from cortex.v1 import cortex_pb2 as pb


def node_executors_json(node: pb.Node) -> dict[str, Any]:
    capabilities = dict(node.capabilities)
    unavailable = {
        key.removeprefix(UNAVAILABLE_PREFIX): capabilities.pop(key)
        for key in sorted(capabilities)
        if key.startswith(UNAVAILABLE_PREFIX)
    }
    return {
        "node_id": node.id,
        "status": enum_name(pb.NodeStatus, node.status),
        "executors": sorted(node.executors),
        "capabilities": capabilities,
        "unavailable": unavailable,
    }


def _rows(nodes: list[dict[str, Any]]) -> list[list[Text]]:
    rows = []
    for node in nodes:
        names = sorted({*node["executors"], *node["unavailable"]})
        if not names:
            rows.append([Text(node["node_id"]), Text("-"), Text("-"), Text("no report yet")])
        for name in names:
            if name in node["unavailable"]:
                rows.append([Text(node["node_id"]), Text(name), Text("no", style="red"),
                             Text(node["unavailable"][name])])  # fmt: skip
                continue
            details = ", ".join(
                f"{key}={value}"
                for key, value in sorted(node["capabilities"].items())
                if key.startswith(f"{name}.")
            )
            rows.append([Text(node["node_id"]), Text(name), Text("yes", style="green"),
                         Text(details)])  # fmt: skip
    return rows


def run(args: argparse.Namespace) -> int:
    """`cortex executors list`."""
    with connect(args, "stale") as client:
        nodes = [node_executors_json(n) for n in client.list_nodes().nodes]
    fmt = render.output_format(args)
    if fmt in ("json", "yaml"):
        render.print_data(nodes, fmt)
        return 0
    columns = [
        Column("node", keep=True),
        Column("type", keep=True),
        Column("runs", keep=True),
        Column("capabilities / why not", min_width=12),
    ]
    print_table(render.console, columns, _rows(nodes))
    return 0

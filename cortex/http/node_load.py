"""What each node has, uses and was promised, per resource: the numbers
behind the `cortex_node_capacity`, `cortex_node_used` and
`cortex_node_allocated` gauges and the web UI's nodes page. Resources:
`tasks` (task slots), `cpu_cores`, `memory_mb`, `disk_gb`, `gpu_memory_mb`."""

from __future__ import annotations

from dataclasses import dataclass

from cortex.membership.cluster_status import ClusterStatus, NodeStatusView
from cortex.state.queries import StateReader


@dataclass(frozen=True)
class NodeLoad:
    """One node as this node sees it: `capacity` (what it has), `used`
    (what its last report says is in use; empty before its first report)
    and `allocated` (what the replicated state promised its active tasks)."""

    view: NodeStatusView
    capacity: dict[str, float]
    used: dict[str, float]
    allocated: dict[str, float]

    @property
    def up(self) -> bool:
        """Reachable and not offline."""
        return self.view.connected and self.view.node.status != "offline"


def node_loads(cluster: ClusterStatus, reader: StateReader) -> list[NodeLoad]:
    """Every member of the cluster (removed nodes left out), in id order."""
    reserved = reader.reserved_memory_by_node()
    return [
        NodeLoad(
            view,
            _capacity(view),
            _used(view),
            {"tasks": float(view.active_tasks), "memory_mb": reserved.get(view.node.id, 0.0)},
        )
        for view in cluster.list_nodes()
    ]


def _capacity(view: NodeStatusView) -> dict[str, float]:
    found = {"tasks": float(view.node.max_tasks)}
    if view.report is not None:
        resources = view.report.resources
        found |= {
            "cpu_cores": resources.cpu_cores,
            "memory_mb": resources.memory_total_mb,
            "disk_gb": resources.disk_total_gb,
        }
        if resources.gpu is not None:
            found["gpu_memory_mb"] = resources.gpu.memory_total_mb
    return found


def _used(view: NodeStatusView) -> dict[str, float]:
    if view.report is None:
        return {}
    resources = view.report.resources
    found = {
        "tasks": float(view.report.running_tasks),
        "cpu_cores": resources.cpu_cores * resources.cpu_usage_percent / 100.0,
        "memory_mb": max(resources.memory_total_mb - resources.memory_available_mb, 0.0),
        "disk_gb": max(resources.disk_total_gb - resources.disk_available_gb, 0.0),
    }
    if resources.gpu is not None:
        found["gpu_memory_mb"] = resources.gpu.memory_used_mb
    return found

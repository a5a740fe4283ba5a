"""Samples this machine's resources with psutil (and nvidia-smi when there is
a GPU). Declared values from the configuration replace measured ones and are
listed as declared, never passed off as measured."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import psutil

from cortex.scheduler.model import GpuInfo, NodeResources

log = logging.getLogger(__name__)

DEFAULT_GAMING_PROCESSES = (
    "steam",
    "steamwebhelper",
    "gameoverlayui",
    "epicgameslauncher",
    "lutris",
)
_MB = 1024 * 1024
_GB = 1024 * 1024 * 1024
# How long a look for running games holds. Looking reads every process's
# name (a few milliseconds of CPU with sixty processes, more on a desktop
# with hundreds), and games start and stop at human pace: a heartbeat every
# two seconds does not need a look of its own.
GAMING_CHECK_S = 30.0


def detect_gpu() -> GpuInfo | None:
    """The first NVIDIA GPU via nvidia-smi, or None when there is none."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,memory.used,utilization.gpu",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.strip().splitlines()[0] if out.strip() else ""
    parts = [p.strip() for p in first.split(",")]
    if len(parts) != 4:
        return None
    try:
        return GpuInfo(parts[0], float(parts[1]), float(parts[2]), float(parts[3]))
    except ValueError:
        return None


def link_speed_mbps(default: float = 1000.0) -> float:
    """The fastest non-loopback interface that is up, as the kernel reports it."""
    speeds = [
        stats.speed
        for name, stats in psutil.net_if_stats().items()
        if stats.isup and stats.speed > 0 and not name.startswith("lo")
    ]
    return float(max(speeds)) if speeds else default


class ResourceSampler:
    """Call `sample()` periodically; rates (CPU, disk I/O, network) are
    measured over the time since the previous call."""

    def __init__(
        self,
        data_dir: str,
        declared: dict[str, Any] | None = None,
        bandwidth_mbps: float | None = None,
        gaming_processes: tuple[str, ...] = DEFAULT_GAMING_PROCESSES,
        probe_gpu: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._data_dir = data_dir
        self._clock = clock
        # The last look for games: when it was made, and what it found.
        self._gaming_seen: tuple[float, bool] | None = None
        self._declared = declared or {}
        self._bandwidth_mbps = bandwidth_mbps or link_speed_mbps()
        self._gaming = {name.lower() for name in gaming_processes}
        self._probe_gpu = probe_gpu
        self._last_time = clock()
        self._last_disk = self._disk_busy_ms()
        self._last_net = self._net_bytes()
        psutil.cpu_percent(interval=None)

    @staticmethod
    def _disk_busy_ms() -> float:
        counters = psutil.disk_io_counters()
        return float(getattr(counters, "busy_time", 0) or 0) if counters else 0.0

    @staticmethod
    def _net_bytes() -> float:
        counters = psutil.net_io_counters()
        return float(counters.bytes_sent + counters.bytes_recv) if counters else 0.0

    def _gaming_detected(self, now: float) -> bool:
        """Whether a game runs here, as the last look found it when that is
        less than `GAMING_CHECK_S` old."""
        if not self._gaming:
            return False
        seen = self._gaming_seen
        if seen is None or now - seen[0] >= GAMING_CHECK_S:
            seen = self._gaming_seen = (now, self._game_running())
        return seen[1]

    def _game_running(self) -> bool:
        for process in psutil.process_iter(["name"]):
            name = (process.info.get("name") or "").lower()
            if name in self._gaming:
                return True
        return False

    def measure(self) -> NodeResources:
        now = self._clock()
        elapsed_ms = max((now - self._last_time) * 1000, 1.0)
        disk_busy, net = self._disk_busy_ms(), self._net_bytes()
        io_util = min(100.0, max(0.0, (disk_busy - self._last_disk) / elapsed_ms * 100))
        throughput_mbps = max(0.0, (net - self._last_net) * 8 / _MB / (elapsed_ms / 1000))
        self._last_time, self._last_disk, self._last_net = now, disk_busy, net
        memory = psutil.virtual_memory()
        disk = psutil.disk_usage(self._data_dir if os.path.exists(self._data_dir) else "/")
        return NodeResources(
            cpu_cores=float(psutil.cpu_count() or 1),
            cpu_usage_percent=psutil.cpu_percent(interval=None),
            load_1m=os.getloadavg()[0],
            memory_total_mb=memory.total / _MB,
            memory_available_mb=memory.available / _MB,
            disk_total_gb=disk.total / _GB,
            disk_available_gb=disk.free / _GB,
            disk_io_util_percent=io_util,
            network_bandwidth_mbps=self._bandwidth_mbps,
            network_throughput_mbps=throughput_mbps,
            gpu=detect_gpu() if self._probe_gpu else None,
            gaming_detected=self._gaming_detected(now),
        )

    def sample(self) -> NodeResources:
        return apply_declared(self.measure(), self._declared)


def apply_declared(measured: NodeResources, declared: dict[str, Any]) -> NodeResources:
    """Overrides measured values with declared ones and records which."""
    changes: dict[str, Any] = {}
    if declared.get("cpu_cores") is not None:
        changes["cpu_cores"] = float(declared["cpu_cores"])
    if declared.get("memory_mb") is not None:
        changes["memory_total_mb"] = changes["memory_available_mb"] = float(declared["memory_mb"])
    if declared.get("disk_gb") is not None:
        changes["disk_total_gb"] = changes["disk_available_gb"] = float(declared["disk_gb"])
    if declared.get("bandwidth_mbps") is not None:
        changes["network_bandwidth_mbps"] = float(declared["bandwidth_mbps"])
    if declared.get("gpu"):
        gpu = declared["gpu"]
        changes["gpu"] = GpuInfo(
            str(gpu.get("name", "declared GPU")), float(gpu.get("memory_mb", 0)), 0.0, 0.0
        )
    if declared.get("gaming") is not None:
        changes["gaming_detected"] = bool(declared["gaming"])
    return replace(measured, **changes, declared=frozenset(changes))

"""Shared fixtures: real multi-process clusters, torn down after each test
(with their logs attached when the test fails)."""

from __future__ import annotations

import compileall
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import cortex
from tests.cluster import Cluster
from tests.tls import TlsFiles


def pytest_configure(config: pytest.Config) -> None:
    """Compiles cortex's modules once, before any test starts a node or a
    CLI: where bytecode is not written (PYTHONDONTWRITEBYTECODE), every
    process compiled each module it imports from source, about 0.3 s of CPU
    per node or CLI started, and the suite starts hundreds of them."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        compileall.compile_dir(os.path.dirname(cortex.__file__), quiet=1)


@pytest.fixture
def make_cluster(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Cluster]]:
    clusters: list[Cluster] = []

    def make(
        size: int = 3,
        extra_args: list[str] | None = None,
        start: bool = True,
        api_token: str | None = None,
        tls: TlsFiles | None = None,
    ) -> Cluster:
        cluster = Cluster(tmp_path / f"cluster{len(clusters)}", size, extra_args, api_token, tls)
        clusters.append(cluster)
        if start:
            cluster.start()
            cluster.wait_ready()
        return cluster

    yield make
    failed = getattr(request.node, "rep_call", None)
    for cluster in clusters:
        if failed is not None and failed.failed:
            print(cluster.dump_logs())
        cluster.kill_all()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report

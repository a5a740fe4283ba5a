"""Shared fixtures: real multi-process clusters, torn down after each test
(with their logs attached when the test fails)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cluster import Cluster
from tests.tls import TlsFiles


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

"""The public Python client on a real cluster: the README's example as
written, the asyncio client, failing over past a dead node, and errors
as Cortex exceptions."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cortex.client import (
    AlreadyExists,
    AsyncClient,
    Client,
    InvalidArgument,
    NotFound,
    OutputChunk,
    OutputEnd,
)
from tests.cluster import Cluster

pytestmark = pytest.mark.cluster

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_example() -> str:
    text = README.read_text()
    section = text[text.index("## Python client") :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "the README's Python client section has no example"
    return match.group(1)


def test_the_readme_example_runs_as_written(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = make_cluster(3)
    example = _readme_example()
    for default, node in zip(
        ("127.0.0.1:7200", "127.0.0.1:7201", "127.0.0.1:7202"), cluster.nodes, strict=True
    ):
        assert default in example
        example = example.replace(default, node.grpc)
    script = tmp_path / "example.py"
    script.write_text(example)
    ran = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "CORTEX_API_TOKEN": ""},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "building",
        "[build completed]",
        "testing",
        "[test completed]",
        "completed",
    ]


def test_the_asyncio_client_submits_waits_streams_and_cancels(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)

    async def scenario() -> None:
        async with AsyncClient([n.grpc for n in cluster.nodes], token="", tls=False) as cortex:
            task = await cortex.submit_task("echo async; echo err >&2")
            done = await cortex.wait_task(task.id, timeout=60)
            assert done.state == "completed" and done.result is not None
            assert done.result.stdout == b"async\n" and done.finish_time is not None
            items = [item async for item in cortex.stream_output(task.id, stream="stdout")]
            assert [i.data for i in items if isinstance(i, OutputChunk)] == [b"async\n"]
            assert isinstance(items[-1], OutputEnd) and items[-1].exit_code == 0
            sleeper = await cortex.submit_task(["sleep", "300"])
            cancelled = await cortex.cancel_task(sleeper.id, "not needed")
            assert cancelled.state == "cancelled"
            with pytest.raises(NotFound):
                await cortex.get_task("no-such-task")

    asyncio.run(scenario())


def test_calls_fail_over_past_a_dead_node(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(3)
    victim = cluster.followers()[0]
    with Client([n.grpc for n in cluster.nodes], token="", tls=False, timeout=10) as cortex:
        victim.kill9()
        ids = [cortex.submit_task(["true"], type="noop").id for _ in range(12)]
        assert all(cortex.get_task(task_id).id == task_id for task_id in ids)
        assert len(set(ids)) == 12


def test_bad_input_comes_back_as_a_cortex_error(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(1)
    with Client(cluster.nodes[0].grpc, token="", tls=False) as cortex:
        with pytest.raises(InvalidArgument, match="priority"):
            cortex.submit_task(["true"], priority=99)
        with pytest.raises(ValueError, match="expected one of"):
            cortex.list_tasks(states=["bogus"])
        with pytest.raises(
            InvalidArgument, match=r"constraints\.nodeLabels\.0: a label needs a key"
        ):
            cortex.submit_task(["true"], constraints={"nodeLabels": ["=gpu"]})
        first = cortex.submit_task(["echo", "a"], idempotency_key="reused")
        with pytest.raises(AlreadyExists, match=f"already used by task {first.id}"):
            cortex.submit_task(["echo", "b"], idempotency_key="reused")
        assert cortex.submit_task(["echo", "a"], idempotency_key="reused").id == first.id
        with pytest.raises(ValueError, match="port"):
            Client("127.0.0.1:99999")

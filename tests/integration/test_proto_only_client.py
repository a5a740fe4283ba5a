"""A client written from proto/ alone: the contract compiled with grpc_tools
into a temp dir, and a program that imports only grpc and that code (never
the cortex package) submits a workflow, reads its status, streams a task's
output and cancels the workflow on a real cluster."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cluster import Cluster

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent(
    '''
    import sys
    import time

    import grpc
    from google.protobuf import duration_pb2

    from cortex.v1 import cortex_pb2 as pb
    from cortex.v1 import cortex_pb2_grpc as pb_grpc

    address, repo = sys.argv[1], sys.argv[2]
    stub = pb_grpc.CortexServiceStub(grpc.insecure_channel(address))
    definition = """
    name: proto-only
    tasks:
      hello:
        spec: {command: [sh, -c, "echo hello from cortex; echo to stderr >&2"]}
      wait:
        spec: {command: [sleep, "300"]}
        dependsOn: [hello]
    """
    submitted = stub.SubmitWorkflow(
        pb.SubmitWorkflowRequest(
            definition=definition, format=pb.DEFINITION_FORMAT_YAML, idempotency_key="proto-only-1"
        ),
        timeout=30,
    )
    assert submitted.created and submitted.commit_index > 0, submitted
    session = pb.ReadOptions(min_index=submitted.header.applied_index)

    def status():
        return stub.GetWorkflow(
            pb.GetWorkflowRequest(workflow_id=submitted.workflow_id, read_options=session),
            timeout=30,
        ).workflow

    deadline = time.monotonic() + 60
    while True:
        workflow = status()
        tasks = {t.key: t for t in workflow.tasks}
        if tasks["wait"].state == pb.TASK_STATE_RUNNING:
            break
        assert time.monotonic() < deadline, workflow
        time.sleep(0.1)
    assert workflow.state == pb.WORKFLOW_STATE_RUNNING
    assert tasks["hello"].state == pb.TASK_STATE_COMPLETED and tasks["hello"].exit_code == 0

    output, end = b"", None
    for message in stub.StreamTaskOutput(
        pb.StreamTaskOutputRequest(task_id=tasks["hello"].task_id, follow=True), timeout=30
    ):
        if message.HasField("data"):
            if message.data.stream == pb.OUTPUT_STREAM_STDOUT:
                output += message.data.data
        else:
            end = message.end
    assert output == b"hello from cortex\\n", output
    assert end is not None and end.state == pb.TASK_STATE_COMPLETED and end.exit_code == 0

    cancelled = stub.CancelWorkflow(
        pb.CancelWorkflowRequest(workflow_id=submitted.workflow_id, reason="done"), timeout=30
    )
    assert cancelled.workflow.state == pb.WORKFLOW_STATE_CANCELLED, cancelled
    assert cancelled.commit_index > 0
    final = {t.key: t.state for t in status().tasks}
    assert final == {"hello": pb.TASK_STATE_COMPLETED, "wait": pb.TASK_STATE_CANCELLED}, final

    here = sys.path[0]
    for name, module in sys.modules.items():
        path = getattr(module, "__file__", None) or ""
        assert not path.startswith(repo + "/cortex/"), f"{name} came from the project: {path}"
        if name == "cortex" or name.startswith("cortex."):
            assert path.startswith(here + "/"), f"{name} is not the compiled client: {path}"
    print("proto-only client: ok")
    '''
)


def test_a_client_compiled_from_proto_alone_runs_a_workflow_end_to_end(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    out = tmp_path / "client"
    out.mkdir()
    compiled = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{REPO / 'proto'}",
         f"--python_out={out}", f"--grpc_python_out={out}",
         str(REPO / "proto/cortex/v1/cortex.proto")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert compiled.returncode == 0, compiled.stderr
    # Regular packages in the temp dir, first on the path, shadow the project.
    for package in (out / "cortex", out / "cortex/v1"):
        (package / "__init__.py").write_text("")
    (out / "program.py").write_text(PROGRAM)
    cluster = make_cluster(3)
    ran = subprocess.run(
        [sys.executable, str(out / "program.py"), cluster.nodes[1].grpc, str(REPO)],
        capture_output=True, text=True, timeout=180, cwd=out,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "proto-only client: ok" in ran.stdout

"""The condition sandbox in real 3-node clusters: conditions see nothing of
the nodes' secrets, and many workflows with slow conditions do not hold up
an unrelated workflow's next step."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import SECRET, wait_until
from tests.hostile_conditions import EXFILTRATE, search_for

pytestmark = pytest.mark.cluster

API_TOKEN = "api-token-3c9e1f77b0d24a65"
MCP_TOKEN = "mcp-token-8a41d06e92cf5b13"
TERMINAL = (pb.WORKFLOW_STATE_COMPLETED, pb.WORKFLOW_STATE_FAILED, pb.WORKFLOW_STATE_CANCELLED)
SLOW_WORKFLOWS = 150


def _submit(client: Any, definition: dict[str, Any]) -> str:
    return client.submit_workflow(json.dumps(definition), pb.DEFINITION_FORMAT_JSON).workflow_id


def _ended(client: Any, workflow_id: str, timeout: float = 60) -> Any:
    return wait_until(
        lambda: (w := client.get_workflow(workflow_id).workflow).state in TERMINAL and w,
        timeout,
        what=f"workflow {workflow_id} to end",
    )


def _event_ms(client: Any, task_id: str, event: pb.EventType) -> int:
    events = client.get_task(task_id, include_events=True).events
    return next(ev.time.ToMilliseconds() for ev in events if ev.type == event)


def test_a_condition_sees_no_secret_or_token_of_the_node(make_cluster):
    cluster = make_cluster(3, start=False)
    secrets = {
        "CORTEX_SECRET": SECRET,
        "CORTEX_API_TOKEN": API_TOKEN,
        "CORTEX_MCP_TOKEN": MCP_TOKEN,
    }
    for node in cluster.nodes:
        # Secret and token reach the node through its environment only.
        node.env = dict(secrets)
        node.api_token = API_TOKEN
        node.start(peers=cluster.peers, secret=None)
    cluster.wait_ready()
    marker = "planted-marker-51f0e2"
    definition = {
        "name": "snoop",
        "context": {"marker": marker},
        "tasks": {
            "root": {"type": "noop"},
            "search": {"type": "noop", "dependsOn": ["root"],
                       "condition": search_for(list(secrets.values()))},
            "control": {"type": "noop", "dependsOn": ["root"], "condition": search_for([marker])},
            "exfiltrate": {"type": "noop", "dependsOn": ["root"], "condition": EXFILTRATE},
        },
    }  # fmt: skip
    with cluster.leader().client() as client:
        workflow = _ended(client, _submit(client, definition))
        tasks = {t.key: t for t in workflow.tasks}
        # A condition that throws fails its task (and so the workflow).
        reason = client.get_task(tasks["exfiltrate"].task_id).task.error
    # The search reaches what a condition can see (the control finds the
    # marker) and finds none of the node's secrets.
    assert tasks["control"].state == pb.TASK_STATE_COMPLETED, tasks["control"]
    assert tasks["search"].state == pb.TASK_STATE_SKIPPED
    assert tasks["search"].skip_reason == "condition is false"
    assert tasks["exfiltrate"].state == pb.TASK_STATE_FAILED
    assert workflow.state == pb.WORKFLOW_STATE_FAILED
    assert reason.startswith("condition threw Error: env=ReferenceError: process is not defined")
    assert not any(value in reason for value in secrets.values()), reason


def _slow_workflow(finish_at_ms: int) -> dict[str, Any]:
    """A root that ends at `finish_at_ms`, then a condition that spins until
    its 100 ms are up."""
    duration = max(0, finish_at_ms - int(time.time() * 1000))
    return {
        "name": "slow",
        "tasks": {
            "root": {"type": "noop", "spec": {"options": {"duration_ms": duration}}},
            "gate": {"type": "noop", "dependsOn": ["root"], "condition": "while(true){}"},
        },
    }


def test_slow_conditions_of_many_workflows_do_not_hold_up_another(make_cluster):
    cluster = make_cluster(3)
    unrelated = {
        "name": "unrelated",
        "tasks": {
            "first": {"type": "noop"},
            "then": {"type": "noop", "dependsOn": ["first"],
                     "condition": "parent.first.exitCode === 0"},
        },
    }  # fmt: skip
    with cluster.leader().client() as client:
        # The roots all end together, so 150 conditions of 100 ms each queue up at once.
        finish_at_ms = int(time.time() * 1000) + 12_000
        with ThreadPoolExecutor(8) as pool:
            slow_ids = list(pool.map(lambda _: _submit(client, _slow_workflow(finish_at_ms)),
                                     range(SLOW_WORKFLOWS)))  # fmt: skip
        wait_until(
            lambda: (
                client.list_tasks(states=[pb.TASK_STATE_COMPLETED], page_size=1).total_size
                >= SLOW_WORKFLOWS
            ),
            60,
            what="the slow workflows' roots to complete",
        )
        backlog = client.list_tasks(states=[pb.TASK_STATE_PENDING], page_size=1).total_size
        workflow = _ended(client, _submit(client, unrelated))
        tasks = {t.key: t for t in workflow.tasks}
        assert workflow.state == pb.WORKFLOW_STATE_COMPLETED, workflow
        assert tasks["then"].state == pb.TASK_STATE_COMPLETED, workflow
        first_done = _event_ms(client, tasks["first"].task_id, pb.EVENT_TYPE_COMPLETED)
        decided = _event_ms(client, tasks["then"].task_id, pb.EVENT_TYPE_RELEASED)
        delay_ms = decided - first_done
        slow_workflows = [_ended(client, workflow_id) for workflow_id in slow_ids]
        gates = [next(t for t in w.tasks if t.key == "gate") for w in slow_workflows]
        assert {g.state for g in gates} == {pb.TASK_STATE_FAILED}
        errors = {client.get_task(g.task_id).task.error for g in gates}
        assert errors == {"condition timed out after 100 ms"}
        decided_later = sum(
            _event_ms(client, gate.task_id, pb.EVENT_TYPE_FAILED) > decided for gate in gates
        )
    print(f"backlog {backlog}, unrelated step decided {delay_ms} ms after its dependency "
          f"completed, ahead of {decided_later} slow conditions")  # fmt: skip
    # The backlog was real when the unrelated step came (first come, first
    # served would have put it behind all of it), and it did not wait for it.
    assert backlog >= 50, backlog
    assert decided_later >= 30, decided_later
    assert delay_ms < 1000, delay_ms

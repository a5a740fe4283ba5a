"""The web UI's JSON API on every node of a real 3-node cluster: task
listings with filters, totals and pages, a task with its spec, attempts and
events, its output from any node (relayed from the one that ran it, live
while it runs), nodes with capacity, use and allocation, workflows and their
DAG; bad parameters (400 naming them), unknown ids (404), and the API token
by header or by the login form's cookie (401 without)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from google.protobuf.duration_pb2 import Duration

from cortex.v1 import cortex_pb2 as pb
from tests.cluster import Cluster, ClusterNode, shared_cluster, shell_spec, wait_until
from tests.metrics_scrape import Response, request

pytestmark = pytest.mark.cluster

TOKEN = "web-api-token-9876"
WORKFLOW = """
name: web-dag
tasks:
  first:
    type: shell
    spec: {command: "echo first"}
  second:
    type: shell
    dependsOn: [first]
    condition: "parent.first.exitCode === 0"
    spec: {command: "echo second"}
  never:
    type: shell
    dependsOn: [first]
    condition: "parent.first.exitCode !== 0"
    spec: {command: "echo never"}
  last:
    type: shell
    dependsOn: [first, second]
    spec: {command: "echo last"}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: Any, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from shared_cluster(tmp_path_factory, request, "webapi")


def get(node: ClusterNode, path: str, /, **params: Any) -> Response:
    query = f"?{urlencode(params, doseq=True)}" if params else ""
    return request(f"http://{node.http}{path}{query}")


def get_json(node: ClusterNode, path: str, /, **params: Any) -> dict[str, Any]:
    answer = get(node, path, **params)
    assert answer.status == 200, (path, params, answer.status, answer.body[:300])
    assert answer.headers["Content-Type"] == "application/json"
    body: dict[str, Any] = json.loads(answer.body)
    return body


def get_applied(node: ClusterNode, path: str) -> dict[str, Any] | None:
    """The answer, or None while the node has not applied what it names yet
    (reads are of its own state)."""
    answer = get(node, path)
    if answer.status == 404:
        return None
    assert answer.status == 200, (path, answer.status, answer.body[:300])
    body: dict[str, Any] = json.loads(answer.body)
    return body


def refused(node: ClusterNode, path: str, status: int, /, **params: Any) -> dict[str, Any]:
    answer = get(node, path, **params)
    assert answer.status == status, (path, params, answer.status, answer.body[:300])
    body: dict[str, Any] = json.loads(answer.body)
    assert isinstance(body["error"], str) and body["error"]
    return body


def submit(
    node: ClusterNode, command: str, labels: dict[str, str] | None = None, **fields: Any
) -> str:
    with node.client() as client:
        spec = shell_spec(command, labels=labels or {}, **fields)
        task_id: str = client.submit_task(spec).task.id
    return task_id


def post(node: ClusterNode, path: str, body: dict[str, Any] | None = None, /,
         guarded: bool = True, **params: Any) -> Response:  # fmt: skip
    """A change: JSON body, with the header every change needs (`guarded`)."""
    query = f"?{urlencode(params, doseq=True)}" if params else ""
    headers = {"Content-Type": "application/json"}
    if guarded:
        headers["X-Cortex-Request"] = "1"
    data = json.dumps(body if body is not None else {}).encode()
    return request(f"http://{node.http}{path}{query}", method="POST", headers=headers, data=data)


def post_json(node: ClusterNode, path: str, body: dict[str, Any] | None = None, /,
              status: int = 200, **params: Any) -> dict[str, Any]:  # fmt: skip
    answer = post(node, path, body, **params)
    assert answer.status == status, (path, params, answer.status, answer.body[:300])
    found: dict[str, Any] = json.loads(answer.body)
    return found


def wait_state(node: ClusterNode, task_id: str, states: tuple[str, ...]) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        found = get_applied(node, f"/api/v1/tasks/{task_id}")
        task: dict[str, Any] | None = found["task"] if found else None
        return task if task and task["state"] in states else None

    return wait_until(reached, 60, what=f"task {task_id} to be {'/'.join(states)}")


def test_tasks_are_listed_newest_first_filtered_counted_and_paged(cluster: Cluster) -> None:
    batch = uuid.uuid4().hex[:8]
    ids = [
        submit(cluster.nodes[n % 3], f"echo web-{batch}-{n}", {"batch": batch, "n": str(n)})
        for n in range(5)
    ]
    reader = cluster.nodes[2]
    for task_id in ids:
        wait_state(reader, task_id, ("completed",))
    listing = get_json(reader, "/api/v1/tasks", label=f"batch={batch}")
    assert [t["id"] for t in listing["tasks"]] == ids[::-1]
    assert listing["total"] == 5 and listing["next_page_token"] == ""
    first = listing["tasks"][0]
    assert first["labels"] == {"batch": batch, "n": "4"}
    assert first["command"] == f"echo web-{batch}-4" and first["state"] == "completed"
    # Pages of two, each continuing where the last ended.
    seen: list[str] = []
    token = ""
    while True:
        page = get_json(reader, "/api/v1/tasks", label=f"batch={batch}", page_size=2,
                        page_token=token)  # fmt: skip
        assert page["total"] == 5
        seen += [t["id"] for t in page["tasks"]]
        token = page["next_page_token"]
        if not token:
            break
    assert seen == ids[::-1]
    # Every filter applies: labels (with or without a value), text, state, node.
    assert get_json(reader, "/api/v1/tasks", label=["batch", "n=2"])["total"] >= 1
    only = get_json(reader, "/api/v1/tasks", label=[f"batch={batch}", "n=2"])
    assert [t["id"] for t in only["tasks"]] == [ids[2]]
    by_text = get_json(reader, "/api/v1/tasks", q=f"WEB-{batch}-3")
    assert [t["id"] for t in by_text["tasks"]] == [ids[3]]
    assert get_json(reader, "/api/v1/tasks", q=ids[1][:13])["tasks"][0]["id"] == ids[1]
    states = get_json(reader, "/api/v1/tasks", label=f"batch={batch}", state="failed,queued")
    assert states["total"] == 0
    node = first["node"]
    on_node = get_json(reader, "/api/v1/tasks", node=node, label=f"batch={batch}")
    assert on_node["tasks"] and all(t["node"] == node for t in on_node["tasks"])
    # Without a label or text, the state's own listing answers, paged the same way.
    everything = get_json(reader, "/api/v1/tasks", state="completed", page_size=3)
    assert len(everything["tasks"]) == 3 and everything["total"] >= 5
    assert everything["next_page_token"]
    assert everything["read"] == {
        "node_id": reader.node_id,
        "applied_index": everything["read"]["applied_index"],
        "consistency": "stale",
    }


def test_bad_parameters_are_refused_naming_them(cluster: Cluster) -> None:
    node = cluster.nodes[1]
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("/api/v1/tasks", {"state": "bogus"}, "state"),
        ("/api/v1/tasks", {"page_size": "0"}, "page_size"),
        ("/api/v1/tasks", {"page_size": "many"}, "page_size"),
        ("/api/v1/tasks", {"page_size": "5000"}, "page_size"),
        ("/api/v1/tasks", {"page_token": "not-a-token"}, "page_token"),
        ("/api/v1/tasks", {"label": "=x"}, "label"),
        ("/api/v1/tasks", {"node": ["a", "b"]}, "node"),
        ("/api/v1/tasks", {"q": "x" * 300}, "q"),
        ("/api/v1/tasks", {"states": "queued"}, "states"),
        ("/api/v1/workflows", {"state": "queued"}, "state"),
        ("/api/v1/nodes", {"verbose": "1"}, "verbose"),
    ]
    for path, params, parameter in cases:
        body = refused(node, path, 400, **params)
        assert body["parameter"] == parameter, (params, body)
        assert body["error"].startswith(f"{parameter}: "), body
    # A page token is refused with other filters than it was issued with.
    token = get_json(node, "/api/v1/tasks", page_size=1)["next_page_token"]
    assert token
    body = refused(node, "/api/v1/tasks", 400, page_size=1, page_token=token, state="failed")
    assert body["parameter"] == "page_token"
    task_id = submit(node, "echo params")
    for params, parameter in (
        ({"stream": "both"}, "stream"),
        ({"offset": "-1"}, "offset"),
        ({"attempt": "x"}, "attempt"),
    ):
        body = refused(node, f"/api/v1/tasks/{task_id}/output", 400, **params)
        assert body["parameter"] == parameter


def test_unknown_ids_and_paths_are_404_and_writes_to_reads_405(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    missing = str(uuid.uuid4())
    for path in (
        f"/api/v1/tasks/{missing}",
        f"/api/v1/tasks/{missing}/output",
        f"/api/v1/workflows/{missing}",
        "/api/v1/tasks/abc",
        "/api/v1/nope",
        "/api/v2/tasks",
    ):
        refused(node, path, 404)
    answer = post(node, "/api/v1/tasks")
    assert answer.status == 405 and answer.headers["Allow"] == "GET, HEAD"
    head = request(f"http://{node.http}/api/v1/nodes", method="HEAD")
    assert head.status == 200 and head.body == b""


def test_a_task_shows_its_spec_attempts_and_events(cluster: Cluster) -> None:
    task_id = submit(
        cluster.nodes[0],
        "echo spec; exit 3",
        {"team": "<b>web</b>"},
        retry_policy=pb.RetryPolicy(max_retries=0),
    )
    wait_state(cluster.nodes[1], task_id, ("failed", "dead_letter"))
    # By a unique prefix too, as every interface takes ids.
    task = get_json(cluster.nodes[1], f"/api/v1/tasks/{task_id[:12]}")["task"]
    assert task["id"] == task_id
    assert task["spec"]["command"] == "echo spec; exit 3"
    assert task["spec"]["labels"] == {"team": "<b>web</b>"}
    assert task["labels"] == {"team": "<b>web</b>"}
    first = task["attempts"][0]
    assert first["attempt"] == 1 and first["exit_code"] == 3 and not first["active"]
    assert first["node"] in {n.node_id for n in cluster.nodes}
    events = [event["event"] for event in task["events"]]
    assert events[:3] == ["submitted", "assigned", "started"]


def test_output_is_read_from_any_node_by_stream_and_offset(cluster: Cluster) -> None:
    task_id = submit(cluster.nodes[0], "echo out-1; echo err-1 >&2; printf 'caf\\303\\251\\n'")
    ran_on = wait_state(cluster.nodes[0], task_id, ("completed",))["node"]
    for node in cluster.nodes:  # two of them relay it from the node that ran it
        wait_state(node, task_id, ("completed",))
        stdout = get_json(node, f"/api/v1/tasks/{task_id}/output", stream="stdout")
        assert stdout["text"] == "out-1\ncafé\n", node.node_id
        assert stdout["done"] and not stdout["more"] and stdout["attempt"] == 1
        assert stdout["end"]["state"] == "completed" and stdout["end"]["exit_code"] == 0
        stderr = get_json(node, f"/api/v1/tasks/{task_id}/output", stream="stderr")
        assert stderr["text"] == "err-1\n"
        both = get_json(node, f"/api/v1/tasks/{task_id}/output")
        assert sorted(both["text"].splitlines()) == ["café", "err-1", "out-1"]
        assert (
            both["next_offset"]
            == both["end"]["total_bytes"]
            == len("out-1\nerr-1\ncafé\n".encode())
        )
        # From an offset in the combined output (the streams' order in it is
        # the order they were read in): the stream's bytes from there on.
        offset = stdout["next_offset"] - 3
        rest = get_json(node, f"/api/v1/tasks/{task_id}/output", stream="stdout", offset=offset)
        assert rest["text"] == "é\n" and rest["offset"] == offset
    assert ran_on in {n.node_id for n in cluster.nodes}


def test_output_is_read_live_while_the_task_runs(cluster: Cluster, tmp_path: Path) -> None:
    release = tmp_path / "release"
    task_id = submit(
        cluster.nodes[1],
        f"echo first; while [ ! -e {release} ]; do sleep 0.05; done; echo second",
    )
    ran_on = wait_state(cluster.nodes[1], task_id, ("running",))["node"]
    reader = next(n for n in cluster.nodes if n.node_id != ran_on)
    wait_state(reader, task_id, ("running",))
    path = f"/api/v1/tasks/{task_id}/output"

    def first_line() -> dict[str, Any] | None:
        page = get_json(reader, path, stream="stdout")
        return page if page["text"] == "first\n" else None

    page = wait_until(first_line, 30, what="the first line")
    assert not page["done"] and page["end"]["state"] == "running"
    offset = page["next_offset"]
    release.touch()

    def rest() -> dict[str, Any] | None:
        page = get_json(reader, path, stream="stdout", offset=offset)
        return page if page["done"] else None

    page = wait_until(rest, 30, what="the rest of the output")
    assert page["text"] == "second\n" and page["end"]["state"] == "completed"


def test_nodes_show_capacity_use_and_allocation(cluster: Cluster) -> None:
    ids = {n.node_id for n in cluster.nodes}

    def reported() -> list[dict[str, Any]] | None:
        nodes: list[dict[str, Any]] = get_json(cluster.nodes[0], "/api/v1/nodes")["nodes"]
        return nodes if all(n["up"] and n["used"] for n in nodes) else None

    nodes = wait_until(reported, 30, what="every node's report")
    assert {n["node_id"] for n in nodes} == ids
    assert sum(n["leader"] for n in nodes) == 1
    for node in nodes:
        assert node["capacity"]["tasks"] == 64
        assert node["capacity"]["memory_mb"] > 0 and node["capacity"]["cpu_cores"] > 0
        assert 0 < node["used"]["memory_mb"] <= node["capacity"]["memory_mb"]
        assert set(node["allocated"]) == {"tasks", "memory_mb"}


def test_workflows_are_listed_and_shown_with_their_dag(cluster: Cluster) -> None:
    with cluster.nodes[2].client() as client:
        workflow_id = client.submit_workflow(WORKFLOW).workflow_id
    reader = cluster.nodes[0]

    def finished() -> dict[str, Any] | None:
        found = get_applied(reader, f"/api/v1/workflows/{workflow_id}")
        workflow: dict[str, Any] | None = found["workflow"] if found else None
        return workflow if workflow and workflow["state"] == "completed" else None

    workflow = wait_until(finished, 60, what="the workflow to complete")
    tasks = {task["key"]: task for task in workflow["tasks"]}
    assert {key: task["state"] for key, task in tasks.items()} == {
        "first": "completed", "second": "completed", "never": "skipped", "last": "completed",
    }  # fmt: skip
    assert tasks["second"]["condition"] == "parent.first.exitCode === 0"
    assert tasks["last"]["depends_on"] == ["first", "second"]
    assert tasks["never"]["skip_reason"]
    listing = get_json(reader, "/api/v1/workflows", state="completed")
    assert workflow_id in [w["id"] for w in listing["workflows"]]
    assert listing["total"] >= 1
    mine = next(w for w in listing["workflows"] if w["id"] == workflow_id)
    assert mine["task_counts"] == {"completed": 3, "skipped": 1}
    # Its tasks are listed under it, and a prefix of its id filters as well.
    in_workflow = get_json(reader, "/api/v1/tasks", workflow=workflow_id[:10])
    assert {t["workflow_key"] for t in in_workflow["tasks"]} == set(tasks)


def test_the_api_token_by_header_or_by_the_login_cookie(
    make_cluster: Callable[..., Cluster],
) -> None:
    (node,) = make_cluster(1, api_token=TOKEN).nodes
    base = f"http://{node.http}"
    for token in (None, "wrong-token"):
        answer = request(f"{base}/api/v1/tasks", token)
        assert answer.status == 401 and json.loads(answer.body)["error"]
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert request(f"{base}/api/v1/tasks", TOKEN).status == 200
    # The page itself holds no data: it is served, and asks for the token.
    page = request(f"{base}/")
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert request(f"{base}/ui/app.js").status == 200
    assert request(f"{base}/ui/nope.js").status == 401

    def login(token: str) -> Response:
        return request(
            f"{base}/login",
            method="POST",
            data=urlencode({"token": token}).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )

    assert login("wrong-token").status == 401
    assert request(f"{base}/login").status == 405
    accepted = login(TOKEN)
    assert accepted.status == 204
    cookie = accepted.headers["Set-Cookie"]
    assert cookie.startswith(f"cortex_token={quote(TOKEN, safe='')};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    sent = {"Cookie": cookie.split(";")[0]}
    assert request(f"{base}/api/v1/nodes", headers=sent).status == 200
    assert request(f"{base}/metrics", headers=sent).status == 200
    assert request(f"{base}/api/v1/nodes", headers={"Cookie": "cortex_token=nope"}).status == 401
    out = request(f"{base}/logout", method="POST", data=b"")
    assert out.status == 204 and "Max-Age=0" in out.headers["Set-Cookie"]


def test_the_cluster_shows_one_leader_and_every_members_digest(cluster: Cluster) -> None:
    submit(cluster.nodes[1], "echo cluster page")
    ids = sorted(node.node_id for node in cluster.nodes)

    def settled() -> dict[str, Any] | None:
        found = get_json(cluster.nodes[2], "/api/v1/cluster")["cluster"]
        members = found["members"]
        indexes = {m["applied_index"] for m in members}
        digests = {m["state_digest"] for m in members}
        return found if len(indexes) == 1 and len(digests) == 1 else None

    seen = wait_until(settled, 30, what="every member at one applied index and digest")
    assert sorted(m["node_id"] for m in seen["members"]) == ids
    assert all(m["reachable"] and m["error"] is None for m in seen["members"])
    leaders = [m["node_id"] for m in seen["members"] if m["is_leader"]]
    assert leaders == [seen["leader_id"]] and seen["term"] >= 1
    assert [m["raft_state"] for m in seen["members"]].count("leader") == 1
    assert seen["events"] and seen["events"][0]["seq"] > seen["events"][-1]["seq"]
    assert (
        refused(cluster.nodes[0], "/api/v1/cluster", 400, page_size=3)["parameter"] == "page_size"
    )


def test_a_task_is_cancelled_from_the_api_and_a_second_cancel_conflicts(
    cluster: Cluster,
) -> None:
    node = cluster.nodes[0]
    task_id = submit(node, "sleep 60")
    wait_state(node, task_id, ("running",))
    cancelled = post_json(node, f"/api/v1/tasks/{task_id}/cancel", {"reason": "enough"})
    assert cancelled["task"]["id"] == task_id and cancelled["task"]["state"] == "cancelled"
    again = post_json(node, f"/api/v1/tasks/{task_id[:8]}/cancel", status=409)
    assert "already cancelled" in again["error"]
    missing = post_json(node, f"/api/v1/tasks/{uuid.uuid4()}/cancel", status=404)
    assert "no task" in missing["error"]


def test_a_bulk_cancel_acts_on_no_more_than_the_confirmed_matches(cluster: Cluster) -> None:
    node, other = cluster.nodes[1], cluster.nodes[2]
    batch = uuid.uuid4().hex[:8]
    ids = [submit(node, "sleep 60", {"bulk": batch}) for _ in range(3)]
    done = submit(node, "true", {"bulk": batch})
    wait_state(other, done, ("completed",))
    for task_id in ids:
        wait_state(other, task_id, ("queued", "assigned", "running"))
    # More match than were confirmed: nothing changes, and the count is told.
    conflict = post_json(other, "/api/v1/tasks/cancel", {"expected": 3}, status=409,
                         label=f"bulk={batch}")  # fmt: skip
    assert conflict["matched"] == 4
    assert all(wait_state(other, t, ("queued", "assigned", "running")) for t in ids)
    result = post_json(other, "/api/v1/tasks/cancel", {"expected": 4}, label=f"bulk={batch}")
    assert result["matched"] == 4 and result["acted"] == 3 and result["unchanged"] == 1
    assert result["errors"] == []
    for task_id in ids:
        assert wait_state(node, task_id, ("cancelled",))["state"] == "cancelled"
    nothing = post_json(other, "/api/v1/tasks/cancel", {"expected": 0},
                        label=f"bulk={batch}", state="running")  # fmt: skip
    assert nothing == {**nothing, "matched": 0, "acted": 0}


def test_a_bulk_retry_queues_the_matching_dead_letters_again(
    cluster: Cluster, tmp_path: Path
) -> None:
    node = cluster.nodes[2]
    batch = uuid.uuid4().hex[:8]
    marker = tmp_path / "fixed"
    command = f"test -e {marker}"
    policy = pb.RetryPolicy(max_retries=1, backoff=Duration(nanos=10_000_000))
    ids = [submit(node, command, {"dlq": batch}, retry_policy=policy) for _ in range(2)]
    for task_id in ids:
        wait_state(node, task_id, ("dead_letter",))
    marker.touch()
    result = post_json(node, "/api/v1/tasks/retry", {"expected": 2}, label=f"dlq={batch}")
    assert result["matched"] == 2 and result["acted"] == 2
    for task_id in ids:
        wait_state(cluster.nodes[0], task_id, ("completed",))
    # Nothing left in the dead-letter queue: the matches are left as they are.
    again = post_json(node, "/api/v1/tasks/retry", {"expected": 2}, label=f"dlq={batch}")
    assert again["acted"] == 0 and again["unchanged"] == 2


def test_a_node_is_cordoned_drained_and_uncordoned_from_the_api(cluster: Cluster) -> None:
    asker, target = cluster.nodes[0], cluster.nodes[2]
    path = f"/api/v1/nodes/{target.node_id}"

    def status_on(node: ClusterNode, wanted: str) -> bool:
        nodes = get_json(node, "/api/v1/nodes")["nodes"]
        return any(n["node_id"] == target.node_id and n["status"] == wanted for n in nodes)

    try:
        assert post_json(asker, f"{path}/cordon")["node"]["status"] == "cordoned"
        wait_until(lambda: status_on(target, "cordoned"), 30, what="the cordon applied")
        drained = post_json(asker, f"{path}/drain", {"deadline_s": 60})["node"]
        assert drained["status"] == "draining"
    finally:
        restored = post_json(asker, f"{path}/uncordon")["node"]
    assert restored["status"] == "active"
    wait_until(lambda: status_on(cluster.nodes[1], "active"), 30, what="the uncordon applied")
    assert post_json(asker, "/api/v1/nodes/nope/cordon", status=404)["error"]
    bad = post_json(asker, f"{path}/drain", {"deadline_s": -1}, status=400)
    assert bad["parameter"] == "deadline_s"


def test_changes_need_their_header_and_the_right_method(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    task_id = submit(node, "true")
    # A cross-site form cannot set the header: refused before anything changes.
    unguarded = post(node, f"/api/v1/tasks/{task_id}/cancel", guarded=False)
    assert unguarded.status == 403 and "X-Cortex-Request" in json.loads(unguarded.body)["error"]
    for path in ("/api/v1/tasks", f"/api/v1/tasks/{task_id}", "/api/v1/cluster"):
        answer = post(node, path)
        assert answer.status == 405 and answer.headers["Allow"] == "GET, HEAD", path
    for path in (
        f"/api/v1/tasks/{task_id}/cancel",
        "/api/v1/tasks/cancel",
        "/api/v1/nodes/x/drain",
    ):
        answer = get(node, path)
        assert answer.status == 405 and answer.headers["Allow"] == "POST", path
    assert post(node, "/api/v1/tasks/x/explode").status == 404
    bad = post_json(node, "/api/v1/tasks/cancel", {"expected": 1, "force": True}, status=400)
    assert bad["parameter"] == "force"

"""Limits per concurrency key and weights of fairness keys over the public
API, and the keys a task spec carries: set, listed with the tasks they
count, deleted; bad requests refused with INVALID_ARGUMENT. Driven through
the servicer over a real StateMachine (tests/api_harness.py), and once
through CortexClient over a real gRPC server."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from cortex.api.client import CortexClient
from cortex.api.convert import spec_from_proto, spec_to_proto
from cortex.client import Client
from cortex.errors import InvalidArgument, NotFound
from cortex.spec import parse_task_spec
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc
from tests.api_harness import Aborted, ApiState


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiState]:
    state = ApiState(tmp_path)
    yield state
    state.close()


def refused(api: ApiState, method: str, request: object) -> Aborted:
    with pytest.raises(Aborted) as refusal:
        api.call(method, request)
    return refusal.value


def submit(api: ApiState, concurrency_key: str = "", fairness_key: str = "") -> pb.Task:
    spec = pb.TaskSpec(command=["true"], concurrency_key=concurrency_key, fairness_key=fairness_key)
    task: pb.Task = api.call("SubmitTask", pb.SubmitTaskRequest(spec=spec)).task
    return task


# -- task specs -------------------------------------------------------------------


def test_a_spec_carries_its_concurrency_and_fairness_keys() -> None:
    message = pb.TaskSpec(command=["true"], concurrency_key="gpu", fairness_key="team-a")
    spec = spec_from_proto(message)
    assert spec["concurrencyKey"] == "gpu" and spec["fairnessKey"] == "team-a"
    stored = parse_task_spec(spec).model_dump(mode="json")
    back = spec_to_proto(stored)
    assert back.concurrency_key == "gpu" and back.fairness_key == "team-a"
    again = spec_from_proto(back)
    assert (again["concurrencyKey"], again["fairnessKey"]) == ("gpu", "team-a")
    # Empty is unset, both ways.
    plain = spec_from_proto(pb.TaskSpec(command=["true"]))
    assert "concurrencyKey" not in plain and "fairnessKey" not in plain
    unset = spec_to_proto(parse_task_spec(plain).model_dump(mode="json"))
    assert unset.concurrency_key == "" and unset.fairness_key == ""


def test_a_task_says_the_keys_it_counts_against(api: ApiState) -> None:
    keyed = submit(api, concurrency_key="gpu", fairness_key="team-a")
    assert keyed.concurrency_key == "gpu" and keyed.fairness_key == "team-a"
    assert keyed.spec.concurrency_key == "gpu" and keyed.spec.fairness_key == "team-a"
    plain = submit(api)
    assert plain.concurrency_key == "" and plain.fairness_key == "default"
    assert plain.spec.concurrency_key == "" and plain.spec.fairness_key == ""
    got = api.call("GetTask", pb.GetTaskRequest(task_id=keyed.id)).task
    assert got.concurrency_key == "gpu" and got.fairness_key == "team-a"
    bad = refused(api, "SubmitTask", pb.SubmitTaskRequest(
        spec=pb.TaskSpec(command=["true"], concurrency_key="no spaces")))  # fmt: skip
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and "concurrencyKey" in bad.message


# -- limits -----------------------------------------------------------------------


def test_limits_are_set_listed_and_deleted(api: ApiState) -> None:
    submit(api, concurrency_key="gpu")
    set_ = api.call("SetLimit", pb.SetLimitRequest(key="gpu", max_running=2, rate_per_minute=120))
    limit = set_.limit
    assert (limit.key, limit.max_running, limit.rate_per_minute) == ("gpu", 2, 120)
    assert limit.burst == 2  # a second's worth of the rate
    assert (limit.running, limit.queued) == (0, 1) and limit.tokens == 2.0
    assert limit.HasField("update_time")
    assert set_.commit_index == api.log.index and set_.header.applied_index == api.log.index
    api.call("SetLimit", pb.SetLimitRequest(key="db", max_running=1))

    listed = api.call("ListLimits", pb.ListLimitsRequest())
    assert [(lim.key, lim.max_running) for lim in listed.limits] == [("db", 1), ("gpu", 2)]
    assert listed.limits[0].burst == 1 and listed.limits[0].tokens == 0.0
    assert listed.header.consistency == pb.READ_CONSISTENCY_SESSION

    replaced = api.call("SetLimit", pb.SetLimitRequest(key="gpu", rate_per_minute=6, burst=3))
    assert (replaced.limit.max_running, replaced.limit.burst) == (0, 3)
    deleted = api.call("DeleteLimit", pb.DeleteLimitRequest(key="gpu"))
    assert deleted.limit.rate_per_minute == 6 and deleted.commit_index == api.log.index
    assert [lim.key for lim in api.call("ListLimits", pb.ListLimitsRequest()).limits] == ["db"]
    gone = refused(api, "DeleteLimit", pb.DeleteLimitRequest(key="gpu"))
    assert gone.code == grpc.StatusCode.NOT_FOUND and "gpu" in gone.message


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        (pb.SetLimitRequest(key="gpu"), "max running count, a rate"),
        (pb.SetLimitRequest(key="", max_running=1), "key"),
        (pb.SetLimitRequest(key="no spaces", max_running=1), "key"),
        (pb.SetLimitRequest(key="gpu", max_running=-1), "max running"),
        (pb.SetLimitRequest(key="gpu", rate_per_minute=-1), "rate"),
        (pb.SetLimitRequest(key="gpu", max_running=1, burst=-1), "burst"),
    ],
    ids=["no-limit", "no-key", "bad-key", "negative-max", "negative-rate", "negative-burst"],
)
def test_bad_limits_are_refused(api: ApiState, request_: pb.SetLimitRequest, words: str) -> None:
    bad = refused(api, "SetLimit", request_)
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and words in bad.message, bad.message
    assert not api.call("ListLimits", pb.ListLimitsRequest()).limits


# -- fairness weights -------------------------------------------------------------


def test_weights_are_set_and_listed_with_their_tasks(api: ApiState) -> None:
    submit(api, fairness_key="team-a")
    submit(api)
    set_ = api.call("SetFairnessWeight", pb.SetFairnessWeightRequest(key="team-a", weight=3))
    assert (set_.weight.key, set_.weight.weight, set_.weight.queued) == ("team-a", 3, 1)
    assert set_.commit_index == api.log.index
    listed = api.call("ListFairnessWeights", pb.ListFairnessWeightsRequest())
    assert [(w.key, w.weight, w.queued, w.active) for w in listed.weights] == [
        ("default", 1, 1, 0),
        ("team-a", 3, 1, 0),
    ]
    assert listed.header.consistency == pb.READ_CONSISTENCY_SESSION
    for request in (
        pb.SetFairnessWeightRequest(key="team-a", weight=0),
        pb.SetFairnessWeightRequest(key="team-a", weight=10_001),
        pb.SetFairnessWeightRequest(key="", weight=2),
    ):
        bad = refused(api, "SetFairnessWeight", request)
        assert bad.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "weight" in bad.message or "key" in bad.message


# -- the client -------------------------------------------------------------------


@pytest.fixture
def address(api: ApiState) -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_CortexServiceServicer_to_server(api.servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None)


@pytest.fixture
def client(address: str) -> Iterator[CortexClient]:
    with CortexClient(address, tls=False, token="", busy_retries=0) as client:
        yield client


def test_the_client_drives_every_limit_call(client: CortexClient) -> None:
    submitted = client.submit_task(pb.TaskSpec(command=["true"], concurrency_key="gpu"))
    assert submitted.task.concurrency_key == "gpu"
    set_ = client.set_limit("gpu", max_running=4, rate_per_minute=60, burst=5)
    assert set_.limit.burst == 5 and client.session_index == set_.commit_index
    assert [lim.queued for lim in client.list_limits().limits] == [1]
    assert client.delete_limit("gpu").limit.max_running == 4
    assert not client.list_limits().limits
    with pytest.raises(NotFound):
        client.delete_limit("gpu")
    assert client.set_fairness_weight("team-a", 5).weight.weight == 5
    weights = client.list_fairness_weights().weights
    assert [(w.key, w.weight) for w in weights] == [("default", 1), ("team-a", 5)]
    with pytest.raises(InvalidArgument, match="weight"):
        client.set_fairness_weight("team-a", 0)


def test_the_public_client_submits_and_shows_the_keys(address: str) -> None:
    with Client(address, tls=False, token="") as cortex:
        keyed = cortex.submit_task(["true"], concurrency_key="gpu", fairness_key="team-a")
        assert (keyed.concurrency_key, keyed.fairness_key) == ("gpu", "team-a")
        plain = cortex.get_task(cortex.submit_task("true").id)
        assert (plain.concurrency_key, plain.fairness_key) == ("", "default")
        (batched,) = cortex.submit_tasks([{"command": ["true"], "concurrency_key": "db"}])
        assert not isinstance(batched, Exception) and batched.concurrency_key == "db"

"""Schedules over the public API: created once per name and settings, read
by name or id with their recent firings, paused, resumed, triggered by hand
and deleted; bad requests refused with INVALID_ARGUMENT naming the field.
Driven through the servicer over a real StateMachine (tests/api_harness.py),
and once through CortexClient over a real gRPC server."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import grpc
import pytest

from cortex.api.client import CortexClient
from cortex.errors import InvalidArgument, NotFound
from cortex.v1 import cortex_pb2 as pb
from cortex.v1 import cortex_pb2_grpc as pb_grpc
from tests.api_harness import Aborted, ApiState

TASK = pb.TaskSpec(command=["echo", "tick"])
WORKFLOW = 'name: nightly\ntasks:\n  a: {spec: {command: "true"}}\n'


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiState]:
    state = ApiState(tmp_path)
    yield state
    state.close()


def refused(api: ApiState, method: str, request: object) -> Aborted:
    with pytest.raises(Aborted) as refusal:
        api.call(method, request)
    return refusal.value


def every_minute(name: str = "tick", **fields: Any) -> pb.CreateScheduleRequest:
    """A schedule of TASK every minute, with `fields` changed or added."""
    return pb.CreateScheduleRequest(**{"name": name, "every": timedelta(minutes=1), "task": TASK,
                                       **fields})  # fmt: skip


# -- create and read --------------------------------------------------------------


def test_a_schedule_is_created_once_and_read_by_name_or_id(api: ApiState) -> None:
    made = api.call("CreateSchedule", every_minute())
    schedule = made.schedule
    assert made.created and schedule.id.startswith("sch-") and schedule.name == "tick"
    assert made.commit_index == api.log.index and made.header.applied_index == api.log.index
    assert schedule.every.ToMilliseconds() == 60_000 and not schedule.cron
    assert not schedule.timezone
    assert schedule.WhichOneof("target") == "task"
    assert list(schedule.task.command) == ["echo", "tick"] and not schedule.workflow_format
    assert schedule.overlap == pb.SCHEDULE_OVERLAP_SKIP
    assert schedule.catchup_window.ToMilliseconds() == 60_000
    assert not schedule.paused
    assert schedule.HasField("create_time") and schedule.HasField("update_time")
    # Slots fall at the creation time plus whole periods.
    created_ms = schedule.create_time.ToMilliseconds()
    assert schedule.next_slot.ToMilliseconds() == created_ms + 60_000
    assert schedule.last_slot.ToMilliseconds() == created_ms
    assert not schedule.HasField("last_fired_at") and not schedule.HasField("buffered_slot")
    assert (schedule.fired, schedule.missed, schedule.skipped) == (0, 0, 0)
    assert not schedule.active_runs and not schedule.recent

    again = api.call("CreateSchedule", every_minute())
    assert not again.created and again.schedule.id == schedule.id
    assert again.commit_index == made.commit_index

    by_name = api.call("GetSchedule", pb.GetScheduleRequest(schedule="tick"))
    by_id = api.call("GetSchedule", pb.GetScheduleRequest(schedule=schedule.id))
    assert by_name.schedule == by_id.schedule == schedule
    assert by_name.header.consistency == pb.READ_CONSISTENCY_SESSION


def test_cron_schedules_of_workflows_and_the_listing(api: ApiState) -> None:
    nightly = api.call("CreateSchedule", pb.CreateScheduleRequest(
        name="nightly", cron="30 2 * * *", timezone="Europe/Berlin",
        workflow_definition=WORKFLOW, overlap=pb.SCHEDULE_OVERLAP_BUFFER_ONE,
        catchup_window=timedelta(0), paused=True,
    )).schedule  # fmt: skip
    assert nightly.cron == "30 2 * * *" and nightly.timezone == "Europe/Berlin"
    assert not nightly.HasField("every")
    assert nightly.WhichOneof("target") == "workflow_definition"
    assert (
        nightly.workflow_definition == WORKFLOW
        and nightly.workflow_format == pb.DEFINITION_FORMAT_YAML
    )
    assert nightly.overlap == pb.SCHEDULE_OVERLAP_BUFFER_ONE
    assert nightly.HasField("catchup_window") and nightly.catchup_window.ToMilliseconds() == 0
    assert nightly.paused and not nightly.HasField("next_slot")
    utc = api.call("CreateSchedule", pb.CreateScheduleRequest(
        name="hourly", cron="0 * * * *", task=TASK)).schedule  # fmt: skip
    assert utc.timezone == "UTC" and utc.next_slot.ToMilliseconds() % 3_600_000 == 0

    listed = api.call("ListSchedules", pb.ListSchedulesRequest())
    assert [s.name for s in listed.schedules] == ["hourly", "nightly"]
    assert listed.header.consistency == pb.READ_CONSISTENCY_SESSION
    stale = pb.ReadOptions(consistency=pb.READ_CONSISTENCY_STALE)
    listed = api.call("ListSchedules", pb.ListSchedulesRequest(read_options=stale))
    assert listed.header.consistency == pb.READ_CONSISTENCY_STALE


def test_reads_wait_for_the_index_they_ask_for(api: ApiState) -> None:
    api.call("CreateSchedule", every_minute())
    ahead = pb.ReadOptions(min_index=api.log.index + 100)
    late = refused(api, "GetSchedule", pb.GetScheduleRequest(schedule="tick", read_options=ahead))
    assert late.code == grpc.StatusCode.UNAVAILABLE


# -- pause, resume, trigger, delete -----------------------------------------------


def test_pause_resume_trigger_and_delete(api: ApiState) -> None:
    made = api.call("CreateSchedule", every_minute()).schedule
    paused = api.call("PauseSchedule", pb.PauseScheduleRequest(schedule="tick"))
    assert paused.schedule.paused and not paused.schedule.HasField("next_slot")
    assert paused.commit_index == api.log.index
    assert api.call("PauseSchedule", pb.PauseScheduleRequest(schedule=made.id)).schedule.paused

    # A paused schedule starts a run by hand all the same.
    started = api.call("TriggerSchedule", pb.TriggerScheduleRequest(schedule="tick"))
    assert started.task_id and not started.workflow_id
    assert started.commit_index == api.log.index
    task = api.call("GetTask", pb.GetTaskRequest(task_id=started.task_id)).task
    assert task.state == pb.TASK_STATE_QUEUED and list(task.spec.command) == ["echo", "tick"]

    resumed = api.call("ResumeSchedule", pb.ResumeScheduleRequest(schedule="tick")).schedule
    assert not resumed.paused and resumed.HasField("next_slot")
    assert resumed.fired == 1 and list(resumed.active_runs) == [started.task_id]
    assert resumed.HasField("last_fired_at") and not resumed.HasField("last_fired_slot")
    (firing,) = resumed.recent
    assert firing.action == pb.SCHEDULE_FIRING_ACTION_TRIGGER
    assert firing.reason == "started by hand" and firing.count == 1
    assert firing.task_id == started.task_id and not firing.workflow_id
    assert firing.run_state == "queued" and firing.HasField("decided_at")

    deleted = api.call("DeleteSchedule", pb.DeleteScheduleRequest(schedule="tick"))
    assert deleted.schedule.id == made.id and deleted.schedule.fired == 1
    assert deleted.commit_index == api.log.index
    gone = refused(api, "GetSchedule", pb.GetScheduleRequest(schedule="tick"))
    assert gone.code == grpc.StatusCode.NOT_FOUND and "tick" in gone.message
    # What it started stays.
    assert api.call("GetTask", pb.GetTaskRequest(task_id=started.task_id)).task.id


def test_a_workflow_schedule_triggers_a_workflow(api: ApiState) -> None:
    api.call("CreateSchedule", pb.CreateScheduleRequest(
        name="nightly", cron="30 2 * * *", workflow_definition=WORKFLOW))  # fmt: skip
    started = api.call("TriggerSchedule", pb.TriggerScheduleRequest(schedule="nightly"))
    assert started.workflow_id and not started.task_id
    flow = api.call("GetWorkflow", pb.GetWorkflowRequest(workflow_id=started.workflow_id))
    assert flow.workflow.name == "nightly"
    (firing,) = api.call("GetSchedule", pb.GetScheduleRequest(schedule="nightly")).schedule.recent
    assert firing.workflow_id == started.workflow_id and not firing.task_id
    assert firing.run_state == "running"


# -- refusals ---------------------------------------------------------------------


EVERY_MINUTE = timedelta(minutes=1)
# Bad requests, each with the words its refusal must hold.
BAD_REQUESTS = {
    "cron-out-of-range": (pb.CreateScheduleRequest(name="s", cron="61 * * * *", task=TASK), "cron"),
    "cron-three-fields": (pb.CreateScheduleRequest(name="s", cron="* * *", task=TASK), "cron"),
    "every-under-1s": (every_minute("s", every=timedelta(milliseconds=500)), "every"),
    "every-zero": (every_minute("s", every=timedelta(0)), "every"),
    "every-negative": (every_minute("s", every=timedelta(seconds=-5)), "every"),
    "unknown-timezone": (
        pb.CreateScheduleRequest(name="s", cron="0 * * * *", timezone="Mars/Olympus", task=TASK),
        "timezone",
    ),
    "timezone-with-every": (every_minute("s", timezone="Europe/Berlin"), "timezone"),
    "no-timing": (pb.CreateScheduleRequest(name="s", task=TASK), "cron and every"),
    "no-target": (
        pb.CreateScheduleRequest(name="s", cron="0 * * * *"),
        "task and workflow_definition",
    ),
    "unknown-overlap": (every_minute("s", overlap=9), "overlap"),
    "negative-catchup": (every_minute("s", catchup_window=timedelta(seconds=-1)), "catchup_window"),
    "catchup-over-366d": (every_minute("s", catchup_window=timedelta(days=400)), "catchup_window"),
    "bad-name": (every_minute("no spaces"), "name"),
    "no-name": (every_minute(""), "name"),
    "bad-spec": (
        pb.CreateScheduleRequest(
            name="s", every=EVERY_MINUTE, task=pb.TaskSpec(command=["x"], priority=11)
        ),
        "priority",
    ),
    "bad-definition": (
        pb.CreateScheduleRequest(
            name="s", every=EVERY_MINUTE, workflow_definition="name: [unclosed"
        ),
        "yaml",
    ),
    "bad-format": (
        pb.CreateScheduleRequest(
            name="s",
            every=EVERY_MINUTE,
            workflow_definition=WORKFLOW,
            workflow_format=cast(pb.DefinitionFormat, 7),
        ),
        "format",
    ),
}


@pytest.mark.parametrize(("request_", "field"), list(BAD_REQUESTS.values()), ids=list(BAD_REQUESTS))
def test_bad_requests_are_refused_naming_the_field(
    api: ApiState, request_: pb.CreateScheduleRequest, field: str
) -> None:
    bad = refused(api, "CreateSchedule", request_)
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT, bad.message
    assert field in bad.message.lower()
    assert not api.call("ListSchedules", pb.ListSchedulesRequest()).schedules


def test_a_name_taken_with_other_settings_and_unknown_schedules(api: ApiState) -> None:
    api.call("CreateSchedule", every_minute())
    taken = refused(api, "CreateSchedule", every_minute(every=timedelta(minutes=2)))
    assert taken.code == grpc.StatusCode.ALREADY_EXISTS and "tick" in taken.message
    busier = every_minute(overlap=pb.SCHEDULE_OVERLAP_ALLOW_ALL)
    assert refused(api, "CreateSchedule", busier).code == grpc.StatusCode.ALREADY_EXISTS
    # SKIP spelled out is the default it was created with.
    same = api.call("CreateSchedule", every_minute(overlap=pb.SCHEDULE_OVERLAP_SKIP))
    assert not same.created

    for method, request in (
        ("GetSchedule", pb.GetScheduleRequest(schedule="nope")),
        ("PauseSchedule", pb.PauseScheduleRequest(schedule="nope")),
        ("ResumeSchedule", pb.ResumeScheduleRequest(schedule="nope")),
        ("DeleteSchedule", pb.DeleteScheduleRequest(schedule="nope")),
        ("TriggerSchedule", pb.TriggerScheduleRequest(schedule="nope")),
    ):
        assert refused(api, method, request).code == grpc.StatusCode.NOT_FOUND, method
    missing = refused(api, "GetSchedule", pb.GetScheduleRequest())
    assert missing.code == grpc.StatusCode.INVALID_ARGUMENT


# -- the client -------------------------------------------------------------------


@pytest.fixture
def client(api: ApiState) -> Iterator[CortexClient]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_CortexServiceServicer_to_server(api.servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with CortexClient(f"127.0.0.1:{port}", tls=False, token="", busy_retries=0) as client:
        yield client
    server.stop(None)


def test_the_client_drives_every_schedule_call(client: CortexClient) -> None:
    made = client.create_schedule(
        "tick", every=timedelta(seconds=30), task=TASK, overlap="cancel_previous",
        catchup_window=timedelta(minutes=5),
    )  # fmt: skip
    assert made.created and client.session_index == made.commit_index
    assert made.schedule.overlap == pb.SCHEDULE_OVERLAP_CANCEL_PREVIOUS
    assert made.schedule.catchup_window.ToMilliseconds() == 300_000
    nightly = client.create_schedule(
        "nightly", cron="30 2 * * *", timezone="Europe/Berlin",
        workflow_definition=WORKFLOW, workflow_format="yaml", paused=True,
    ).schedule  # fmt: skip
    assert nightly.paused and nightly.overlap == pb.SCHEDULE_OVERLAP_SKIP
    assert [s.name for s in client.list_schedules().schedules] == ["nightly", "tick"]
    assert client.get_schedule(made.schedule.id).schedule.name == "tick"
    assert client.pause_schedule("tick").schedule.paused
    assert not client.resume_schedule("tick").schedule.paused
    started = client.trigger_schedule("nightly")
    assert started.workflow_id and client.session_index == started.commit_index
    assert client.delete_schedule("nightly").schedule.name == "nightly"
    with pytest.raises(NotFound):
        client.get_schedule("nightly")


def test_the_client_refuses_what_the_request_cannot_say(client: CortexClient) -> None:
    """A oneof holds one member: given both, the client refuses rather than
    send one of them."""
    with pytest.raises(InvalidArgument, match="cron and every"):
        client.create_schedule("s", cron="* * * * *", every=timedelta(minutes=1), task=TASK)
    with pytest.raises(InvalidArgument, match="task and workflow_definition"):
        client.create_schedule("s", cron="* * * * *", task=TASK, workflow_definition=WORKFLOW)
    with pytest.raises(InvalidArgument, match="overlap must be one of skip, buffer_one"):
        client.create_schedule("s", cron="* * * * *", task=TASK, overlap="sometimes")
    with pytest.raises(InvalidArgument, match="every"):
        client.create_schedule("s", every=timedelta(0), task=TASK)
    with pytest.raises(InvalidArgument, match="cron and every"):
        client.create_schedule("s", task=TASK)
    assert not client.list_schedules().schedules

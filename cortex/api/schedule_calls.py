"""The schedule RPCs of cortex.v1.CortexService, for `CortexServicer`:
create, read, pause, resume, delete and trigger schedules through the
node's `ScheduleOperations`. Reads wait for their ReadOptions; writes answer
once applied on this node, with its applied index as their commit index."""

from __future__ import annotations

import grpc

from cortex.api.consistency import ReadGate, caught_up_before_not_found
from cortex.api.schedule_convert import new_schedule, schedule_to_proto
from cortex.api.status_codes import maps_errors
from cortex.errors import FailedPrecondition
from cortex.schedules.operations import ScheduleOperations
from cortex.state.schedule_queries import ScheduleView
from cortex.v1 import cortex_pb2 as pb


class ScheduleCalls:
    """Mixed into `CortexServicer`, which sets these attributes."""

    _schedules: ScheduleOperations | None
    _reads: ReadGate

    def _schedule_operations(self) -> ScheduleOperations:
        if self._schedules is None:
            raise FailedPrecondition("this server does not serve schedules")
        return self._schedules

    def _written(self, view: ScheduleView) -> tuple[pb.Schedule, int, pb.ResponseHeader]:
        """A schedule as a write left it, the index the write committed at
        (this node's applied index right after it applied it, so at or past
        it), and the header."""
        header = self._reads.header()
        return schedule_to_proto(view), header.applied_index, header

    @maps_errors
    def CreateSchedule(
        self, request: pb.CreateScheduleRequest, context: grpc.ServicerContext
    ) -> pb.CreateScheduleResponse:
        new = new_schedule(request)
        view, created = self._schedule_operations().create(
            new.name,
            new.timing,
            new.task_spec,
            new.workflow_text,
            new.workflow_format,
            new.overlap,
            new.catchup_window_ms,
            new.paused,
        )
        schedule, index, header = self._written(view)
        return pb.CreateScheduleResponse(
            schedule=schedule, created=created, commit_index=index, header=header
        )

    @maps_errors
    def ListSchedules(
        self, request: pb.ListSchedulesRequest, context: grpc.ServicerContext
    ) -> pb.ListSchedulesResponse:
        operations = self._schedule_operations()
        served = self._reads.before_read(request.read_options, context)
        return pb.ListSchedulesResponse(
            schedules=[schedule_to_proto(view) for view in operations.list_schedules()],
            header=self._reads.header(served),
        )

    @maps_errors
    def GetSchedule(
        self, request: pb.GetScheduleRequest, context: grpc.ServicerContext
    ) -> pb.GetScheduleResponse:
        operations = self._schedule_operations()
        served = self._reads.before_read(request.read_options, context)
        return pb.GetScheduleResponse(
            schedule=schedule_to_proto(operations.get(request.schedule)),
            header=self._reads.header(served),
        )

    @maps_errors
    @caught_up_before_not_found
    def PauseSchedule(
        self, request: pb.PauseScheduleRequest, context: grpc.ServicerContext
    ) -> pb.PauseScheduleResponse:
        schedule, index, header = self._written(self._schedule_operations().pause(request.schedule))
        return pb.PauseScheduleResponse(schedule=schedule, commit_index=index, header=header)

    @maps_errors
    @caught_up_before_not_found
    def ResumeSchedule(
        self, request: pb.ResumeScheduleRequest, context: grpc.ServicerContext
    ) -> pb.ResumeScheduleResponse:
        schedule, index, header = self._written(
            self._schedule_operations().resume(request.schedule)
        )
        return pb.ResumeScheduleResponse(schedule=schedule, commit_index=index, header=header)

    @maps_errors
    @caught_up_before_not_found
    def DeleteSchedule(
        self, request: pb.DeleteScheduleRequest, context: grpc.ServicerContext
    ) -> pb.DeleteScheduleResponse:
        schedule, index, header = self._written(
            self._schedule_operations().delete(request.schedule)
        )
        return pb.DeleteScheduleResponse(schedule=schedule, commit_index=index, header=header)

    @maps_errors
    @caught_up_before_not_found
    def TriggerSchedule(
        self, request: pb.TriggerScheduleRequest, context: grpc.ServicerContext
    ) -> pb.TriggerScheduleResponse:
        kind, run_id = self._schedule_operations().trigger(request.schedule)
        header = self._reads.header()
        return pb.TriggerScheduleResponse(
            task_id=run_id if kind == "task" else "",
            workflow_id=run_id if kind == "workflow" else "",
            commit_index=header.applied_index,
            header=header,
        )

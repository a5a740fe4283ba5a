"""The tracer that records spans, with the OpenTelemetry SDK (the `otel`
extra), and the exporters `otel_exporter` names: OTLP over HTTP, or a file
of JSON lines. A span that cannot be made or sent is logged and dropped:
tracing never fails the work it watches."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from cortex.state.traceparent import TraceParent
from cortex.tracing.exporter_setting import ExporterSetting
from cortex.tracing.spans import (
    EXECUTOR_TYPE,
    MESSAGING_BATCH_COUNT,
    MESSAGING_DESTINATION,
    MESSAGING_MESSAGE_ID,
    MESSAGING_OPERATION_NAME,
    MESSAGING_OPERATION_TYPE,
    MESSAGING_SYSTEM,
    MESSAGING_SYSTEM_NAME,
    NODE_ID,
    RUN_TASK,
    SUBMIT_TASK,
    SUBMIT_WORKFLOW,
    TASK_ATTEMPT,
    TASK_ID,
    TASK_QUEUE,
    TASK_TYPE,
    WORKFLOW_ID,
    WORKFLOW_NAME,
    Attributes,
    Span,
    Tracer,
)

log = logging.getLogger(__name__)

SERVICE_NAME = "cortex"


class _PresetIds(RandomIdGenerator):
    """Random ids, except for the next span this thread starts inside
    `preset`: it gets the ids given (a span whose id was chosen, and kept
    in the replicated state, before it was recorded)."""

    def __init__(self) -> None:
        self._local = threading.local()

    @contextmanager
    def preset(self, context: TraceParent | None) -> Iterator[None]:
        self._local.ids = context
        try:
            yield
        finally:
            self._local.ids = None

    def _take(self) -> TraceParent | None:
        return getattr(self._local, "ids", None)

    def generate_trace_id(self) -> int:
        preset = self._take()
        return int(preset.trace_id, 16) if preset else super().generate_trace_id()

    def generate_span_id(self) -> int:
        preset = self._take()
        if preset is None:
            return super().generate_span_id()
        self._local.ids = None
        return int(preset.span_id, 16)


def _span_context(context: TraceParent) -> SpanContext:
    return SpanContext(
        int(context.trace_id, 16),
        int(context.span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(context.flags),
    )


def _parent(context: TraceParent | None) -> Any:
    """The OpenTelemetry context whose current span is `context` (an empty
    context, so a root span, for None)."""
    if context is None:
        return trace.set_span_in_context(trace.INVALID_SPAN)
    return trace.set_span_in_context(trace.NonRecordingSpan(_span_context(context)))


def _traceparent(span: trace.Span) -> TraceParent:
    context = span.get_span_context()
    return TraceParent(
        format(context.trace_id, "032x"), format(context.span_id, "016x"), int(context.trace_flags)
    )


class _RecordedSpan(Span):
    def __init__(self, span: trace.Span) -> None:
        super().__init__(_traceparent(span))
        self._span = span

    def end(self, error: str | None = None, attributes: Attributes | None = None) -> None:
        try:
            if attributes:
                self._span.set_attributes(dict(attributes))
            if error is not None:
                self._span.set_status(Status(StatusCode.ERROR, error))
            self._span.end()
        except Exception:
            log.exception("span not ended")


class OtelTracer(Tracer):
    enabled = True

    def __init__(self, provider: TracerProvider, ids: _PresetIds, node_id: str) -> None:
        self._provider = provider
        self._ids = ids
        self._tracer = provider.get_tracer("cortex")
        self._node_id = node_id

    def _messaging(self, operation_type: str, operation: str) -> dict[str, Any]:
        return {
            MESSAGING_SYSTEM: MESSAGING_SYSTEM_NAME,
            MESSAGING_OPERATION_TYPE: operation_type,
            MESSAGING_OPERATION_NAME: operation,
            MESSAGING_DESTINATION: TASK_QUEUE,
            NODE_ID: self._node_id,
        }

    def _produce(self, name: str, incoming: TraceParent | None, attributes: Attributes) -> Span:
        try:
            span = self._tracer.start_span(
                name,
                _parent(incoming),
                SpanKind.PRODUCER,
                {**self._messaging("send", "submit"), **attributes},
            )
        except Exception:
            log.exception("%s span not started", name)
            return Span(incoming or TraceParent.new())
        return _RecordedSpan(span)

    def submit_task(self, incoming: TraceParent | None, task_id: str, task_type: str) -> Span:
        return self._produce(
            SUBMIT_TASK,
            incoming,
            {MESSAGING_MESSAGE_ID: task_id, TASK_ID: task_id, TASK_TYPE: task_type},
        )

    def submit_workflow(
        self, incoming: TraceParent | None, workflow_id: str, name: str, tasks: int
    ) -> Span:
        return self._produce(
            SUBMIT_WORKFLOW,
            incoming,
            {
                MESSAGING_MESSAGE_ID: workflow_id,
                MESSAGING_BATCH_COUNT: tasks,
                WORKFLOW_ID: workflow_id,
                WORKFLOW_NAME: name,
            },
        )

    def attempt(self, stored: str | None, task_id: str, attempt: int, executor: str) -> Span:
        task_context = TraceParent.parse(stored)
        try:
            span = self._tracer.start_span(
                RUN_TASK,
                _parent(task_context),
                SpanKind.CONSUMER,
                {
                    **self._messaging("process", "run"),
                    MESSAGING_MESSAGE_ID: task_id,
                    TASK_ID: task_id,
                    TASK_ATTEMPT: attempt,
                    EXECUTOR_TYPE: executor,
                },
                links=[Link(_span_context(task_context))] if task_context else (),
            )
        except Exception:
            log.exception("attempt span not started")
            return Span(task_context)
        return _RecordedSpan(span)

    def record(
        self,
        name: str,
        parent: str | None,
        start_ns: int,
        end_ns: int,
        attributes: Attributes,
        error: str | None = None,
        context: str | None = None,
    ) -> None:
        parent_context = TraceParent.parse(parent)
        own = TraceParent.parse(context)
        if own is not None and parent_context is not None:
            if own.trace_id != parent_context.trace_id:
                own = None  # not its child: recorded with ids of its own
        try:
            with self._ids.preset(own):
                span = self._tracer.start_span(
                    name,
                    _parent(parent_context),
                    SpanKind.INTERNAL,
                    {NODE_ID: self._node_id, **attributes},
                    start_time=start_ns,
                )
            if error is not None:
                span.set_status(Status(StatusCode.ERROR, error))
            span.end(end_time=max(end_ns, start_ns))
        except Exception:
            log.exception("span %s not recorded", name)

    def shutdown(self) -> None:
        try:
            self._provider.shutdown()
        except Exception:
            log.exception("spans not all sent at shutdown")


def span_record(span: ReadableSpan) -> dict[str, Any]:
    """A finished span as one JSON object (the file exporter's lines)."""
    context = span.context
    parent = span.parent
    return {
        "name": span.name,
        "trace_id": format(context.trace_id, "032x") if context else None,
        "span_id": format(context.span_id, "016x") if context else None,
        "parent_span_id": format(parent.span_id, "016x") if parent else None,
        "kind": span.kind.name,
        "start_time_unix_nano": span.start_time,
        "end_time_unix_nano": span.end_time,
        "status": {"code": span.status.status_code.name, "description": span.status.description},
        "attributes": dict(span.attributes or {}),
        "links": [
            {
                "trace_id": format(link.context.trace_id, "032x"),
                "span_id": format(link.context.span_id, "016x"),
                "attributes": dict(link.attributes or {}),
            }
            for link in span.links
        ],
        "resource": dict(span.resource.attributes),
    }


class JsonLinesExporter(SpanExporter):
    """Appends each span to a file as one line of JSON, so tests and tools
    can read every node's spans without a collector."""

    def __init__(self, path: str) -> None:
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        text = "".join(json.dumps(span_record(s), default=str) + "\n" for s in spans)
        try:
            with self._lock:
                self._file.write(text)
                self._file.flush()
        except (OSError, ValueError) as err:
            log.warning("spans not written: %s", err)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            self._file.close()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _otlp_exporter(url: str | None) -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=url) if url else OTLPSpanExporter()


def create_tracer(setting: ExporterSetting, node_id: str) -> OtelTracer:
    """A tracer sending to the exporter `setting` names: a file gets each
    span as it ends, a collector batches. Raises ImportError without the
    OTLP exporter, OSError when the file cannot be opened."""
    ids = _PresetIds()
    resource = Resource.create(
        {
            "service.name": SERVICE_NAME,
            "service.instance.id": node_id,
            "host.name": socket.gethostname(),
        }
    )
    provider = TracerProvider(resource=resource, id_generator=ids)
    if setting.kind == "file":
        assert setting.target is not None
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(setting.target)))
    else:
        provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(setting.target)))
    return OtelTracer(provider, ids, node_id)

"""Runs a task as a Kubernetes Job, through the official `kubernetes` client
(the optional extra `cortex-engine[k8s]`; imported only when used).

Each attempt is one Job named after the task and attempt
(`cortex-<task id>-<attempt>`, labelled `cortex.task` and `cortex.attempt`)
with one container and no restarts beyond `backoffLimit`. The log of its pods
(oldest first) is followed into the attempt's output; the Job's status gives
the result, the exit code coming from the pod's terminated container. A
cancel or timeout deletes the Job and its pods. The Job outlives the node
process, so a node that restarted reattaches to it (`recover`).

This module holds the options, the Job's name and manifest and the
executor; the calls to the API and the log follower are in
`cortex.executors.k8s_api`."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cortex.executors.base import Execution, ExecutionResult, ExecutorSettings, TailBuffer
from cortex.executors.k8s_api import (
    CONTAINER_NAME,
    REQUEST_TIMEOUT,
    Apis,
    LogFollower,
    api_error,
    api_message,
    connect,
    delete_job,
    describe_error,
    flag_is_set,
    job_termination,
    read_job_for_recovery,
    wait_for_job,
)
from cortex.executors.process import command_argv
from cortex.spec import describe_validation_error

log = logging.getLogger(__name__)

TASK_LABEL = "cortex.task"
ATTEMPT_LABEL = "cortex.attempt"
TASK_ID_ANNOTATION = "cortex.task-id"
# Variables of the attempt that name paths on the node: meaningless in a pod.
_NODE_ONLY_VARIABLES = frozenset({"CORTEX_CONTEXT_FILE"})
# (connect, read) seconds of the fingerprint's version call: well inside
# its budget of 2 s.
_VERSION_TIMEOUT = (0.7, 0.7)
# How long the log may lag behind the Job's end before it is cut.
_DRAIN_S = 10.0
# Finished Jobs are removed by Kubernetes after this (node config
# `k8s.ttl_seconds_after_finished`), long enough for a restarted node to
# find the Job it was following.
DEFAULT_FINISHED_TTL_S = 86_400

_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_DNS_UNSAFE = re.compile(r"[^a-z0-9-]+")
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _whole_number(value: Any) -> Any:
    # JSON (and protobuf's Struct) has one number type: 2.0 is 2.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class K8sResources(BaseModel):
    """CPU and memory of the Job's container, as Kubernetes quantities
    (`"500m"`, `"128Mi"`); each is both its request and its limit."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    cpu: str | None = Field(None, strict=True)
    memory: str | None = Field(None, strict=True)

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str | None) -> str | None:
        if value is not None and not _QUANTITY.match(value):
            raise ValueError(f"{value!r} is not a Kubernetes quantity such as 500m or 128Mi")
        return value


class K8sJobOptions(BaseModel):
    """Options of the `k8s_job` executor. The command (argv list, or a string
    run with /bin/sh -c) and the environment are the spec's own `command`
    and `env`; without a command the image's entrypoint runs."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    image: str = Field(min_length=1, max_length=1024, strict=True)
    namespace: str | None = Field(None, max_length=63, strict=True)
    resources: K8sResources | None = None
    service_account: str | None = Field(None, alias="serviceAccount", max_length=253, strict=True)
    backoff_limit: int = Field(0, alias="backoffLimit", ge=0, le=100, strict=True)
    active_deadline_seconds: int | None = Field(
        None, alias="activeDeadlineSeconds", gt=0, strict=True
    )

    @field_validator("image")
    @classmethod
    def _image_reference(cls, value: str) -> str:
        if any(ch.isspace() or ch == "\x00" for ch in value):
            raise ValueError("not an image reference (no spaces)")
        return value

    @field_validator("namespace")
    @classmethod
    def _namespace_name(cls, value: str | None) -> str | None:
        if value is not None and not _DNS_LABEL.match(value):
            raise ValueError(f"{value!r} is not a namespace name (lowercase RFC 1123 label)")
        return value

    @field_validator("service_account")
    @classmethod
    def _account_name(cls, value: str | None) -> str | None:
        if value is not None and not _DNS_SUBDOMAIN.match(value):
            raise ValueError(f"{value!r} is not a service account name")
        return value

    @field_validator("backoff_limit", "active_deadline_seconds", mode="before")
    @classmethod
    def _integral(cls, value: Any) -> Any:
        return _whole_number(value)


# -- names and the Job's manifest ----------------------------------------------


def _task_slug(task_id: str) -> str:
    """The task id as a DNS label part: lowercased, other characters made
    '-'; when that changed or cut it, a digest of the id keeps it unique."""
    slug = _DNS_UNSAFE.sub("-", task_id.lower()).strip("-")
    if slug == task_id and 0 < len(slug) <= 49:
        return slug
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:8]
    return f"{slug[:40].strip('-')}-{digest}".lstrip("-")


def job_name(task_id: str, attempt: int) -> str:
    """The Job of one attempt: `cortex-<task id>-<attempt>`, at most 63 characters."""
    return f"cortex-{_task_slug(task_id)}-{attempt}"


def task_label(task_id: str) -> str:
    """The `cortex.task` label value: the id itself when a label can hold it."""
    if len(task_id) <= 63 and _LABEL_VALUE.match(task_id):
        return task_id
    return _task_slug(task_id)


def job_manifest(
    execution: Execution,
    options: K8sJobOptions,
    namespace: str,
    finished_ttl_s: int = DEFAULT_FINISHED_TTL_S,
) -> Any:
    """The batch/v1 Job (a `kubernetes.client.V1Job`) of this attempt."""
    from kubernetes import client

    spec = execution.spec
    labels = {
        TASK_LABEL: task_label(execution.task_id),
        ATTEMPT_LABEL: str(execution.attempt),
        "app.kubernetes.io/managed-by": "cortex",
    }
    env = {**spec.env}
    env.update((k, v) for k, v in execution.env.items() if k not in _NODE_ONLY_VARIABLES)
    resources = None
    if options.resources is not None:
        amounts = {
            kind: amount
            for kind, amount in (
                ("cpu", options.resources.cpu),
                ("memory", options.resources.memory),
            )
            if amount
        }
        resources = client.V1ResourceRequirements(requests=amounts, limits=dict(amounts))
    container = client.V1Container(
        name=CONTAINER_NAME,
        image=options.image,
        command=command_argv(spec.command) if spec.command is not None else None,
        env=[client.V1EnvVar(name=name, value=value) for name, value in env.items()] or None,
        working_dir=spec.cwd,
        resources=resources,
    )
    pod = client.V1PodSpec(
        containers=[container],
        restart_policy="Never",
        service_account_name=options.service_account,
        # Deleting a pod sends SIGTERM, then SIGKILL after this grace.
        termination_grace_period_seconds=max(0, math.ceil(execution.kill_grace_s)),
    )
    return client.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=client.V1ObjectMeta(
            name=job_name(execution.task_id, execution.attempt),
            namespace=namespace,
            labels=labels,
            annotations={TASK_ID_ANNOTATION: execution.task_id},
        ),
        spec=client.V1JobSpec(
            backoff_limit=options.backoff_limit,
            active_deadline_seconds=options.active_deadline_seconds,
            ttl_seconds_after_finished=finished_ttl_s,
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels), spec=pod
            ),
        ),
    )


def _stdout_writer(execution: Execution, files: contextlib.ExitStack) -> Callable[[bytes], None]:
    """Where the pod's log goes: the attempt's output sink, else a `stdout`
    file in its work dir. (A pod's log mixes its stdout and stderr.)"""
    sink = execution.output
    if sink is not None:
        return lambda data: sink.write("stdout", data)
    os.makedirs(execution.work_dir, exist_ok=True)
    out = files.enter_context(open(os.path.join(execution.work_dir, "stdout"), "ab"))

    def write(data: bytes) -> None:
        out.write(data)
        out.flush()

    return write


# -- the executor --------------------------------------------------------------


class K8sJobExecutor:
    name = "k8s_job"
    # The attempt's output log (the node keeps it for attempts with a work dir).
    uses_work_dir = True
    options_model = K8sJobOptions

    def __init__(self, settings: ExecutorSettings) -> None:
        self._config = dict(settings.k8s)
        ttl = self._config.get("ttl_seconds_after_finished", DEFAULT_FINISHED_TTL_S)
        try:
            self._finished_ttl_s = max(0, int(ttl))
        except (TypeError, ValueError):
            log.warning("k8s.ttl_seconds_after_finished %r is not a whole number; using %d",
                        ttl, DEFAULT_FINISHED_TTL_S)  # fmt: skip
            self._finished_ttl_s = DEFAULT_FINISHED_TTL_S
        self._lock = threading.Lock()
        self._apis: Apis | None = None

    @property
    def default_namespace(self) -> str:
        return str(self._config.get("namespace") or "default")

    def _connected(self) -> Apis:
        with self._lock:
            if self._apis is None:
                self._apis = connect(self._config)
            return self._apis

    def fingerprint(self) -> dict[str, str] | None:
        """The API server and default namespace, once the server answered a
        version call (bounded to under 2 s); None without the `kubernetes`
        package, a configured cluster, or an answer."""
        if not (self._config.get("kubeconfig") or flag_is_set(self._config.get("in_cluster"))):
            return None
        try:
            apis = self._connected()
            version = apis.version.get_code(_request_timeout=_VERSION_TIMEOUT)
        except Exception as err:
            log.info("k8s_job: no usable Kubernetes API: %s", describe_error(err))
            return None
        return {
            "k8s_job.server": apis.host,
            "k8s_job.namespace": self.default_namespace,
            "k8s_job.version": str(version.git_version),
        }

    def run(self, execution: Execution, cancel: threading.Event) -> ExecutionResult:
        try:
            options = K8sJobOptions.model_validate(execution.spec.options)
        except ValidationError as err:
            problems = describe_validation_error(err, "spec.options.")
            return ExecutionResult(-1, error=f"invalid spec: {problems}", permanent=True)
        try:
            apis = self._connected()
        except Exception as err:
            return ExecutionResult(
                -1, error=f"no usable Kubernetes cluster here: {describe_error(err)}"
            )
        namespace = options.namespace or self.default_namespace
        name = job_name(execution.task_id, execution.attempt)
        started = time.time()
        manifest = job_manifest(execution, options, namespace, self._finished_ttl_s)
        refused = self._create(apis, namespace, name, manifest)
        if refused is not None:
            return refused
        try:
            execution.save_handle({"namespace": namespace, "name": name, "startedAt": started})
        except OSError as err:
            # The Job runs on, followed; only a restart of this node loses it.
            log.warning("task %s attempt %d: cannot save its handle: %s",
                        execution.task_id, execution.attempt, err)  # fmt: skip
        log.info("task %s attempt %d: Kubernetes Job %s/%s created",
                 execution.task_id, execution.attempt, namespace, name)  # fmt: skip
        return self._watch(apis, execution, namespace, name, cancel, started, skip=0)

    def recover(
        self, execution: Execution, handle: dict[str, Any], cancel: threading.Event
    ) -> ExecutionResult:
        namespace, name = handle.get("namespace"), handle.get("name")
        if not (isinstance(namespace, str) and isinstance(name, str)):
            raise LookupError("the attempt's handle names no Kubernetes Job")
        try:
            apis = self._connected()
        except Exception as err:
            raise LookupError(f"no usable Kubernetes cluster here: {describe_error(err)}") from err
        job = read_job_for_recovery(apis, namespace, name)
        labels = (job.metadata and job.metadata.labels) or {}
        ours = {TASK_LABEL: task_label(execution.task_id), ATTEMPT_LABEL: str(execution.attempt)}
        if any(labels.get(key) != value for key, value in ours.items()):
            raise LookupError(f"Job {namespace}/{name} is not this attempt's")
        started = handle.get("startedAt")
        if not isinstance(started, int | float):
            created = job.metadata.creation_timestamp
            started = created.timestamp() if created is not None else time.time()
        skip = int(execution.output_offsets.get("stdout", 0))
        log.info("task %s attempt %d: following Kubernetes Job %s/%s again",
                 execution.task_id, execution.attempt, namespace, name)  # fmt: skip
        return self._watch(apis, execution, namespace, name, cancel, float(started), skip)

    # -- steps -----------------------------------------------------------------

    def _create(
        self, apis: Apis, namespace: str, name: str, manifest: Any
    ) -> ExecutionResult | None:
        """Creates the Job; a result when that failed. A Job the API refuses
        (a 4xx other than a conflict, throttling or auth) fails permanently."""
        try:
            apis.batch.create_namespaced_job(namespace, manifest, _request_timeout=REQUEST_TIMEOUT)
        except api_error() as err:
            status = getattr(err, "status", None)
            if status == 409:
                # This attempt's own Job, created by an earlier run of this node.
                log.info("Job %s/%s exists already; following it", namespace, name)
                return None
            permanent = status in (400, 404, 422)
            return ExecutionResult(
                -1,
                error=f"Kubernetes refused Job {namespace}/{name}: {api_message(err)}",
                permanent=permanent,
            )
        except Exception as err:
            # The request may have got through: no Job may run unwatched.
            delete_job(apis, namespace, name)
            return ExecutionResult(
                -1,
                error=f"creating Job {namespace}/{name} at {apis.host} failed: {describe_error(err)}",
            )
        return None

    def _watch(
        self,
        apis: Apis,
        execution: Execution,
        namespace: str,
        name: str,
        cancel: threading.Event,
        started: float,
        skip: int,
    ) -> ExecutionResult:
        """Follows the Job's log and status to its end (or deletes it on
        cancel or timeout) and maps that to the attempt's result."""
        timeout_ms = execution.spec.timeout_ms
        # Wall clock: a recovered attempt's start was taken by an earlier process.
        deadline = started + timeout_ms / 1000 if timeout_ms else None
        tail = TailBuffer(execution.tail_bytes)
        with contextlib.ExitStack() as files:
            write = _stdout_writer(execution, files)
            follower = LogFollower(apis.core, namespace, name, write, tail, skip)
            follower.start()
            try:
                end = wait_for_job(apis, namespace, name, cancel, deadline)
            except BaseException:
                follower.stop()
                raise
            if end.how in ("complete", "failed"):
                follower.finish(_DRAIN_S)
            else:
                if end.how != "gone":
                    delete_job(apis, namespace, name)
                follower.stop()

        def result(exit_code: int, **fields: Any) -> ExecutionResult:
            return ExecutionResult(
                exit_code, stdout=tail.value(), stdout_truncated=tail.truncated, **fields
            )

        where = f"Job {namespace}/{name}"
        if end.how == "complete":
            return result(0)
        if end.how == "cancelled":
            return result(-1, cancelled=True)
        if end.how == "timed_out":
            return result(
                -1, timed_out=True, error=f"timed out after {execution.spec.timeout_ms} ms"
            )
        if end.how == "gone":
            return result(-1, error=f"{where} was deleted before it ended")
        code, container_reason = job_termination(apis, namespace, name)
        detail = end.detail or "no reason given"
        if container_reason and container_reason not in ("Error", "Completed"):
            detail += f"; container {container_reason}"
        return result(code, error=f"exit code {code}: {where} failed ({detail})")

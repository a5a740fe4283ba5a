"""The Kubernetes API as the `k8s_job` executor uses it, through the official
`kubernetes` client (imported only when used): a client for the cluster the
node config names, a Job's pods and how its container ended, deleting a Job,
waiting for its end, and following its pods' log (oldest first) into the
attempt's output. Each call is bounded in time and fails at once; the loops
here retry."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from cortex.executors.base import TailBuffer

log = logging.getLogger(__name__)

# The one container of a Job's pod, as the Job's manifest names it.
CONTAINER_NAME = "task"
# (connect, read) seconds for one API call.
REQUEST_TIMEOUT = (5.0, 30.0)
# A log stream quiet this long is reopened (what was read is skipped).
_LOG_TIMEOUT = (5.0, 300.0)
_POLL_MIN_S = 0.1
_POLL_MAX_S = 1.0
_RETRY_S = 0.2
# How long a recovery keeps trying an API it cannot reach.
_RECOVER_S = 10.0
_CHUNK = 65_536


# -- connecting ----------------------------------------------------------------


@dataclass(frozen=True)
class Apis:
    """The client's API objects (`kubernetes.client` types, untyped here so
    that this module imports without the package)."""

    batch: Any
    core: Any
    version: Any
    host: str


def flag_is_set(value: Any) -> bool:
    """A config flag: true, or "true"/"yes"/"1" as the environment gives it."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1")
    return value is True


def connect(config: dict[str, Any]) -> Apis:
    """A client for the cluster the node config's `k8s` table names: a
    kubeconfig (and context), or the pod's own service account."""
    try:
        from kubernetes import client
        from kubernetes import config as kube_config
    except ImportError as err:
        raise RuntimeError(
            "the kubernetes package is not installed (pip install 'cortex-engine[k8s]')"
        ) from err
    configuration = client.Configuration()
    if flag_is_set(config.get("in_cluster")):
        kube_config.load_incluster_config(client_configuration=configuration)
    elif config.get("kubeconfig"):
        kube_config.load_kube_config(
            config_file=os.path.expanduser(str(config["kubeconfig"])),
            context=str(config["context"]) if config.get("context") else None,
            client_configuration=configuration,
            persist_config=False,
        )
    else:
        raise RuntimeError("no cluster configured (k8s.kubeconfig or k8s.in_cluster)")
    # Each call fails at once (its time bounded); the loops here retry.
    configuration.retries = 0
    api_client = client.ApiClient(configuration)
    return Apis(
        batch=client.BatchV1Api(api_client),
        core=client.CoreV1Api(api_client),
        version=client.VersionApi(api_client),
        host=str(configuration.host),
    )


def api_error() -> type[Exception]:
    """The client's `ApiException`, the error of a call the API answered."""
    from kubernetes.client.exceptions import ApiException

    return ApiException


def api_message(err: Any) -> str:
    """The API's own message from an ApiException, else its status line."""
    try:
        message = json.loads(err.body).get("message")
    except (TypeError, ValueError, AttributeError):
        message = None
    return str(message) if message else f"{err.status} {err.reason}"


def describe_error(err: BaseException) -> str:
    """The error's type and message on one line."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


# -- the Job and its pods ------------------------------------------------------


@dataclass(frozen=True)
class JobEnd:
    """How following a Job ended (`detail`: a failed Job's reason)."""

    how: Literal["complete", "failed", "cancelled", "timed_out", "gone"]
    detail: str = ""


def _job_end(job: Any) -> JobEnd | None:
    """Complete or failed (with the reason), by the Job's conditions; None while it runs."""
    for condition in (job.status and job.status.conditions) or []:
        if condition.status != "True":
            continue
        if condition.type == "Complete":
            return JobEnd("complete")
        if condition.type == "Failed":
            return JobEnd("failed", ": ".join(filter(None, [condition.reason, condition.message])))
    return None


def _job_pods(core: Any, namespace: str, name: str) -> list[Any]:
    """The Job's pods, oldest first."""
    pods = core.list_namespaced_pod(
        namespace, label_selector=f"job-name={name}", _request_timeout=REQUEST_TIMEOUT
    ).items

    def created(pod: Any) -> tuple[float, str]:
        stamp = pod.metadata.creation_timestamp
        return (stamp.timestamp() if stamp is not None else 0.0, pod.metadata.name)

    return sorted(pods, key=created)


def _container_state(pod: Any) -> Any:
    for status in (pod.status and pod.status.container_statuses) or []:
        if status.name == CONTAINER_NAME:
            return status.state
    return None


def _pod_ended(pod: Any) -> bool:
    state = _container_state(pod)
    return bool(
        (pod.status and pod.status.phase in ("Succeeded", "Failed"))
        or (state is not None and state.terminated is not None)
    )


def delete_job(apis: Apis, namespace: str, name: str) -> None:
    """Deletes the Job with its pods (propagation Background), a few tries."""
    for attempt in range(3):
        try:
            apis.batch.delete_namespaced_job(
                name,
                namespace,
                propagation_policy="Background",
                _request_timeout=REQUEST_TIMEOUT,
            )
            return
        except api_error() as err:
            if getattr(err, "status", None) == 404:
                return
            problem = api_message(err)
        except Exception as err:
            problem = describe_error(err)
        log.warning("deleting Job %s/%s failed (try %d): %s", namespace, name, attempt + 1, problem)
        time.sleep(_RETRY_S * (attempt + 1))


def read_job_for_recovery(apis: Apis, namespace: str, name: str) -> Any:
    """The Job, trying for a while an API it cannot reach; LookupError when
    the Job is gone or the API never answered."""
    deadline = time.monotonic() + _RECOVER_S
    while True:
        try:
            return apis.batch.read_namespaced_job(name, namespace, _request_timeout=REQUEST_TIMEOUT)
        except api_error() as err:
            if getattr(err, "status", None) == 404:
                raise LookupError(f"Job {namespace}/{name} no longer exists") from None
            problem = api_message(err)
        except Exception as err:
            problem = describe_error(err)
        if time.monotonic() >= deadline:
            raise LookupError(f"cannot read Job {namespace}/{name}: {problem}")
        time.sleep(_RETRY_S)


def wait_for_job(
    apis: Apis, namespace: str, name: str, cancel: threading.Event, deadline: float | None
) -> JobEnd:
    """Polls the Job (less often while it runs on) until it ends, is gone,
    `cancel` is set or the wall clock reaches `deadline`."""
    interval = _POLL_MIN_S
    while True:
        if cancel.is_set():
            return JobEnd("cancelled")
        if deadline is not None and time.time() >= deadline:
            return JobEnd("timed_out")
        try:
            job = apis.batch.read_namespaced_job(name, namespace, _request_timeout=REQUEST_TIMEOUT)
        except api_error() as err:
            if getattr(err, "status", None) == 404:
                return JobEnd("gone")
            log.warning("reading Job %s/%s failed: %s", namespace, name, api_message(err))
        except Exception as err:
            log.warning("reading Job %s/%s failed: %s", namespace, name, describe_error(err))
        else:
            end = _job_end(job)
            if end is not None:
                return end
        wait = interval if deadline is None else min(interval, deadline - time.time())
        cancel.wait(max(0.0, wait))
        interval = min(interval * 2, _POLL_MAX_S)


def job_termination(apis: Apis, namespace: str, name: str) -> tuple[int, str | None]:
    """The failed Job's exit code (of its last pod's container; 1 when
    none is known) and that container's reason (`OOMKilled` ...)."""
    try:
        pods = _job_pods(apis.core, namespace, name)
    except Exception as err:
        log.warning("Job %s/%s: listing its pods failed: %s", namespace, name, describe_error(err))
        return 1, None
    for pod in reversed(pods):
        state = _container_state(pod)
        terminated = state.terminated if state is not None else None
        if terminated is not None:
            return (terminated.exit_code or 1), terminated.reason
    return 1, None


# -- following the log ---------------------------------------------------------


def _chunks(response: Any) -> Iterator[bytes]:
    """A streamed response's body as it arrives."""
    if getattr(response, "chunked", False) or not hasattr(response, "read1"):
        yield from response.stream(_CHUNK)
        return
    while chunk := response.read1(_CHUNK):
        yield chunk


class LogFollower:
    """Copies the log of a Job's pods, oldest pod first, to the attempt's
    output as it arrives, keeping the tail. The first `skip` bytes of it
    (already in the output before a restart) go to the tail only. A stream
    that broke is reopened, skipping what was read of that pod."""

    def __init__(
        self,
        core: Any,
        namespace: str,
        job: str,
        write: Callable[[bytes], None],
        tail: TailBuffer,
        skip: int,
    ) -> None:
        self._core, self._namespace, self._job = core, namespace, job
        self._write, self._tail, self._skip = write, tail, skip
        self._position = 0
        self._read: dict[str, int] = {}
        self._done: set[str] = set()
        self._write_failed = False
        self._stopping = threading.Event()
        self._job_over = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"log-{job}"[:40], daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self, timeout_s: float) -> None:
        """The Job has ended: reads its pods' logs to their end, for up to `timeout_s`."""
        self._job_over.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.warning("Job %s: its log did not end within %.0f s; cut", self._job, timeout_s)
            self.stop()

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            response = self._response
        if response is not None:
            # Unblocks the read in the follower's thread.
            close = getattr(response, "shutdown", None) or response.close
            with contextlib.suppress(Exception):
                close()
        self._thread.join(5)

    def _run(self) -> None:
        # Waits between tries grow while nothing changes (a pod pulling its
        # image), so that a waiting Job costs the API little.
        idle = _RETRY_S
        while not self._stopping.is_set():
            # Read before listing: once the Job is over, every pod it had is listed.
            over = self._job_over.is_set()
            try:
                pods = _job_pods(self._core, self._namespace, self._job)
            except Exception as err:
                log.debug("Job %s: listing its pods failed: %s", self._job, describe_error(err))
                pods = None
            pending = [pod for pod in pods or [] if pod.metadata.name not in self._done]
            if pods is not None and not pending and over:
                return
            position = self._position
            if pending and self._follow(pending[0], over):
                idle = _RETRY_S
                continue
            if self._position != position:
                idle = _RETRY_S
            self._stopping.wait(idle)
            idle = min(idle * 2, _POLL_MAX_S)

    def _follow(self, pod: Any, job_over: bool) -> bool:
        """Reads one pod's log; True once it is read to the end (or the pod
        is gone, or never started before the Job ended)."""
        name = pod.metadata.name
        state = _container_state(pod)
        if not _pod_ended(pod) and (state is None or state.running is None):
            if job_over:
                self._done.add(name)
            return job_over
        try:
            response = self._core.read_namespaced_pod_log(
                name,
                self._namespace,
                container=CONTAINER_NAME,
                follow=True,
                _preload_content=False,
                _request_timeout=_LOG_TIMEOUT,
            )
        except api_error() as err:
            if getattr(err, "status", None) == 404:
                self._done.add(name)
                return True
            # 400: the container is not running yet.
            log.debug("Job %s: reading the log of %s: %s", self._job, name, api_message(err))
            return False
        except Exception as err:
            log.debug("Job %s: reading the log of %s: %s", self._job, name, describe_error(err))
            return False
        with self._lock:
            self._response = response
        try:
            if self._stopping.is_set():
                return False
            self._copy(name, response)
        except Exception as err:
            # A broken stream (or `stop`): reopened unless stopping.
            log.debug("Job %s: the log of %s broke off: %s", self._job, name, describe_error(err))
            return False
        finally:
            with self._lock:
                self._response = None
            with contextlib.suppress(Exception):
                response.release_conn()
        # A follow stream ends cleanly when the container has ended.
        try:
            current = self._core.read_namespaced_pod(
                name, self._namespace, _request_timeout=REQUEST_TIMEOUT
            )
        except api_error() as err:
            if getattr(err, "status", None) != 404:
                return False
            current = None
        except Exception:
            return False
        if current is None or _pod_ended(current):
            self._done.add(name)
            return True
        return False

    def _copy(self, pod: str, response: Any) -> None:
        seen = 0
        for chunk in _chunks(response):
            start, seen = seen, seen + len(chunk)
            known = self._read.get(pod, 0)
            if seen <= known:
                continue
            self._read[pod] = seen
            self._emit(chunk[max(0, known - start) :])

    def _emit(self, data: bytes) -> None:
        self._tail.write(data)
        fresh = data[max(0, self._skip - self._position) :]
        self._position += len(data)
        if fresh and not self._write_failed:
            try:
                self._write(fresh)
            except Exception:
                log.exception("Job %s: writing its output failed; keeping only its tail", self._job)
                self._write_failed = True

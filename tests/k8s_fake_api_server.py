"""A fake Kubernetes API server for tests: no real one exists on these
machines. It serves, over plain HTTP on 127.0.0.1, just the endpoints the
official `kubernetes` client calls to run a Job (version; create, read and
delete batch/v1 Jobs; list pods by label selector; read a pod and its log,
following it as a chunked stream), keeps its objects in memory, and records
every request so a test can check what was sent.

What a Job's pod does is scripted by the test (`PodScript`): what it prints,
when (an item may be an event the pod waits for), and how it ends: an exit
code, or running until its Job is deleted. A Job deleted with propagation
`Background` or `Foreground` takes its pods along; without one (the API's
default for Jobs: orphan) the pods are left behind, as on a real cluster."""

from __future__ import annotations

import json
import queue
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "fake-api-server-token"
GIT_VERSION = "v1.30.0-fake"


@dataclass
class PodScript:
    """What the pod of a Job prints and how it ends. `output` items are
    printed in order; an Event item makes the pod wait for it first.
    `exit_code` None: the pod runs until its Job is deleted. `start`, when
    given, keeps the container waiting (ContainerCreating) until it is set."""

    output: list[bytes | threading.Event] = field(default_factory=list)
    exit_code: int | None = 0
    reason: str | None = None
    start: threading.Event | None = None


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    authorization: str | None


@dataclass
class _Pod:
    namespace: str
    name: str
    job: str
    manifest: dict[str, Any]
    script: PodScript
    log: bytearray = field(default_factory=bytearray)
    started: bool = False
    exit_code: int | None = None
    deleted: bool = False

    @property
    def over(self) -> bool:
        return self.deleted or self.exit_code is not None


@dataclass
class _Job:
    manifest: dict[str, Any]
    failures: int = 0
    pods: list[_Pod] = field(default_factory=list)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure" if code >= 400 else "Success",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key.strip()) != value.strip():
            return False
    return True


def _parse_bool(value: str) -> bool:
    """A query flag as the API server (Go's strconv.ParseBool) reads it:
    older clients send `True`, newer ones `true`."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class FakeKubernetesApiServer:
    """In-memory Jobs and pods behind the Kubernetes REST paths. Scripts
    queued with `script_pods` are taken by pods in creation order; a pod
    with none queued prints nothing and exits 0."""

    def __init__(self, namespaces: tuple[str, ...] = ("default",)) -> None:
        self.namespaces = set(namespaces)
        self.changed = threading.Condition()
        self.jobs: dict[tuple[str, str], _Job] = {}
        self.orphans: list[_Pod] = []
        self._scripts: queue.SimpleQueue[PodScript] = queue.SimpleQueue()
        self._requests: list[RecordedRequest] = []
        self._closing = False
        self._pod_count = 0
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # -- lifecycle ------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeKubernetesApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self.changed:
            self._closing = True
            self.changed.notify_all()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        """A kubeconfig (context `fake`) pointing the client at this server."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": TOKEN}}],
            "contexts": [
                {
                    "name": "fake",
                    "context": {"cluster": "fake", "user": "fake", "namespace": namespace},
                }
            ],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config))
        return path

    # -- what tests script and inspect ----------------------------------------

    def script_pods(self, *scripts: PodScript) -> None:
        for script in scripts:
            self._scripts.put(script)

    def requests(self, method: str | None = None, path_part: str = "") -> list[RecordedRequest]:
        with self.changed:
            return [
                r
                for r in self._requests
                if (method is None or r.method == method) and path_part in r.path
            ]

    def created_jobs(self) -> list[dict[str, Any]]:
        """The bodies of the Jobs created, as the client sent them."""
        return [r.body for r in self.requests("POST", "/jobs")]

    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self.changed:
            job = self.jobs.get((namespace, name))
            return json.loads(json.dumps(job.manifest)) if job else None

    def running_pods(self) -> list[str]:
        """Names of the pods whose container has not ended and that were not deleted."""
        with self.changed:
            return [p.name for p in self._all_pods() if not p.over]

    def delete_job_now(self, namespace: str, name: str) -> None:
        """Deletes a Job and its pods as someone else (kubectl) would."""
        with self.changed:
            job = self.jobs.pop((namespace, name))
            for pod in job.pods:
                pod.deleted = True
            self.changed.notify_all()

    def wait(self, predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
        """Waits until `predicate` (called under the server's lock) holds."""
        with self.changed:
            return self.changed.wait_for(predicate, timeout)

    # -- the cluster's behaviour -----------------------------------------------

    def _create_job(self, namespace: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if namespace not in self.namespaces:
            return 404, _status(404, "NotFound", f'namespaces "{namespace}" not found')
        metadata = body.get("metadata") or {}
        name = metadata.get("name", "")
        problems = []
        if not _DNS_LABEL.match(name) or len(name) > 63:
            problems.append(f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 label")
        template = ((body.get("spec") or {}).get("template") or {}).get("spec") or {}
        if template.get("restartPolicy") not in ("Never", "OnFailure"):
            problems.append(
                "spec.template.spec.restartPolicy: Required value: valid values:"
                ' "OnFailure", "Never"'
            )
        for i, container in enumerate(template.get("containers") or []):
            if not container.get("image"):
                problems.append(f"spec.template.spec.containers[{i}].image: Required value")
        if not template.get("containers"):
            problems.append("spec.template.spec.containers: Required value")
        if problems:
            message = f'Job.batch "{name}" is invalid: ' + ", ".join(problems)
            return 422, _status(422, "Invalid", message)
        with self.changed:
            if (namespace, name) in self.jobs:
                return 409, _status(409, "AlreadyExists", f'jobs.batch "{name}" already exists')
            manifest = json.loads(json.dumps(body))
            manifest.setdefault("apiVersion", "batch/v1")
            manifest.setdefault("kind", "Job")
            manifest["metadata"].update(
                namespace=namespace,
                uid=str(uuid.uuid4()),
                creationTimestamp=_now(),
                resourceVersion="1",
            )
            manifest["status"] = {"startTime": _now(), "active": 1}
            job = _Job(manifest)
            self.jobs[(namespace, name)] = job
            self._start_pod(namespace, job)
            return 201, manifest

    def _start_pod(self, namespace: str, job: _Job) -> None:
        name = job.manifest["metadata"]["name"]
        self._pod_count += 1
        pod_name = f"{name}-{self._pod_count:05d}"
        template = job.manifest["spec"]["template"]
        labels = {**(template.get("metadata") or {}).get("labels", {}), "job-name": name}
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "namespace": namespace,
                "labels": labels,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": _now(),
            },
            "spec": template["spec"],
        }
        try:
            script = self._scripts.get_nowait()
        except queue.Empty:
            script = job.pods[-1].script if job.pods else PodScript()
        pod = _Pod(namespace, pod_name, name, manifest, script)
        job.pods.append(pod)
        threading.Thread(target=self._run_pod, args=(job, pod), daemon=True).start()

    def _wait_event(self, pod: _Pod, event: threading.Event) -> bool:
        """Waits for `event`; False when the pod was deleted or the server closes first."""
        while not event.wait(0.02):
            with self.changed:
                if pod.deleted or self._closing:
                    return False
        return True

    def _run_pod(self, job: _Job, pod: _Pod) -> None:
        script = pod.script
        if script.start is not None and not self._wait_event(pod, script.start):
            return
        with self.changed:
            pod.started = True
            self.changed.notify_all()
        for item in script.output:
            if isinstance(item, threading.Event):
                if not self._wait_event(pod, item):
                    return
                continue
            with self.changed:
                if pod.deleted:
                    return
                pod.log += item
                self.changed.notify_all()
        if script.exit_code is None:
            self._wait_event(pod, threading.Event())
            return
        with self.changed:
            if pod.deleted:
                return
            pod.exit_code = script.exit_code
            self._pod_ended(job, pod)
            self.changed.notify_all()

    def _pod_ended(self, job: _Job, pod: _Pod) -> None:
        status = job.manifest["status"]
        if pod.exit_code == 0:
            status.update(
                active=0,
                succeeded=1,
                completionTime=_now(),
                conditions=[{"type": "Complete", "status": "True"}],
            )
            return
        job.failures += 1
        status["failed"] = job.failures
        if job.failures <= job.manifest["spec"].get("backoffLimit", 6):
            self._start_pod(pod.namespace, job)
            return
        status.update(
            active=0,
            conditions=[
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                }
            ],
        )

    def _delete_job(
        self, namespace: str, name: str, propagation: str | None
    ) -> tuple[int, dict[str, Any]]:
        with self.changed:
            job = self.jobs.pop((namespace, name), None)
            if job is None:
                return 404, _status(404, "NotFound", f'jobs.batch "{name}" not found')
            for pod in job.pods:
                if propagation in ("Background", "Foreground"):
                    pod.deleted = True
                else:
                    self.orphans.append(pod)
            self.changed.notify_all()
        done = _status(200, "", "")
        done["details"] = {"name": name, "group": "batch", "kind": "jobs"}
        return 200, done

    def _pod_manifest(self, pod: _Pod) -> dict[str, Any]:
        container = pod.manifest["spec"]["containers"][0]
        state: dict[str, Any]
        if pod.exit_code is not None:
            reason = pod.script.reason or ("Completed" if pod.exit_code == 0 else "Error")
            state = {
                "terminated": {"exitCode": pod.exit_code, "reason": reason, "finishedAt": _now()}
            }
            phase = "Succeeded" if pod.exit_code == 0 else "Failed"
        elif pod.started:
            state, phase = {"running": {"startedAt": _now()}}, "Running"
        else:
            state, phase = {"waiting": {"reason": "ContainerCreating"}}, "Pending"
        status = {
            "name": container["name"],
            "image": container["image"],
            "imageID": "",
            "ready": phase == "Running",
            "restartCount": 0,
            "state": state,
        }
        return {**pod.manifest, "status": {"phase": phase, "containerStatuses": [status]}}

    def _all_pods(self) -> list[_Pod]:
        """Pods of the Jobs there are, and those their deleted Jobs left behind."""
        return [pod for job in self.jobs.values() for pod in job.pods] + self.orphans

    def _find_pod(self, namespace: str, name: str) -> _Pod | None:
        for pod in self._all_pods():
            if pod.namespace == namespace and pod.name == name and not pod.deleted:
                return pod
        return None

    def _pods(self, namespace: str, selector: str) -> dict[str, Any]:
        with self.changed:
            items = [
                self._pod_manifest(pod)
                for pod in self._all_pods()
                if pod.namespace == namespace
                and not pod.deleted
                and _matches(pod.manifest["metadata"]["labels"], selector)
            ]
        return {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}

    def _log_chunks(self, pod: _Pod) -> Iterator[bytes]:
        """The pod's log as it grows, until its container ends or it is deleted."""
        sent = 0

        def news() -> bool:
            return len(pod.log) > sent or pod.over or self._closing

        while True:
            with self.changed:
                self.changed.wait_for(news, timeout=1.0)
                chunk = bytes(pod.log[sent:])
                finished = pod.over or self._closing
            if chunk:
                sent += len(chunk)
                yield chunk
            elif finished:
                return

    def _record(self, request: RecordedRequest) -> None:
        with self.changed:
            self._requests.append(request)
            self.changed.notify_all()


# What a real API server answers on /version, every field filled.
_VERSION = {
    "major": "1",
    "minor": "30",
    "gitVersion": GIT_VERSION,
    "gitCommit": "0" * 40,
    "gitTreeState": "clean",
    "buildDate": "2024-04-17T00:00:00Z",
    "goVersion": "go1.22.2",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_JOBS = re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/jobs(?:/([^/]+))?$")
_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/]+))?(/log)?$")


def _handler_class(server: FakeKubernetesApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _respond(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _handle(self) -> None:
            url = urlsplit(self.path)
            path = url.path.rstrip("/") or "/"
            query = parse_qs(url.query)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            server._record(
                RecordedRequest(self.command, path, query, body, self.headers.get("Authorization"))
            )
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self._respond(401, _status(401, "Unauthorized", "Unauthorized"))
                return
            if path == "/version" and self.command == "GET":
                self._respond(200, _VERSION)
                return
            if jobs := _JOBS.match(path):
                self._jobs(jobs.group(1), jobs.group(2), query, body)
                return
            if pods := _PODS.match(path):
                self._pods(pods.group(1), pods.group(2), bool(pods.group(3)), query)
                return
            self._respond(404, _status(404, "NotFound", f"the server could not find {path}"))

        def _jobs(
            self, namespace: str, name: str | None, query: dict[str, list[str]], body: Any
        ) -> None:
            if name is None and self.command == "POST":
                self._respond(*server._create_job(namespace, body or {}))
            elif name is not None and self.command == "GET":
                manifest = server.job(namespace, name)
                if manifest is None:
                    self._respond(404, _status(404, "NotFound", f'jobs.batch "{name}" not found'))
                else:
                    self._respond(200, manifest)
            elif name is not None and self.command == "DELETE":
                propagation: str | None = (query.get("propagationPolicy") or [""])[0] or None
                if propagation is None and isinstance(body, dict):
                    propagation = body.get("propagationPolicy")
                self._respond(*server._delete_job(namespace, name, propagation))
            else:
                self._respond(405, _status(405, "MethodNotAllowed", "method not allowed"))

        def _pods(
            self, namespace: str, name: str | None, log: bool, query: dict[str, list[str]]
        ) -> None:
            if name is None:
                selector = (query.get("labelSelector") or [""])[0]
                self._respond(200, server._pods(namespace, selector))
                return
            with server.changed:
                pod = server._find_pod(namespace, name)
                manifest = server._pod_manifest(pod) if pod else None
                waiting = pod is not None and not pod.started
            if pod is None or manifest is None:
                self._respond(404, _status(404, "NotFound", f'pods "{name}" not found'))
            elif not log:
                self._respond(200, manifest)
            elif waiting:
                message = f'container "task" in pod "{name}" is waiting to start: ContainerCreating'
                self._respond(400, _status(400, "BadRequest", message))
            elif _parse_bool((query.get("follow") or ["false"])[0]):
                self._stream_log(pod)
            else:
                with server.changed:
                    data = bytes(pod.log)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        def _stream_log(self, pod: _Pod) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for chunk in server._log_chunks(pod):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        do_GET = do_POST = do_DELETE = _handle

    return Handler

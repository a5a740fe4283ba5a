"""The `http` executor: a task that makes one HTTP request. The response
body is the task's stdout, the status line its stderr; the task succeeds
when the status is the one expected.

    cortex task submit --type http --option url=https://example.org/health
    {"type": "http", "options": {"url": "https://example.org/health", "expectStatus": 200}}

An example of an executor plugin: installed beside Cortex, it is found
through its `cortex.executors` entry point."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.client import HTTPResponse
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cortex.executors.base import Execution, ExecutionResult, ExecutorSettings, TailBuffer

__all__ = ["HttpExecutor", "HttpOptions"]

DEFAULT_TIMEOUT_S = 30.0
_CHUNK = 64 * 1024


class HttpOptions(BaseModel):
    """The options of an `http` task."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    url: str
    method: Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] = "GET"
    body: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    expect_status: int = Field(200, alias="expectStatus", ge=100, le=599, strict=True)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urllib.parse.urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        return value


class _Outcome:
    """What the request thread found: a status, or an error."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.reason = ""
        self.error: str | None = None
        self.done = threading.Event()


class HttpExecutor:
    name = "http"
    uses_work_dir = True
    options_model = HttpOptions

    def __init__(self, settings: ExecutorSettings) -> None:
        # Per-node settings (`executor_options: {http: {...}}`): a default
        # timeout for requests whose task sets none.
        self._default_timeout_s = float(
            settings.options_for(self.name).get("timeout_s", DEFAULT_TIMEOUT_S)
        )

    def fingerprint(self) -> dict[str, str] | None:
        return {"http.client": "urllib"}

    def run(self, execution: Execution, cancel: threading.Event) -> ExecutionResult:
        options = HttpOptions.model_validate(execution.spec.options)
        timeout_ms = execution.spec.timeout_ms
        timeout_s = timeout_ms / 1000 if timeout_ms else self._default_timeout_s
        stdout, stderr = TailBuffer(execution.tail_bytes), TailBuffer(execution.tail_bytes)

        def write(stream: str, tail: TailBuffer, data: bytes) -> None:
            tail.write(data)
            if execution.output is not None:
                execution.output.write(stream, data)

        outcome = _Outcome()
        request = urllib.request.Request(
            options.url,
            data=options.body.encode() if options.body is not None else None,
            headers=dict(options.headers),
            method=options.method,
        )
        # The request runs on a thread of its own, so a cancel or the timeout
        # ends the attempt at once (the socket times out behind it).
        thread = threading.Thread(
            target=_fetch,
            args=(request, timeout_s, outcome, lambda data: write("stdout", stdout, data)),
            daemon=True,
        )
        thread.start()
        deadline = time.monotonic() + timeout_s
        cancelled = timed_out = False
        while not outcome.done.wait(0.05):
            if cancel.is_set():
                cancelled = True
                break
            if time.monotonic() >= deadline:
                timed_out = True
                break
        if outcome.status is not None:
            write("stderr", stderr, f"HTTP {outcome.status} {outcome.reason}\n".encode())
        error = outcome.error
        if timed_out:
            error = f"timed out after {timeout_s:g} s"
        elif outcome.status is not None and outcome.status != options.expect_status:
            error = f"status {outcome.status}, expected {options.expect_status}"
        failed = cancelled or error is not None
        return ExecutionResult(
            exit_code=-1 if cancelled else (1 if failed else 0),
            stdout=stdout.value(),
            stderr=stderr.value(),
            stdout_truncated=stdout.truncated,
            stderr_truncated=stderr.truncated,
            timed_out=timed_out,
            cancelled=cancelled,
            error=None if cancelled else error,
        )

    def recover(
        self, execution: Execution, handle: dict[str, Any], cancel: threading.Event
    ) -> ExecutionResult:
        raise LookupError("an HTTP request does not outlive its node process")


def _fetch(
    request: urllib.request.Request,
    timeout_s: float,
    outcome: _Outcome,
    write: Callable[[bytes], None],
) -> None:
    try:
        response: HTTPResponse
        try:
            response = urllib.request.urlopen(request, timeout=timeout_s)  # noqa: S310
        except urllib.error.HTTPError as err:
            response = err  # type: ignore[assignment]  # a status the caller may expect
        with response:
            outcome.status, outcome.reason = response.status, response.reason
            while chunk := response.read(_CHUNK):
                write(chunk)
    except (urllib.error.URLError, OSError, ValueError) as err:
        outcome.error = f"request failed: {getattr(err, 'reason', err)}"
    finally:
        outcome.done.set()

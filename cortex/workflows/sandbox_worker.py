"""The condition sandbox's worker process: reads one JSON request per line on
stdin, evaluates it in a fresh mini-racer (V8) context, writes one JSON answer
per line on stdout. One request at a time: V8 contexts must not be created
from several threads of one process, and a V8 fatal error (some out-of-memory
paths abort the process) then takes only this worker down, never the node.

Run as a script (`python sandbox_worker.py`), so it imports only the standard
library and py_mini_racer."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

# Host-provided or needless globals removed before a condition runs: the
# timer shim mini-racer installs, console, and the ways to allocate memory
# outside the V8 heap that the hard memory limit does not see.
_PRELUDE = """
for (const name of ['setTimeout', 'clearTimeout', '__timer_manager', 'console',
                    'WebAssembly', 'SharedArrayBuffer', 'Atomics']) {
  delete globalThis[name];
  if (name in globalThis) globalThis[name] = undefined;  // var-declared: not deletable
}
"""
_ERROR_LINE = re.compile(r"\b([A-Z][A-Za-z]*Error): (.*)")
_MAX_MESSAGE = 300


def _message(err: BaseException) -> str:
    """The JS error's `Name: message` line, without V8's source excerpt."""
    text = str(err)
    match = _ERROR_LINE.search(text)
    line = f"{match.group(1)}: {match.group(2)}" if match else text.strip().splitlines()[0]
    return line[:_MAX_MESSAGE]


def syntax_source(condition: str) -> str:
    """JS that only compiles the condition, as the body of a function that is
    never called (V8 refuses a body that closes the function early)."""
    return f"new Function('parent', 'workflow', {json.dumps(condition)}); true"


def condition_source() -> str:
    """JS that runs the condition (in `__source`) as a script through a direct
    `eval`, with `parent` and `workflow` in scope; its completion value, as a
    boolean, is the answer (like Node's `vm.runInNewContext`)."""
    return "(function (parent, workflow) { return !!eval(__source); })(__input.parent, __input.workflow)"


def _handle(request: dict[str, Any]) -> dict[str, Any]:
    from py_mini_racer import (
        JSEvalException,
        JSOOMException,
        JSTimeoutException,
        MiniRacer,
    )

    timeout_ms = float(request.get("timeout_ms", 100))
    max_memory = int(request.get("max_memory", 32 * 1024 * 1024))
    condition = str(request.get("condition", ""))
    try:
        with MiniRacer() as racer:
            racer.eval(_PRELUDE)
            if request.get("op") == "check":
                racer.eval(syntax_source(condition), timeout=1000, max_memory=max_memory)
                return {"ok": True}
            setup = (
                f"globalThis.__input = JSON.parse({json.dumps(request.get('input', '{}'))});"
                f"globalThis.__source = {json.dumps(condition)};"
            )
            racer.eval(setup, timeout=2000, max_memory=max_memory)
            value = racer.eval(condition_source(), timeout=timeout_ms, max_memory=max_memory)
            return {"ok": True, "value": bool(value)}
    except JSTimeoutException:
        return {"ok": False, "error": "timeout", "message": f"timed out after {timeout_ms:g} ms"}
    except JSOOMException:
        return {
            "ok": False,
            "error": "memory",
            "message": f"exceeded the memory limit of {max_memory // (1024 * 1024)} MiB",
        }
    except JSEvalException as err:
        kind = "syntax" if request.get("op") == "check" else "error"
        return {"ok": False, "error": kind, "message": _message(err)}


def main() -> int:
    # mini-racer reports late callbacks of closed contexts (after a timeout)
    # as "Exception ignored" noise; they are expected here.
    sys.unraisablehook = lambda _: None
    try:
        from py_mini_racer import MiniRacer

        with MiniRacer() as racer:
            racer.eval("1")
    except Exception as err:  # the node reports the sandbox as unavailable
        sys.stdout.write(json.dumps({"ready": False, "message": f"{type(err).__name__}: {err}"}))
        sys.stdout.write("\n")
        sys.stdout.flush()
        return 1
    sys.stdout.write('{"ready": true}\n')
    sys.stdout.flush()
    for line in sys.stdin:
        try:
            request = json.loads(line)
            answer = _handle(request)
        except Exception as err:
            request, answer = {}, {"ok": False, "error": "error", "message": _message(err)}
        answer["id"] = request.get("id") if isinstance(request, dict) else None
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

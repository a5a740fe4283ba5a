"""The condition sandbox's worker process: reads one JSON request per line on
stdin, answers one JSON line on stdout. Each evaluation runs in a fresh
mini-racer (V8) isolate, prepared while the worker waits for work; syntax
checks of a batch share one isolate (they compile, nothing runs).

The worker caps its own writable memory (RLIMIT_DATA) at what V8 needs to
start plus an allowance, so memory outside the JS heap (what Intl objects,
ICU or V8 itself allocate) counts as well; a V8 fatal out-of-memory then
takes only this process down, never the node. RLIMIT_AS cannot do this: V8
reserves over a terabyte of address space for its sandbox and pointer cage
at start, and RLIMIT_DATA counts only memory the process can actually write.

Run as a script (`python -I sandbox_worker.py --path DIR ...`) with an empty
environment, so it imports only the standard library and py_mini_racer (from
DIR)."""

from __future__ import annotations

import argparse
import json
import resource
import sys
from typing import Any

# V8's young generation grows to 16 MiB semispaces by default, which lets the
# heap overshoot the hard limit by tens of MiB before it is enforced; 1 MiB
# keeps the overshoot small so the process cap can sit close to the heap cap.
_V8_FLAGS = ("--single-threaded", "--max-semi-space-size=1")
# Evaluations a worker serves before it is replaced (pooled V8 pages and any
# slow leak start afresh).
_MAX_JOBS = 5000

# Run once per isolate, before any condition. Removes host-provided or needless
# globals, and every way to allocate memory outside the JS heap that has a
# constructor (ArrayBuffers, typed arrays, DataView, WebAssembly): the heap
# limit does not see that memory, and under the process cap V8's buffer
# allocator aborts the process where the heap would fail one evaluation.
# Returns `entry(op, arg)`, which closes over the intrinsics it
# uses, taken before a condition could replace them. `run` is made by an
# indirect eval so that a condition (run by its direct eval) sees only the
# global scope, `parent`, `workflow` and `arguments`. The check guard is the
# first line of every condition's text, in checks and evaluations alike: under
# a check it stops the condition before its first statement (after V8 parsed
# all of it), so both accept and refuse exactly the same sources.
_PRELUDE = r"""
(function () {
  const buffers = /^(ArrayBuffer|SharedArrayBuffer|DataView|(Big)?(Int|Uint|Float)[0-9]+(Clamped)?Array)$/;
  const removed = ['setTimeout', 'clearTimeout', '__timer_manager', 'console', 'WebAssembly',
                   'Atomics', ...Object.getOwnPropertyNames(globalThis).filter((n) => buffers.test(n))];
  for (const name of removed) {
    delete globalThis[name];
    if (name in globalThis) globalThis[name] = undefined;  // var-declared: not deletable
  }
  const run = (0, eval)('(function (parent, workflow) { return eval(arguments[2]); })');
  const CHECK = Object.freeze({ cortexSyntaxCheck: true });
  const parseJSON = JSON.parse, stringify = JSON.stringify, toString = String;
  const isArray = Array.isArray, keys = Object.keys, getPrototypeOf = Object.getPrototypeOf;
  const PromisePrototype = Promise.prototype;
  const call = Function.prototype.call.bind(Function.prototype.call);
  let input = { parent: {}, workflow: { context: {} } };

  function kind(value) {
    if (value === null) return 'null';
    switch (typeof value) {
      case 'undefined': return 'undefined';
      case 'string': return 'a string';
      case 'number': return 'a number';
      case 'bigint': return 'a bigint';
      case 'symbol': return 'a symbol';
      case 'function': return 'a function';
    }
    if (isArray(value)) return 'an array';
    try { if (getPrototypeOf(value) === PromisePrototype) return 'a Promise'; } catch (e) {}
    return 'an object';
  }

  function thrown(error) {
    try {
      if (typeof error === 'string') return stringify(error);
      if (error !== null && typeof error === 'object') {
        const name = toString(error.name), message = toString(error.message);
        return message ? name + ': ' + message : name;
      }
      return toString(error);
    } catch (e) {
      return 'a value that cannot be shown';
    }
  }

  return function entry(op, arg) {
    if (op === 'load') {
      input = parseJSON(arg);
      // stdout/stderr travel once; a parent's result shows the same strings.
      const parent = input.parent;
      for (const key of keys(parent)) {
        const view = parent[key];
        if (view !== null && typeof view === 'object' && view.result !== null
            && typeof view.result === 'object') {
          view.result.stdout = view.stdout;
          view.result.stderr = view.stderr;
        }
      }
      return 'ok';
    }
    if (op === 'check') {
      const texts = parseJSON(arg), errors = [];
      for (const text of texts) {
        try {
          call(run, CHECK, undefined, undefined, text);
          errors.push('compiled without stopping');  // cannot happen: the guard throws
        } catch (e) {
          errors.push(e === CHECK ? null : thrown(e));
        }
      }
      return stringify(errors);
    }
    let value;
    try {
      value = call(run, undefined, input.parent, input.workflow, arg);
    } catch (e) {
      return 'E' + thrown(e);
    }
    if (value === true) return 'T';
    if (value === false) return 'F';
    return 'N' + kind(value);
  };
})()
"""
_GUARD = "if (this.cortexSyntaxCheck === true) throw this;\n"
_MAX_MESSAGE = 300


def condition_text(condition: str) -> str:
    """What V8 runs for a condition, in checks and evaluations alike."""
    return _GUARD + condition


def _clean(message: str) -> str:
    return " ".join(message.split())[:_MAX_MESSAGE]


def _vm_data() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmData in /proc/self/status")


class _Isolates:
    """Fresh isolates with the prelude run, one made ahead of need."""

    def __init__(self, max_memory: int) -> None:
        from py_mini_racer import MiniRacer

        self._factory = MiniRacer
        self.max_memory = max_memory
        self._spare: tuple[Any, Any] | None = None

    def take(self) -> tuple[Any, Any]:
        """A (racer, entry) pair nobody has used."""
        fresh, self._spare = self._spare or self._make(), None
        return fresh

    def prepare(self) -> None:
        if self._spare is None:
            self._spare = self._make()

    def _make(self) -> tuple[Any, Any]:
        racer = self._factory()
        try:
            racer.set_hard_memory_limit(self.max_memory)
            return racer, racer.eval(_PRELUDE)
        except BaseException:
            racer.close()
            raise


def _evaluate(isolates: _Isolates, request: dict[str, Any]) -> dict[str, Any]:
    from py_mini_racer import JSEvalException, JSTimeoutException

    timeout_s = float(request["timeout_ms"]) / 1000
    racer, entry = isolates.take()
    stage = "input"
    try:
        entry("load", str(request["input"]), timeout_sec=max(1.0, 20 * timeout_s))
        stage = "condition"
        answer = str(entry("evaluate", condition_text(str(request["condition"])),
                           timeout_sec=timeout_s))  # fmt: skip
    except JSEvalException as err:
        # A function call that hits the heap limit fails without saying why.
        if racer.was_hard_memory_limit_reached():
            return {"ok": False, "error": "memory", "retire": True}
        if stage == "input":
            return {
                "ok": False,
                "error": "input",
                "message": _clean(f"could not read its input: {err}"),
            }
        if isinstance(err, JSTimeoutException):
            return {"ok": False, "error": "timeout"}
        return {"ok": False, "error": "threw", "message": _clean(str(err))}
    finally:
        racer.close()
    if answer in ("T", "F"):
        return {"ok": True, "value": answer == "T"}
    if answer.startswith("N"):
        return {"ok": False, "error": "type", "message": answer[1:]}
    return {"ok": False, "error": "threw", "message": _clean(answer[1:])}


def _check(isolates: _Isolates, request: dict[str, Any]) -> dict[str, Any]:
    from py_mini_racer import JSEvalException, JSTimeoutException

    texts = [condition_text(str(c)) for c in request["conditions"]]
    racer, entry = isolates.take()
    try:
        errors = json.loads(str(entry("check", json.dumps(texts), timeout_sec=10.0)))
    except JSTimeoutException:
        return {"ok": False, "error": "timeout"}
    except JSEvalException:
        if racer.was_hard_memory_limit_reached():
            return {"ok": False, "error": "memory", "retire": True}
        raise
    finally:
        racer.close()
    return {"ok": True, "errors": [None if e is None else _clean(str(e)) for e in errors]}


def _serve(isolates: _Isolates) -> None:
    from py_mini_racer import JSEvalException

    for served, line in enumerate(sys.stdin, 1):
        request: Any = None
        try:
            request = json.loads(line)
            handler = _check if request.get("op") == "check" else _evaluate
            answer = handler(isolates, request)
        except JSEvalException as err:  # from the prelude or a check, not a condition
            answer = {"ok": False, "error": "input",
                      "message": _clean(f"could not be prepared: {err}")}  # fmt: skip
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            answer = {"ok": False, "error": "input",
                      "message": _clean(f"was sent a malformed request: {err}")}  # fmt: skip
        if served >= _MAX_JOBS:
            answer["retire"] = True
        answer["id"] = request.get("id") if isinstance(request, dict) else None
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
        if answer.get("retire"):
            return
        isolates.prepare()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--path", action="append", default=[])
    parser.add_argument("--max-memory", type=int, required=True)
    parser.add_argument("--process-allowance", type=int, required=True)
    args = parser.parse_args()
    sys.path[:0] = args.path
    # mini-racer reports late callbacks of closed isolates (a condition's
    # pending promise jobs) as "Exception ignored" noise; they are expected.
    sys.unraisablehook = lambda _: None
    try:
        from py_mini_racer import init_mini_racer

        init_mini_racer(flags=_V8_FLAGS, ignore_duplicate_init=True)
        isolates = _Isolates(args.max_memory)
        racer, entry = isolates.take()
        racer.close()
        baseline = _vm_data()
        limit = baseline + args.process_allowance
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        isolates.prepare()
    except Exception as err:  # the node reports the sandbox as unavailable
        sys.stdout.write(json.dumps({"ready": False, "message": f"{type(err).__name__}: {err}"}))
        sys.stdout.write("\n")
        sys.stdout.flush()
        return 1
    sys.stdout.write(json.dumps({"ready": True, "baseline": baseline, "limit": limit}) + "\n")
    sys.stdout.flush()
    _serve(isolates)
    return 0


if __name__ == "__main__":
    sys.exit(main())

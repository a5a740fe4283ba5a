"""Conditions written the way an attacker would, shared by the sandbox's unit
tests and the cluster tests."""

from __future__ import annotations

import json

# Walks everything a condition can reach (globals three levels deep, `this`,
# its input, and whatever `process`, `require` and the like resolve to) and
# says whether any name or value contains one of the needles.
_SEARCH = """(() => {
  const needles = %s;
  const seen = new Set();
  const texts = [];
  const walk = (value, depth) => {
    if (value === null || value === undefined) return;
    const type = typeof value;
    if (type !== 'object' && type !== 'function') { texts.push(String(value)); return; }
    if (depth > 3 || seen.has(value)) return;
    seen.add(value);
    let names = [];
    try { names = Reflect.ownKeys(value); } catch (e) { return; }
    for (const name of names) {
      texts.push(String(name));
      let item;
      try { item = value[name]; } catch (e) { continue; }
      walk(item, depth + 1);
    }
  };
  walk(globalThis, 0);
  walk(this, 0);
  walk(workflow, 0);
  walk(parent, 0);
  for (const probe of ['process', 'process.env', 'require', 'module', 'Deno', 'Bun', 'os', 'std',
                       'env', 'this.constructor.constructor("return this")()']) {
    try { walk(Function('return ' + probe)(), 0); } catch (e) { texts.push(String(e)); }
  }
  const all = texts.join('\\n');
  return needles.some((needle) => all.includes(needle));
})()"""

# Throws what a condition can see of the environment, to carry it out in the
# skip reason.
EXFILTRATE = """
const seen = Object.getOwnPropertyNames(globalThis).join(',');
let env = 'none';
try { env = JSON.stringify(process.env); } catch (e) { env = String(e); }
throw new Error('env=' + env + ' globals=' + seen);
"""


def search_for(needles: list[str]) -> str:
    """A condition that is true when anything it can reach contains a needle."""
    return _SEARCH % json.dumps(needles)

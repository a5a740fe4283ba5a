// A workflow's DAG as SVG, left to right: a task's column is one past its
// deepest dependency's; within a column tasks keep their definition order.
// Every task is drawn, pending and skipped ones too, in its state's colour,
// with its condition on its incoming edge; each node links to its task. A
// drawing is updated in place as states change.

import { clip, svg } from "./dom.js";
import { taskPath } from "./navigation.js";

const SIZE = { width: 170, height: 44, columnGap: 190, rowGap: 26, margin: 16, top: 14 };

function layout(tasks) {
  const byKey = new Map(tasks.map((task) => [task.key, task]));
  const depth = new Map();
  const depthOf = (task, seen) => {
    if (depth.has(task.key)) return depth.get(task.key);
    if (seen.has(task.key)) return 0; // a cycle cannot be submitted; never loop on one
    seen.add(task.key);
    let deepest = -1;
    for (const key of task.depends_on) {
      const dependency = byKey.get(key);
      if (dependency) deepest = Math.max(deepest, depthOf(dependency, seen));
    }
    depth.set(task.key, deepest + 1);
    return deepest + 1;
  };
  const columns = [];
  for (const task of tasks) {
    const column = depthOf(task, new Set());
    (columns[column] = columns[column] || []).push(task);
  }
  const place = new Map();
  columns.forEach((column, x) => (column || []).forEach((task, y) => place.set(task.key, {
    x: SIZE.margin + x * (SIZE.width + SIZE.columnGap),
    y: SIZE.margin + SIZE.top + y * (SIZE.height + SIZE.rowGap),
  })));
  const rows = Math.max(1, ...columns.map((column) => (column || []).length));
  return {
    place,
    width: SIZE.margin * 2 + columns.length * SIZE.width + Math.max(columns.length - 1, 0) * SIZE.columnGap,
    height: SIZE.margin * 2 + SIZE.top + rows * SIZE.height + (rows - 1) * SIZE.rowGap,
  };
}

function conditionLabel(task, attrs) {
  const text = "if " + task.condition;
  return svg("text", { class: "dag-condition", "data-task-key": task.key, ...attrs },
    svg("title", {}, text), clip(text, 33));
}

function stateLine(task) {
  return task.state + (task.node ? " on " + task.node : "");
}

function titleOf(task) {
  return task.key + ": " + task.state + (task.skip_reason ? " (" + task.skip_reason + ")" : "");
}

// The drawing, and `update(tasks)`, which shows new states in place (false
// when the tasks are not the ones drawn, to be drawn anew).
export function drawDag(tasks) {
  const { place, width, height } = layout(tasks);
  const edges = svg("g", { class: "dag-edges" });
  const conditions = svg("g", { class: "dag-conditions" });
  const nodes = svg("g", { class: "dag-nodes" });
  const drawn = new Map();
  for (const task of tasks) {
    const to = place.get(task.key);
    const condition = task.condition || "";
    let labelled = false;
    for (const key of task.depends_on) {
      const from = place.get(key);
      if (!from) continue;
      const x1 = from.x + SIZE.width, y1 = from.y + SIZE.height / 2;
      const x2 = to.x - 4, y2 = to.y + SIZE.height / 2;
      const bend = Math.max((x2 - x1) / 2, 30);
      edges.appendChild(svg("path", {
        class: "dag-edge" + (condition ? " conditional" : ""),
        d: `M ${x1} ${y1} C ${x1 + bend} ${y1}, ${x2 - bend} ${y2}, ${x2} ${y2}`,
        "marker-end": "url(#dag-arrow)",
        "data-from": key, "data-to": task.key,
      }));
      // The condition is the task's: written once, on its first edge.
      if (condition && !labelled) {
        conditions.appendChild(conditionLabel(task, { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 6, "text-anchor": "middle" }));
        labelled = true;
      }
    }
    if (condition && !labelled) conditions.appendChild(conditionLabel(task, { x: to.x, y: to.y - 5 }));
    const title = svg("title", {}, titleOf(task));
    const state = svg("text", { class: "state", x: 10, y: 34 }, stateLine(task));
    const node = svg("g", {
      class: "dag-node state-" + task.state,
      "data-task-key": task.key, "data-task-id": task.task_id, "data-state": task.state,
    },
    title,
    svg("rect", { width: SIZE.width, height: SIZE.height, rx: 6 }),
    svg("text", { x: 10, y: 18 }, clip(task.key, 22)),
    state);
    const anchor = svg("a", { class: "dag-link", transform: `translate(${to.x} ${to.y})` }, node);
    if (task.task_id) anchor.setAttribute("href", taskPath(task.task_id));
    nodes.appendChild(anchor);
    drawn.set(task.key, { anchor, node, title, state });
  }
  const element = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, id: "dag", role: "img" },
    svg("title", {}, "The workflow's tasks and what each depends on"),
    svg("defs", {}, svg("marker", {
      id: "dag-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7,
      orient: "auto-start-reverse",
    }, svg("path", { class: "dag-arrow", d: "M 0 0 L 10 5 L 0 10 z" }))),
    edges, conditions, nodes);

  const shape = (list) => JSON.stringify(list.map((t) => [t.key, t.depends_on, t.condition]));
  const drawnShape = shape(tasks);
  function update(latest) {
    if (shape(latest) !== drawnShape) return false;
    for (const task of latest) {
      const { anchor, node, title, state } = drawn.get(task.key);
      node.setAttribute("class", "dag-node state-" + task.state);
      node.setAttribute("data-state", task.state);
      node.setAttribute("data-task-id", task.task_id);
      if (task.task_id) anchor.setAttribute("href", taskPath(task.task_id));
      title.textContent = titleOf(task);
      state.textContent = stateLine(task);
    }
    return true;
  }
  return { element, update };
}

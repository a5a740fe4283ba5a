// Nodes: each one's status, labels and running tasks; per resource what it
// has, what its active tasks were promised and what its last report says is
// in use; and buttons to drain, cordon or uncordon it (after confirming).

import { api, change } from "./api.js";
import { append, el, labelChips, noticeBox, table } from "./dom.js";
import { tasksPath } from "./navigation.js";
import { confirmChoice, failed, failedIn, repeat, show } from "./page.js";

const REFRESH_MS = 3000;
const RESOURCES = [
  ["tasks", "Task slots", 0],
  ["cpu_cores", "CPU cores", 1],
  ["memory_mb", "Memory MB", 0],
  ["disk_gb", "Disk GB", 1],
  ["gpu_memory_mb", "GPU memory MB", 0],
];
// Which changes a node in each status can take, and what each does.
const ACTIONS = {
  active: ["drain", "cordon"],
  cordoned: ["drain", "uncordon"],
  draining: ["uncordon"],
};
const CHANGES = {
  drain: ["Drain", "No new tasks are placed on it and its queued ones move elsewhere; running tasks get until the drain deadline to finish."],
  cordon: ["Cordon", "No new tasks are placed on it; what it runs carries on."],
  uncordon: ["Uncordon", "It takes new tasks again."],
};

function amount(value, decimals) {
  return value === undefined || value === null ? "–" : Number(value).toFixed(decimals);
}

function resourceCell(node, resource, decimals) {
  const capacity = node.capacity[resource];
  if (capacity === undefined) return el("td", { class: "resource note" }, "not reported");
  const used = node.used[resource];
  const allocated = node.allocated[resource];
  const bar = (kind, value) => {
    const share = capacity > 0 && value !== undefined ? Math.min(value / capacity, 1) : 0;
    const fill = el("span", { class: kind });
    fill.style.width = (share * 100).toFixed(1) + "%";
    return el("div", { class: "bar", title: kind + " " + amount(value, decimals) + " of " + amount(capacity, decimals) }, fill);
  };
  return el("td", { class: "resource", "data-resource": resource },
    el("div", {}, "used " + amount(used, decimals),
      allocated !== undefined ? " · allocated " + amount(allocated, decimals) : "",
      " / " + amount(capacity, decimals)),
    bar("used", used),
    allocated !== undefined ? bar("allocated", allocated) : null);
}

function statusCell(node) {
  const healthy = node.up && node.status === "active";
  return el("td", {},
    el("span", { class: "badge status-" + node.status + (node.up ? "" : " unreachable"), "data-status": node.status },
      node.up ? node.status : node.status + ", unreachable"),
    node.status_reason ? el("div", { class: "note" }, node.status_reason) : null,
    node.drain_deadline_ms && !healthy
      ? el("div", { class: "note" }, "drain deadline " + new Date(node.drain_deadline_ms).toLocaleString()) : null);
}

export function nodesPage(page) {
  const body = el("div", {}, el("p", { class: "note" }, "Loading…"));
  const outcome = el("div", { id: "node-outcome" });
  show(page, el("h1", {}, "Nodes"),
    el("div", { class: "legend" },
      el("span", {}, el("i", { class: "used" }), "used: what the node's last report says is in use"),
      el("span", {}, el("i", { class: "allocated" }), "allocated: what its active tasks were promised"),
      el("span", {}, "capacity: what it has")),
    outcome, body);
  // A node's buttons are kept while its status is the same, so one being
  // clicked is never swapped for another by a refresh.
  const actionCells = new Map();
  let poke = () => {};

  const act = async (node, action) => {
    const [verb, effect] = CHANGES[action];
    if (!await confirmChoice(verb + " node " + node.node_id + "? " + effect, verb + " " + node.node_id)) return;
    outcome.replaceChildren();
    try {
      const changed = (await change("nodes/" + encodeURIComponent(node.node_id) + "/" + action, {}, {})).node;
      outcome.replaceChildren(noticeBox("Node " + changed.node_id + " is " + changed.status + "."));
    } catch (err) {
      failedIn(page, outcome, err);
    }
    poke();
  };

  const actionButtons = (node) => {
    const key = node.node_id + "/" + node.status;
    if (!actionCells.has(key)) {
      actionCells.set(key, el("div", { class: "actions" }, (ACTIONS[node.status] || []).map((action) =>
        el("button", {
          type: "button", class: "secondary", "data-action": action,
          onclick: () => act(node, action),
        }, CHANGES[action][0]))));
    }
    return actionCells.get(key);
  };

  const row = (node) => el("tr", { "data-node-id": node.node_id, "data-status": node.status },
    el("td", {}, el("strong", {}, node.node_id), node.leader ? " (leader)" : "",
      el("div", { class: "note mono" }, node.grpc_address),
      el("div", {}, labelChips(node.labels))),
    append(statusCell(node), [actionButtons(node)]),
    el("td", { class: "running" }, runningLink(node)),
    RESOURCES.map(([resource, , decimals]) => resourceCell(node, resource, decimals)));

  const runningLink = (node) => el("a", { href: tasksPath([["state", "running"], ["node", node.node_id]]) },
    node.active_tasks + (node.active_tasks === 1 ? " task" : " tasks"));

  const rows = el("tbody", {});
  let started = false;
  poke = repeat(page, async () => {
    try {
      const { nodes } = await api("nodes");
      if (!page.alive) return false;
      if (!started) {
        started = true;
        const nodesTable = table("nodes", ["Node", "Status", "Running", ...RESOURCES.map(([, label]) => label)], []);
        nodesTable.replaceChild(rows, nodesTable.tBodies[0]);
        body.replaceChildren(nodesTable);
      }
      rows.replaceChildren(...nodes.map(row));
    } catch (err) {
      if (!started) {
        failed(page, err);
        return false;
      }
      failedIn(page, outcome, err);
    }
    return true;
  }, REFRESH_MS);
}

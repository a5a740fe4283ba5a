// Cortex web UI: pages over the node's JSON API (/api/v1/), routed by the
// URL's hash so a reload or a shared link shows the same view, filters
// included. Data from the API only ever reaches the page as text nodes or
// attribute values (never parsed as HTML).
"use strict";

(function () {
  const API = "/api/v1/";
  const TASK_STATES = ["pending", "queued", "assigned", "running", "completed", "failed",
    "cancelled", "skipped", "dead_letter"];
  const TERMINAL_TASK_STATES = ["completed", "failed", "cancelled", "skipped", "dead_letter"];
  const WORKFLOW_STATES = ["submitting", "running", "completed", "failed", "cancelled"];
  const TERMINAL_WORKFLOW_STATES = ["completed", "failed", "cancelled"];
  const RESOURCES = [
    ["tasks", "Task slots", 0],
    ["cpu_cores", "CPU cores", 1],
    ["memory_mb", "Memory MB", 0],
    ["disk_gb", "Disk GB", 1],
    ["gpu_memory_mb", "GPU memory MB", 0],
  ];
  const TASK_FILTERS = ["state", "node", "workflow", "label", "q"];
  // Output kept on a task page; older text is dropped beyond it.
  const MAX_OUTPUT_CHARS = 2000000;
  const SVG_NS = "http://www.w3.org/2000/svg";

  const main = document.getElementById("main");
  const readStatus = document.getElementById("read-status");
  const logoutButton = document.getElementById("logout");

  // -- DOM building: children are nodes or strings (inserted as text) ---------

  function append(parent, children) {
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      if (Array.isArray(child)) append(parent, child);
      else parent.appendChild(typeof child === "string" || typeof child === "number"
        ? document.createTextNode(String(child)) : child);
    }
    return parent;
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") node.className = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    return append(node, children);
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, String(value));
    }
    return append(node, children);
  }

  function link(hash, text) {
    return el("a", { href: hash }, text);
  }

  function taskHash(id) {
    return "#/tasks/" + encodeURIComponent(id);
  }

  function workflowHash(id) {
    return "#/workflows/" + encodeURIComponent(id);
  }

  function stateBadge(state) {
    return el("span", { class: "badge state-" + state, "data-state": state }, state || "?");
  }

  function shortId(id) {
    return id ? id.slice(0, 8) : "";
  }

  function when(iso) {
    return iso ? new Date(iso).toLocaleString() : "";
  }

  function commandText(command) {
    if (command === null || command === undefined || command === "") return "";
    return Array.isArray(command) ? command.join(" ") : String(command);
  }

  function labelChips(labels) {
    return Object.entries(labels || {}).map(([key, value]) =>
      el("span", { class: "chip" }, value === "" ? key : key + "=" + value));
  }

  function errorBox(message) {
    return el("p", { class: "error" }, message);
  }

  // -- the API ----------------------------------------------------------------

  class LoginNeeded extends Error {}

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function api(path, params) {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(params || {})) {
      if (value !== null && value !== undefined && value !== "") query.append(name, value);
    }
    const url = API + path + (query.toString() ? "?" + query.toString() : "");
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (response.status === 401) throw new LoginNeeded("log in with the API token");
    let body = {};
    try {
      body = await response.json();
    } catch (err) {
      body = {};
    }
    if (!response.ok) throw new ApiError(response.status, body.error || response.statusText);
    if (body.read) {
      readStatus.textContent = "read from " + body.read.node_id + " at index " +
        body.read.applied_index + " (" + body.read.consistency + ")";
    }
    return body;
  }

  // -- pages: one at a time; timers and late answers of a page left behind are dropped

  let page = { alive: false, timers: [] };

  function newPage() {
    page.alive = false;
    for (const timer of page.timers) clearTimeout(timer);
    page = { alive: true, timers: [] };
    return page;
  }

  function later(current, action, ms) {
    if (!current.alive) return;
    current.timers.push(setTimeout(() => {
      if (current.alive && !document.hidden) action();
      else if (current.alive) later(current, action, ms);
    }, ms));
  }

  function show(current, ...children) {
    if (!current.alive) return;
    main.replaceChildren();
    append(main, children);
  }

  function failed(current, err) {
    if (!current.alive) return;
    if (err instanceof LoginNeeded) showLogin(current);
    else show(current, errorBox(err.message || String(err)));
  }

  // An error shown in `place`, the rest of the page kept (a form to correct);
  // a login needed replaces the page.
  function failedIn(current, place, err) {
    if (err instanceof LoginNeeded) failed(current, err);
    else if (current.alive) place.replaceChildren(errorBox(err.message || String(err)));
  }

  function parseHash() {
    const hash = location.hash.replace(/^#\/?/, "");
    const split = hash.indexOf("?");
    const path = split < 0 ? hash : hash.slice(0, split);
    const query = split < 0 ? "" : hash.slice(split + 1);
    let parts;
    try {
      parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    } catch (err) {
      parts = ["?"];
    }
    // No hash at all (the node's bare address) is the tasks page.
    return { parts: parts.length ? parts : ["tasks"], params: new URLSearchParams(query) };
  }

  function go(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  }

  function route() {
    const current = newPage();
    const { parts, params } = parseHash();
    const section = parts[0];
    for (const item of document.querySelectorAll("nav a")) {
      item.classList.toggle("current", item.dataset.page === section);
    }
    logoutButton.hidden = sessionStorage.getItem("cortex-login") !== "1";
    if (section === "tasks" && parts.length === 1) tasksPage(current, params);
    else if (section === "tasks" && parts.length === 2) taskPage(current, parts[1]);
    else if (section === "nodes") nodesPage(current);
    else if (section === "workflows" && parts.length === 1) workflowsPage(current, params);
    else if (section === "workflows" && parts.length === 2) workflowPage(current, parts[1]);
    else show(current, errorBox("No such page: " + location.hash));
  }

  // -- login ------------------------------------------------------------------

  function showLogin(current) {
    const input = el("input", { type: "password", name: "token", autocomplete: "current-password", required: true });
    const message = el("p", { class: "note" }, "This node wants its API token.");
    const form = el("form", {
      onsubmit: async (event) => {
        event.preventDefault();
        const answer = await fetch("/login", {
          method: "POST",
          credentials: "same-origin",
          body: new URLSearchParams({ token: input.value }),
        });
        if (answer.status === 204) {
          sessionStorage.setItem("cortex-login", "1");
          route();
        } else {
          message.replaceChildren(errorBox("That is not the API token."));
        }
      },
    },
    el("label", {}, "API token ", input),
    el("button", { type: "submit" }, "Log in"));
    show(current, el("section", { class: "login panel" }, el("h1", {}, "Log in"), message, form));
    input.focus();
  }

  logoutButton.addEventListener("click", async () => {
    await fetch("/logout", { method: "POST", credentials: "same-origin" });
    sessionStorage.removeItem("cortex-login");
    route();
  });

  // -- tasks ------------------------------------------------------------------

  function tasksHash(params) {
    const kept = new URLSearchParams();
    for (const [name, value] of params) if (value) kept.append(name, value);
    const query = kept.toString();
    return "#/tasks" + (query ? "?" + query : "");
  }

  function taskFilters(params, nodes) {
    const field = (label, input) => el("label", {}, label, input);
    const text = (name, placeholder) =>
      el("input", { name, value: params.get(name) || "", placeholder, list: name === "node" ? "node-ids" : null });
    const states = el("select", { name: "state" }, el("option", { value: "" }, "any"),
      TASK_STATES.map((state) => el("option", { value: state, selected: params.get("state") === state }, state)));
    const form = el("form", {
      class: "filters",
      onsubmit: (event) => {
        event.preventDefault();
        const chosen = new URLSearchParams();
        for (const name of TASK_FILTERS) chosen.set(name, form.elements[name].value.trim());
        go(tasksHash(chosen));
      },
    },
    field("State", states),
    field("Node", text("node", "node id")),
    field("Workflow", text("workflow", "workflow id")),
    field("Label", text("label", "key or key=value")),
    field("Text", text("q", "id, command, label")),
    el("button", { type: "submit" }, "Filter"),
    el("button", { type: "button", class: "secondary", onclick: () => go("#/tasks") }, "Clear"),
    el("datalist", { id: "node-ids" }, nodes.map((id) => el("option", { value: id }))));
    return form;
  }

  function taskRow(task) {
    return el("tr", { "data-task-id": task.id },
      el("td", { class: "mono", title: task.id }, link(taskHash(task.id), shortId(task.id))),
      el("td", {}, stateBadge(task.state)),
      el("td", {}, task.type),
      el("td", {}, task.node || ""),
      el("td", { class: "command mono", title: commandText(task.command) }, commandText(task.command)),
      el("td", {}, labelChips(task.labels)),
      el("td", {}, task.workflow_id
        ? link(workflowHash(task.workflow_id), task.workflow_key || shortId(task.workflow_id)) : ""),
      el("td", {}, when(task.created_at)));
  }

  function showTasks(body, params, listing) {
    const next = new URLSearchParams(params);
    next.set("page_token", listing.next_page_token);
    body.replaceChildren(
      el("p", { class: "note", id: "task-total" }, listing.total + (listing.total === 1 ? " task matches" : " tasks match")),
      el("table", { id: "tasks" },
        el("thead", {}, el("tr", {}, ["Id", "State", "Type", "Node", "Command", "Labels", "Workflow", "Submitted"]
          .map((name) => el("th", {}, name)))),
        el("tbody", {}, listing.tasks.map(taskRow))),
      el("div", { class: "pager" },
        params.get("page_token") ? link(tasksHash(withoutToken(params)), "First page") : null,
        listing.next_page_token ? link(tasksHash(next), "Next page") : null));
  }

  async function tasksPage(current, params) {
    const query = { page_size: 50 };
    for (const name of [...TASK_FILTERS, "page_token"]) query[name] = params.get(name) || "";
    let nodes = [];
    try {
      nodes = (await api("nodes")).nodes.map((node) => node.node_id);
    } catch (err) {
      if (err instanceof LoginNeeded) return failed(current, err);
    }
    const form = taskFilters(params, nodes);
    const body = el("div", {}, el("p", { class: "note" }, "Loading…"));
    show(current, el("h1", {}, "Tasks"), form, body);
    let shown = "";
    const refresh = async () => {
      try {
        const listing = await api("tasks", query);
        if (!current.alive) return;
        const seen = JSON.stringify([listing.tasks, listing.total, listing.next_page_token]);
        if (seen !== shown) {
          shown = seen;
          showTasks(body, params, listing);
        }
      } catch (err) {
        return failedIn(current, body, err);
      }
      // The first page follows new tasks; later pages stay as they were read.
      if (!params.get("page_token")) later(current, refresh, 5000);
    };
    refresh();
  }

  function withoutToken(params) {
    const copy = new URLSearchParams(params);
    copy.delete("page_token");
    return copy;
  }

  // -- one task ---------------------------------------------------------------

  function facts(pairs) {
    return el("dl", { class: "facts" }, pairs.filter(([, value]) => value !== null && value !== undefined && value !== "")
      .map(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
  }

  function taskSummary(task) {
    const result = task.result || {};
    return el("div", { class: "panel" }, facts([
        ["State", stateBadge(task.state)],
        ["Type", task.type],
        ["Node", task.node],
        ["Attempt", String(task.attempt)],
        ["Priority", String(task.priority)],
        ["Command", el("code", {}, commandText(task.command))],
        ["Labels", task.labels && Object.keys(task.labels).length ? labelChips(task.labels) : null],
        ["Workflow", task.workflow_id ? link(workflowHash(task.workflow_id), (task.workflow_key || "") + " in " + shortId(task.workflow_id)) : null],
        ["Idempotency key", task.idempotency_key],
        ["Submitted", when(task.created_at)],
        ["Updated", when(task.updated_at)],
        ["Exit code", result.exit_code !== undefined && task.result ? String(result.exit_code) : null],
        ["Error", task.error],
        ["Waiting because", (task.pending_reasons || []).join("; ")],
    ]));
  }

  function taskHistory(task) {
    return [
      el("h2", {}, "Spec"),
      el("pre", { class: "block", id: "task-spec" }, JSON.stringify(task.spec, null, 2)),
      el("h2", {}, "Attempts"),
      (task.attempts || []).length
        ? el("table", {}, el("thead", {}, el("tr", {}, ["Attempt", "Node", "State", "Exit code", "Error"].map((n) => el("th", {}, n)))),
          el("tbody", {}, task.attempts.map((a) => el("tr", {},
            el("td", {}, String(a.attempt)), el("td", {}, a.node || ""), el("td", {}, stateBadge(a.state)),
            el("td", {}, a.exit_code === null ? "" : String(a.exit_code)), el("td", {}, a.error || "")))))
        : el("p", { class: "note" }, "It has not run yet."),
      el("h2", {}, "Events"),
      el("table", { id: "task-events" },
        el("thead", {}, el("tr", {}, ["#", "When", "Event", "Change", "Node", "Attempt", "Detail"].map((n) => el("th", {}, n)))),
        el("tbody", {}, (task.events || []).map((event) => el("tr", {},
          el("td", {}, String(event.seq)),
          el("td", {}, when(event.at)),
          el("td", {}, event.event),
          el("td", {}, event.to ? (event.from || "–") + " → " + event.to : ""),
          el("td", {}, event.node || ""),
          el("td", {}, event.attempt ? String(event.attempt) : ""),
          el("td", { class: "mono" }, event.detail ? JSON.stringify(event.detail) : ""))))),
    ];
  }

  // Live stdout and stderr of the task's latest attempt, polled while it runs.
  function outputPanes(taskId) {
    const panes = {};
    const box = el("div", { class: "output" });
    for (const stream of ["stdout", "stderr"]) {
      const pre = el("pre", { id: "output-" + stream });
      panes[stream] = { pre, offset: 0, done: false, chars: 0 };
      box.appendChild(el("div", { class: stream }, el("h3", {}, stream), pre));
    }
    const status = el("p", { class: "note" });
    let attempt = null;

    function reset(number) {
      attempt = number;
      for (const pane of Object.values(panes)) {
        pane.pre.replaceChildren();
        pane.offset = 0;
        pane.done = number === 0;
        pane.chars = 0;
      }
      status.textContent = number === 0 ? "No output: the task has not run yet." : "Attempt " + number + ".";
    }

    function write(pane, text) {
      if (!text) return;
      const atBottom = pane.pre.scrollTop + pane.pre.clientHeight >= pane.pre.scrollHeight - 4;
      pane.pre.appendChild(document.createTextNode(text));
      pane.chars += text.length;
      while (pane.chars > MAX_OUTPUT_CHARS && pane.pre.firstChild) {
        pane.chars -= pane.pre.firstChild.textContent.length;
        pane.pre.removeChild(pane.pre.firstChild);
      }
      if (atBottom) pane.pre.scrollTop = pane.pre.scrollHeight;
    }

    // Reads what is new on each stream; true when both are complete.
    async function poll(number) {
      if (number !== attempt) reset(number);
      for (const [stream, pane] of Object.entries(panes)) {
        for (let pages = 0; !pane.done && pages < 20; pages++) {
          const piece = await api("tasks/" + encodeURIComponent(taskId) + "/output",
            { stream, offset: pane.offset, attempt: number });
          if (number !== attempt) return false;
          write(pane, piece.text);
          pane.offset = piece.next_offset;
          pane.done = piece.done;
          if (piece.end && piece.end.interrupted && piece.end.error) status.textContent = piece.end.error;
          if (!piece.more) break;
        }
      }
      return panes.stdout.done && panes.stderr.done;
    }

    return { element: el("div", {}, status, box), poll };
  }

  async function taskPage(current, taskId) {
    const summary = el("div", {});
    const history = el("div", {});
    const problem = el("div", {});
    const output = outputPanes(taskId);
    const title = el("h1", {}, "Task ", el("span", { class: "mono" }, taskId));
    let shown = "";
    const refresh = async () => {
      let done = false;
      try {
        const { task } = await api("tasks/" + encodeURIComponent(taskId));
        if (!current.alive) return;
        const seen = JSON.stringify(task);
        if (seen !== shown) {
          shown = seen;
          title.replaceChildren("Task ", el("span", { class: "mono" }, task.id), " ", stateBadge(task.state));
          summary.replaceChildren(taskSummary(task));
          history.replaceChildren(...taskHistory(task));
        }
        const outputDone = await output.poll(task.attempt);
        done = TERMINAL_TASK_STATES.includes(task.state) && outputDone;
        problem.replaceChildren();
      } catch (err) {
        if (err instanceof LoginNeeded || (err instanceof ApiError && err.status === 404)) {
          return failed(current, err);
        }
        failedIn(current, problem, err); // e.g. the output's node unreachable: try again
      }
      if (!done) later(current, refresh, 1500);
    };
    show(current, title, problem, summary, el("h2", {}, "Output"), output.element, history);
    refresh();
  }

  // -- nodes ------------------------------------------------------------------

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

  async function nodesPage(current) {
    const body = el("div", {}, el("p", { class: "note" }, "Loading…"));
    show(current, el("h1", {}, "Nodes"),
      el("div", { class: "legend" },
        el("span", {}, el("i", { class: "used" }), "used: what the node's last report says is in use"),
        el("span", {}, el("i", { class: "allocated" }), "allocated: what its active tasks were promised"),
        el("span", {}, "capacity: what it has")),
      body);
    const refresh = async () => {
      try {
        const { nodes } = await api("nodes");
        if (!current.alive) return;
        body.replaceChildren(el("table", { id: "nodes" },
          el("thead", {}, el("tr", {}, ["Node", "Status", "Role", ...RESOURCES.map(([, label]) => label)]
            .map((name) => el("th", {}, name)))),
          el("tbody", {}, nodes.map((node) => el("tr", { "data-node-id": node.node_id },
            el("td", {}, el("strong", {}, node.node_id), node.leader ? " (leader)" : "",
              el("div", { class: "note mono" }, node.grpc_address)),
            el("td", {}, el("span", { class: "badge " + (node.up ? "state-completed" : "state-failed") },
              node.up ? node.status : node.status + ", unreachable"),
              node.status_reason ? el("div", { class: "note" }, node.status_reason) : null),
            el("td", {}, node.role),
            RESOURCES.map(([resource, , decimals]) => resourceCell(node, resource, decimals)))))));
      } catch (err) {
        return failed(current, err);
      }
      later(current, refresh, 5000);
    };
    refresh();
  }

  // -- workflows --------------------------------------------------------------

  function countChips(counts) {
    return Object.entries(counts || {}).map(([state, count]) =>
      el("span", { class: "chip" }, stateBadge(state), " " + count));
  }

  async function workflowsPage(current, params) {
    const chosen = params.get("state") || "";
    const states = el("select", { name: "state" }, el("option", { value: "" }, "any"),
      WORKFLOW_STATES.map((state) => el("option", { value: state, selected: chosen === state }, state)));
    const form = el("form", {
      class: "filters",
      onsubmit: (event) => {
        event.preventDefault();
        go(states.value ? "#/workflows?state=" + encodeURIComponent(states.value) : "#/workflows");
      },
    }, el("label", {}, "State", states), el("button", { type: "submit" }, "Filter"));
    const body = el("div", {}, el("p", { class: "note" }, "Loading…"));
    show(current, el("h1", {}, "Workflows"), form, body);
    const refresh = async () => {
      try {
        const listing = await api("workflows", { state: chosen, page_token: params.get("page_token") || "", page_size: 50 });
        if (!current.alive) return;
        const next = new URLSearchParams(params);
        next.set("page_token", listing.next_page_token);
        body.replaceChildren(
          el("p", { class: "note" }, listing.total + (listing.total === 1 ? " workflow" : " workflows")),
          el("table", { id: "workflows" },
            el("thead", {}, el("tr", {}, ["Id", "Name", "State", "Tasks", "Submitted", "Finished"].map((n) => el("th", {}, n)))),
            el("tbody", {}, listing.workflows.map((workflow) => el("tr", { "data-workflow-id": workflow.id },
              el("td", { class: "mono", title: workflow.id }, link(workflowHash(workflow.id), shortId(workflow.id))),
              el("td", {}, workflow.name),
              el("td", {}, stateBadge(workflow.state)),
              el("td", {}, countChips(workflow.task_counts)),
              el("td", {}, when(workflow.created_at)),
              el("td", {}, when(workflow.completed_at)))))),
          el("div", { class: "pager" },
            params.get("page_token") ? link("#/workflows" + (chosen ? "?state=" + encodeURIComponent(chosen) : ""), "First page") : null,
            listing.next_page_token ? link("#/workflows?" + next.toString(), "Next page") : null));
      } catch (err) {
        return failedIn(current, body, err);
      }
      if (!params.get("page_token")) later(current, refresh, 5000);
    };
    refresh();
  }

  // The DAG, left to right: a task's column is one past its deepest
  // dependency's; within a column tasks keep their definition order.
  function layoutDag(tasks) {
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
    const size = { width: 170, height: 44, columnGap: 200, rowGap: 26, margin: 16 };
    const place = new Map();
    columns.forEach((column, x) => (column || []).forEach((task, y) => place.set(task.key, {
      x: size.margin + x * (size.width + size.columnGap),
      y: size.margin + 14 + y * (size.height + size.rowGap),
    })));
    const rows = Math.max(1, ...columns.map((column) => (column || []).length));
    return {
      place, size,
      width: size.margin * 2 + columns.length * size.width + Math.max(columns.length - 1, 0) * size.columnGap,
      height: size.margin * 2 + 14 + rows * size.height + (rows - 1) * size.rowGap,
    };
  }

  function clip(text, chars) {
    return text.length > chars ? text.slice(0, chars - 1) + "…" : text;
  }

  function drawDag(tasks) {
    const { place, size, width, height } = layoutDag(tasks);
    const edges = svg("g", { class: "dag-edges" });
    const labels = svg("g", { class: "dag-conditions" });
    const nodes = svg("g", { class: "dag-nodes" });
    for (const task of tasks) {
      const to = place.get(task.key);
      const condition = task.condition || "";
      task.depends_on.forEach((key, index) => {
        const from = place.get(key);
        if (!from) return;
        const x1 = from.x + size.width, y1 = from.y + size.height / 2;
        const x2 = to.x - 4, y2 = to.y + size.height / 2;
        const bend = Math.max((x2 - x1) / 2, 30);
        edges.appendChild(svg("path", {
          class: "dag-edge" + (condition ? " conditional" : ""),
          d: `M ${x1} ${y1} C ${x1 + bend} ${y1}, ${x2 - bend} ${y2}, ${x2} ${y2}`,
          "marker-end": "url(#dag-arrow)",
          "data-from": key, "data-to": task.key,
        }));
        // The condition is the task's: written once, on its first edge.
        if (condition && index === 0) {
          labels.appendChild(svg("text", {
            class: "dag-condition", x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 6, "text-anchor": "middle",
            "data-task-key": task.key,
          }, svg("title", {}, "if " + condition), "if " + clip(condition, 30)));
        }
      });
      if (condition && !task.depends_on.some((key) => place.has(key))) {
        labels.appendChild(svg("text", { class: "dag-condition", x: to.x, y: to.y - 5, "data-task-key": task.key },
          svg("title", {}, "if " + condition), "if " + clip(condition, 30)));
      }
      const open = () => go(taskHash(task.task_id));
      nodes.appendChild(svg("g", {
        class: "dag-node state-" + task.state,
        transform: `translate(${to.x} ${to.y})`,
        tabindex: 0, role: "link",
        "data-task-id": task.task_id, "data-key": task.key, "data-state": task.state,
        onclick: open,
        onkeydown: (event) => { if (event.key === "Enter") open(); },
      },
      svg("title", {}, task.key + ": " + task.state + (task.skip_reason ? " (" + task.skip_reason + ")" : "")),
      svg("rect", { width: size.width, height: size.height, rx: 6 }),
      svg("text", { x: 10, y: 18 }, clip(task.key, 22)),
      svg("text", { class: "state", x: 10, y: 34 }, task.state + (task.node ? " on " + task.node : ""))));
    }
    return svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, id: "dag", role: "img" },
      svg("defs", {}, svg("marker", {
        id: "dag-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse",
      }, svg("path", { class: "dag-arrow", d: "M 0 0 L 10 5 L 0 10 z" }))),
      edges, labels, nodes);
  }

  function workflowDetails(workflow) {
    const states = [...new Set(workflow.tasks.map((task) => task.state))];
    return [
      el("div", { class: "panel" }, facts([
        ["State", stateBadge(workflow.state)],
        ["Name", workflow.name],
        ["Tasks", countChips(workflow.task_counts)],
        ["Submitted", when(workflow.created_at)],
        ["Finished", when(workflow.completed_at)],
        ["Error", workflow.error],
      ])),
      el("div", { class: "legend" }, states.map((state) => el("span", {}, stateBadge(state)))),
      el("div", { class: "dag" }, drawDag(workflow.tasks)),
      el("h2", {}, "Tasks"),
      el("table", { id: "workflow-tasks" },
        el("thead", {}, el("tr", {}, ["Key", "State", "Node", "Depends on", "Condition", "Exit code", "Skipped because"]
          .map((name) => el("th", {}, name)))),
        el("tbody", {}, workflow.tasks.map((task) => el("tr", {},
          el("td", {}, link(taskHash(task.task_id), task.key)),
          el("td", {}, stateBadge(task.state)),
          el("td", {}, task.node || ""),
          el("td", {}, task.depends_on.join(", ")),
          el("td", { class: "mono" }, task.condition || ""),
          el("td", {}, task.exit_code === null ? "" : String(task.exit_code)),
          el("td", {}, task.skip_reason || ""))))),
      el("h2", {}, "Context"),
      el("pre", { class: "block" }, JSON.stringify(workflow.context, null, 2)),
    ];
  }

  async function workflowPage(current, workflowId) {
    const title = el("h1", {}, "Workflow ", el("span", { class: "mono" }, workflowId));
    const body = el("div", {}, el("p", { class: "note" }, "Loading…"));
    show(current, title, body);
    let shown = "";
    const refresh = async () => {
      let workflow;
      try {
        workflow = (await api("workflows/" + encodeURIComponent(workflowId))).workflow;
      } catch (err) {
        return failed(current, err);
      }
      if (!current.alive) return;
      const seen = JSON.stringify(workflow);
      if (seen !== shown) {
        shown = seen;
        title.replaceChildren("Workflow ", workflow.name, " ", el("span", { class: "mono note" }, workflow.id));
        body.replaceChildren(...workflowDetails(workflow));
      }
      if (!TERMINAL_WORKFLOW_STATES.includes(workflow.state)) later(current, refresh, 2000);
    };
    refresh();
  }

  window.addEventListener("hashchange", route);
  route();
})();

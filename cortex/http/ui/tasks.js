// The tasks page: the tasks its URL's filters match, newest first, in pages;
// the whole match cancelled, or retried from the dead-letter queue, at once
// after the user confirms how many tasks that is.

import { ApiError, LoginNeeded, api, change } from "./api.js";
import {
  TASK_STATES, commandText, el, labelChips, link, noticeBox, plural, shortId, stateBadge, table, when,
} from "./dom.js";
import { go, taskPath, tasksPath, workflowPath } from "./navigation.js";
import { confirmChoice, failed, failedIn, repeat, show } from "./page.js";

const TASK_FILTERS = ["state", "node", "workflow", "label", "q"];
const PAGE_SIZE = 50;
const REFRESH_MS = 3000;

// The filters of a URL's query, every value of each (the API takes a label
// or a state more than once).
function filtersOf(params) {
  const filters = {};
  for (const name of TASK_FILTERS) filters[name] = params.getAll(name).filter(Boolean);
  return filters;
}

function filterForm(params, nodes) {
  const text = (name, placeholder) => el("input", {
    name, value: params.get(name) || "", placeholder, list: name === "node" ? "node-ids" : null,
  });
  const states = el("select", { name: "state" }, el("option", { value: "" }, "any"),
    TASK_STATES.map((state) => el("option", { value: state, selected: params.get("state") === state }, state)));
  const form = el("form", {
    class: "filters",
    onsubmit: (event) => {
      event.preventDefault();
      go(tasksPath(TASK_FILTERS.map((name) => [name, form.elements[name].value.trim()])));
    },
  },
  el("label", {}, "State", states),
  el("label", {}, "Node", text("node", "node id")),
  el("label", {}, "Workflow", text("workflow", "workflow id")),
  el("label", {}, "Label", text("label", "key or key=value")),
  el("label", {}, "Text", text("q", "id, command, label")),
  el("button", { type: "submit" }, "Filter"),
  el("button", { type: "button", class: "secondary", onclick: () => go("/tasks") }, "Clear"),
  el("datalist", { id: "node-ids" }, nodes.map((id) => el("option", { value: id }))));
  return form;
}

function taskRow(task) {
  return el("tr", { "data-task-id": task.id, "data-state": task.state },
    el("td", { class: "mono", title: task.id }, link(taskPath(task.id), shortId(task.id))),
    el("td", {}, stateBadge(task.state)),
    el("td", {}, task.type),
    el("td", {}, task.node || ""),
    el("td", { class: "command mono", title: commandText(task.command) }, commandText(task.command)),
    el("td", {}, labelChips(task.labels)),
    el("td", {}, task.workflow_id
      ? link(workflowPath(task.workflow_id), task.workflow_key || shortId(task.workflow_id)) : ""),
    el("td", {}, when(task.created_at)));
}

function pager(params, listing) {
  const first = new URLSearchParams(params);
  first.delete("page_token");
  const next = new URLSearchParams(params);
  next.set("page_token", listing.next_page_token || "");
  return el("div", { class: "pager" },
    params.get("page_token") ? link(tasksPath(first), "First page") : null,
    listing.next_page_token ? link(tasksPath(next), "Next page") : null);
}

function outcomeText(kind, result) {
  const done = kind === "cancel" ? "cancelled" : "queued again from the dead-letter queue";
  const parts = [plural(result.acted, "task", "tasks") + " " + done + " of " + result.matched + " matching"];
  if (result.unchanged) parts.push(result.unchanged + " left as they were");
  if (result.errors.length) {
    parts.push(plural(result.errors.length, "error", "errors") + ": " +
      result.errors.slice(0, 3).map((e) => shortId(e.task_id) + " " + e.error).join("; "));
  }
  return parts.join("; ") + ".";
}

// Asks for `count`, then changes every match; when more match by then, the
// node says how many and the user is asked again.
async function changeMatching(kind, filters, count) {
  const asks = {
    cancel: (n) => ["Cancel the " + plural(n, "task", "tasks") + " these filters match?", "Cancel " + plural(n, "task", "tasks")],
    retry: (n) => ["Retry from the dead-letter queue the dead-lettered ones among the " +
      plural(n, "task", "tasks") + " these filters match?", "Retry them"],
  };
  let expected = count;
  let prefix = "";
  for (;;) {
    const [question, yes] = asks[kind](expected);
    if (!await confirmChoice(prefix + question, yes)) return null;
    try {
      return await change("tasks/" + kind, filters, { expected });
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 409 && typeof err.body.matched === "number")) throw err;
      expected = err.body.matched;
      prefix = "More tasks match now. ";
    }
  }
}

export async function tasksPage(page, params) {
  const filters = filtersOf(params);
  let nodes = [];
  try {
    nodes = (await api("nodes")).nodes.map((node) => node.node_id);
  } catch (err) {
    if (err instanceof LoginNeeded) return failed(page, err);
  }
  let latest = null;
  let poke = () => {};
  const total = el("p", { class: "note", id: "task-total" }, "Loading…");
  const outcome = el("div", { id: "bulk-outcome" });
  const bulkButton = (kind, label) => el("button", {
    type: "button", id: kind + "-matching", class: "secondary", disabled: true,
    onclick: async () => {
      if (!latest) return;
      outcome.replaceChildren();
      try {
        const result = await changeMatching(kind, filters, latest.total);
        if (result) outcome.replaceChildren(noticeBox(outcomeText(kind, result)));
      } catch (err) {
        failedIn(page, outcome, err);
      }
      poke();
    },
  }, label);
  const cancelButton = bulkButton("cancel", "Cancel matching");
  const retryButton = bulkButton("retry", "Retry matching from DLQ");
  const listed = el("div", {});
  show(page, el("h1", {}, "Tasks"), filterForm(params, nodes),
    el("div", { class: "toolbar" }, total, el("span", { class: "spacer" }), cancelButton, retryButton),
    outcome, listed);

  const query = { ...filters, page_size: PAGE_SIZE, page_token: params.get("page_token") || "" };
  let shown = "";
  const refresh = async () => {
    try {
      const listing = await api("tasks", query);
      if (!page.alive) return;
      latest = listing;
      const seen = JSON.stringify([listing.tasks, listing.total, listing.next_page_token]);
      if (seen !== shown) {
        shown = seen;
        total.textContent = listing.total + (listing.total === 1 ? " task matches" : " tasks match");
        cancelButton.disabled = retryButton.disabled = listing.total === 0;
        listed.replaceChildren(
          table("tasks", ["Id", "State", "Type", "Node", "Command", "Labels", "Workflow", "Submitted"],
            listing.tasks.map(taskRow)),
          pager(params, listing));
      }
    } catch (err) {
      failedIn(page, listed, err);
    }
    // The first page follows changes; later pages stay as they were read.
    return !params.get("page_token");
  };
  poke = repeat(page, refresh, REFRESH_MS);
}

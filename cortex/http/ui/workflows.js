// Workflows: the list with each one's tasks counted by state, and a
// workflow's page with its DAG, followed live while the workflow runs.

import { api } from "./api.js";
import {
  TASK_STATES, TERMINAL_TASK_STATES, TERMINAL_WORKFLOW_STATES, WORKFLOW_STATES, countChips, el, facts, link, plural, shortId,
  stateBadge, table, when,
} from "./dom.js";
import { drawDag } from "./dag.js";
import { go, taskPath, tasksPath, withQuery, workflowPath } from "./navigation.js";
import { failed, failedIn, repeat, show } from "./page.js";

const LIST_REFRESH_MS = 3000;
// A running workflow's page reads it this often.
const LIVE_MS = 1000;

export function workflowsPage(page, params) {
  const chosen = params.get("state") || "";
  const states = el("select", { name: "state" }, el("option", { value: "" }, "any"),
    WORKFLOW_STATES.map((state) => el("option", { value: state, selected: chosen === state }, state)));
  const form = el("form", {
    class: "filters",
    onsubmit: (event) => {
      event.preventDefault();
      go(withQuery("/workflows", [["state", states.value]]));
    },
  }, el("label", {}, "State", states), el("button", { type: "submit" }, "Filter"));
  const body = el("div", {}, el("p", { class: "note" }, "Loading…"));
  show(page, el("h1", {}, "Workflows"), form, body);
  const pageToken = params.get("page_token") || "";
  let shown = "";
  repeat(page, async () => {
    try {
      const listing = await api("workflows", { state: chosen, page_token: pageToken, page_size: 50 });
      if (!page.alive) return false;
      const seen = JSON.stringify(listing.workflows) + listing.total;
      if (seen === shown) return !pageToken;
      shown = seen;
      const next = new URLSearchParams(params);
      next.set("page_token", listing.next_page_token || "");
      body.replaceChildren(
        el("p", { class: "note", id: "workflow-total" }, plural(listing.total, "workflow", "workflows")),
        table("workflows", ["Id", "Name", "State", "Tasks", "Submitted", "Finished"],
          listing.workflows.map((workflow) => el("tr", { "data-workflow-id": workflow.id, "data-state": workflow.state },
            el("td", { class: "mono", title: workflow.id }, link(workflowPath(workflow.id), shortId(workflow.id))),
            el("td", {}, link(workflowPath(workflow.id), workflow.name)),
            el("td", {}, stateBadge(workflow.state)),
            el("td", {}, countChips(workflow.task_counts)),
            el("td", {}, when(workflow.created_at)),
            el("td", {}, when(workflow.completed_at))))),
        el("div", { class: "pager" },
          pageToken ? link(withQuery("/workflows", [["state", chosen]]), "First page") : null,
          listing.next_page_token ? link(withQuery("/workflows", next), "Next page") : null));
    } catch (err) {
      failedIn(page, body, err);
    }
    return !pageToken;
  }, LIST_REFRESH_MS);
}

function taskRows(workflow) {
  return workflow.tasks.map((task) => el("tr", { "data-task-key": task.key, "data-state": task.state },
    el("td", {}, task.task_id ? link(taskPath(task.task_id), task.key) : task.key),
    el("td", {}, stateBadge(task.state)),
    el("td", {}, task.node || ""),
    el("td", {}, task.depends_on.join(", ")),
    el("td", { class: "mono" }, task.condition || ""),
    el("td", {}, task.exit_code === null ? "" : String(task.exit_code)),
    el("td", {}, task.skip_reason || "")));
}

function about(workflow) {
  return el("div", { class: "panel" }, facts([
    ["State", stateBadge(workflow.state)],
    ["Tasks", countChips(workflow.task_counts)],
    ["Submitted", when(workflow.created_at)],
    ["Finished", when(workflow.completed_at)],
    ["Error", workflow.error],
    ["Its tasks", link(tasksPath([["workflow", workflow.id]]), "in the task list")],
  ]));
}

const legend = () => el("div", { class: "legend", id: "dag-legend" },
  TASK_STATES.map((state) => el("span", {}, el("i", { class: "state-" + state }), state)));

export function workflowPage(page, workflowId) {
  const heading = el("h1", {}, "Workflow ", el("span", { class: "mono" }, workflowId));
  const summary = el("div", {}, el("p", { class: "note" }, "Loading…"));
  const dag = el("div", { class: "dag" });
  const rows = el("tbody", {});
  const context = el("pre", { class: "block", id: "workflow-context" });
  const problem = el("div", {});
  show(page, heading, problem, summary, legend(), dag,
    el("h2", {}, "Tasks"),
    el("table", { id: "workflow-tasks" },
      el("thead", {}, el("tr", {}, ["Key", "State", "Node", "Depends on", "Condition", "Exit code", "Skipped because"]
        .map((name) => el("th", {}, name)))),
      rows),
    el("h2", {}, "Context"), context);
  let drawing = null;
  let shown = "";
  let settling = 30;
  repeat(page, async () => {
    let workflow;
    try {
      workflow = (await api("workflows/" + encodeURIComponent(workflowId))).workflow;
    } catch (err) {
      if (drawing === null) failed(page, err);
      else failedIn(page, problem, err); // keep what is drawn and try again
      return drawing !== null;
    }
    if (!page.alive) return false;
    problem.replaceChildren();
    const seen = JSON.stringify(workflow);
    if (seen !== shown) {
      shown = seen;
      heading.replaceChildren("Workflow ", workflow.name, " ", stateBadge(workflow.state), " ",
        el("span", { class: "mono note" }, workflow.id));
      heading.setAttribute("data-state", workflow.state);
      summary.replaceChildren(about(workflow));
      if (drawing === null || !drawing.update(workflow.tasks)) {
        drawing = drawDag(workflow.tasks);
        dag.replaceChildren(drawing.element);
      }
      rows.replaceChildren(...taskRows(workflow));
      context.textContent = JSON.stringify(workflow.context, null, 2);
    }
    if (!TERMINAL_WORKFLOW_STATES.includes(workflow.state)) return true;
    // Over, though a task may still be settling (a run being stopped): read
    // on a while until every task is.
    settling -= 1;
    return settling > 0 && workflow.tasks.some((task) => !TERMINAL_TASK_STATES.includes(task.state));
  }, LIVE_MS);
}

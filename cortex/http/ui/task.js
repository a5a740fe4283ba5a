// One task: what it is, its live stdout and stderr (from whichever node ran
// it: the API relays), its attempts and events, its spec, and a button to
// cancel it while it is not over.

import { ApiError, LoginNeeded, api, change } from "./api.js";
import {
  TERMINAL_TASK_STATES, commandText, el, facts, labelChips, link, noticeBox, shortId, stateBadge, table, when,
} from "./dom.js";
import { workflowPath } from "./navigation.js";
import { confirmChoice, failed, failedIn, repeat, show } from "./page.js";

// Output kept on the page; older text is dropped beyond it.
const MAX_OUTPUT_CHARS = 2000000;
const REFRESH_MS = 1000;

function summary(task) {
  const result = task.result || {};
  return el("div", { class: "panel" }, facts([
    ["State", stateBadge(task.state)],
    ["Type", task.type],
    ["Node", task.node],
    ["Attempt", String(task.attempt)],
    ["Priority", String(task.priority)],
    ["Command", el("code", {}, commandText(task.command))],
    ["Labels", labelChips(task.labels)],
    ["Workflow", task.workflow_id
      ? link(workflowPath(task.workflow_id), (task.workflow_key || "") + " in " + shortId(task.workflow_id)) : null],
    ["Idempotency key", task.idempotency_key],
    ["Submitted", when(task.created_at)],
    ["Updated", when(task.updated_at)],
    ["Exit code", task.result && result.exit_code !== undefined ? String(result.exit_code) : null],
    ["Error", task.error],
    ["Waiting because", (task.pending_reasons || []).join("; ")],
  ]));
}

function history(task) {
  return [
    el("h2", {}, "Attempts"),
    (task.attempts || []).length
      ? table("task-attempts", ["Attempt", "Node", "State", "Exit code", "Error"], task.attempts.map((a) =>
        el("tr", {},
          el("td", {}, String(a.attempt)), el("td", {}, a.node || ""), el("td", {}, stateBadge(a.state)),
          el("td", {}, a.exit_code === null ? "" : String(a.exit_code)), el("td", {}, a.error || ""))))
      : el("p", { class: "note" }, "It has not run yet."),
    el("h2", {}, "Events"),
    table("task-events", ["#", "When", "Event", "Change", "Node", "Attempt", "Detail"],
      (task.events || []).map((event) => el("tr", {},
        el("td", {}, String(event.seq)),
        el("td", {}, when(event.at)),
        el("td", {}, event.event),
        el("td", {}, event.to ? (event.from || "–") + " → " + event.to : ""),
        el("td", {}, event.node || ""),
        el("td", {}, event.attempt ? String(event.attempt) : ""),
        el("td", { class: "mono" }, event.detail ? JSON.stringify(event.detail) : "")))),
    el("h2", {}, "Spec"),
    el("pre", { class: "block", id: "task-spec" }, JSON.stringify(task.spec, null, 2)),
  ];
}

// Live stdout and stderr of the task's latest attempt, read on from where
// the last read ended.
function outputPanes(taskId) {
  const panes = {};
  const box = el("div", { class: "output" });
  for (const stream of ["stdout", "stderr"]) {
    const pre = el("pre", { id: "output-" + stream });
    panes[stream] = { pre, offset: 0, done: false, chars: 0 };
    box.appendChild(el("div", { class: stream }, el("h3", {}, stream), pre));
  }
  const status = el("p", { class: "note", id: "output-status" });
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

export async function taskPage(page, taskId) {
  const heading = el("h1", {}, "Task ", el("span", { class: "mono" }, taskId));
  const about = el("div", {});
  const past = el("div", {});
  const problem = el("div", {});
  const outcome = el("div", { id: "cancel-outcome" });
  const output = outputPanes(taskId);
  let shown = "";
  let poke = () => {};
  const cancelButton = el("button", {
    type: "button", id: "cancel-task", class: "danger", hidden: true,
    onclick: async () => {
      if (!await confirmChoice("Cancel task " + shortId(taskId) + "? Its process is stopped.", "Cancel the task")) return;
      outcome.replaceChildren();
      try {
        const { task } = await change("tasks/" + encodeURIComponent(taskId) + "/cancel", {}, {});
        outcome.replaceChildren(noticeBox("Task " + shortId(task.id) + " is " + task.state + "."));
      } catch (err) {
        failedIn(page, outcome, err);
      }
      poke();
    },
  }, "Cancel task");
  const refresh = async () => {
    let done = false;
    try {
      const { task } = await api("tasks/" + encodeURIComponent(taskId));
      if (!page.alive) return;
      const seen = JSON.stringify(task);
      if (seen !== shown) {
        shown = seen;
        heading.replaceChildren("Task ", el("span", { class: "mono" }, task.id), " ", stateBadge(task.state));
        cancelButton.hidden = TERMINAL_TASK_STATES.includes(task.state);
        about.replaceChildren(summary(task));
        past.replaceChildren(...history(task));
      }
      const outputDone = await output.poll(task.attempt);
      done = TERMINAL_TASK_STATES.includes(task.state) && outputDone;
      problem.replaceChildren();
    } catch (err) {
      if (err instanceof LoginNeeded || (err instanceof ApiError && err.status === 404)) {
        failed(page, err);
        return false;
      }
      failedIn(page, problem, err); // e.g. the output's node unreachable: try again
    }
    return !done;
  };
  show(page, el("div", { class: "toolbar" }, heading, el("span", { class: "spacer" }), cancelButton),
    outcome, problem, about, el("h2", {}, "Output"), output.element, past);
  poke = repeat(page, refresh, REFRESH_MS);
}

// Cortex web UI: views over the node's JSON API (/api/v1/), one per path
// (/tasks, /tasks/ID, /workflows, /workflows/ID, /nodes, /cluster), moved
// between with the History API, so a reload, a shared link or the back
// button shows the same view, filters included. The node serves this page
// at each of those paths.

import { onRead } from "./api.js";
import { el, errorBox, link } from "./dom.js";
import { clusterPage } from "./cluster.js";
import { go, setRouter } from "./navigation.js";
import { nodesPage } from "./nodes.js";
import { logOut, loggedIn, newPage, show } from "./page.js";
import { taskPage } from "./task.js";
import { tasksPage } from "./tasks.js";
import { workflowPage, workflowsPage } from "./workflows.js";

const readStatus = document.getElementById("read-status");
const logoutButton = document.getElementById("logout");

function pathParts() {
  try {
    return location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  } catch (err) {
    return ["?"];
  }
}

function notFound(page) {
  show(page, el("section", { class: "not-found panel" },
    el("h1", {}, "No such page"),
    el("p", {}, "Nothing is shown at ", el("code", {}, location.pathname), "."),
    el("p", {}, "There are ", link("/workflows", "workflows"), ", ", link("/tasks", "tasks"), ", ",
      link("/nodes", "nodes"), " and ", link("/cluster", "the cluster"), ".")));
}

function route() {
  const page = newPage();
  const parts = pathParts();
  const params = new URLSearchParams(location.search);
  const [section, id] = parts;
  for (const item of document.querySelectorAll("nav a")) {
    item.classList.toggle("current", item.dataset.page === section);
  }
  logoutButton.hidden = !loggedIn();
  document.title = (section ? section[0].toUpperCase() + section.slice(1) + " · " : "") + "Cortex";
  if (parts.length === 1 && section === "tasks") tasksPage(page, params);
  else if (parts.length === 2 && section === "tasks") taskPage(page, id);
  else if (parts.length === 1 && section === "workflows") workflowsPage(page, params);
  else if (parts.length === 2 && section === "workflows") workflowPage(page, id);
  else if (parts.length === 1 && section === "nodes") nodesPage(page);
  else if (parts.length === 1 && section === "cluster") clusterPage(page);
  else notFound(page);
}

// A link to one of the views is followed here, without loading the page
// again; one opened in a new tab or window is left to the browser.
function followLink(event) {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const anchor = event.target.closest("a");
  if (!anchor || anchor.hasAttribute("target") || anchor.hasAttribute("download")) return;
  const href = anchor.getAttribute("href");
  if (!href || !href.startsWith("/") || href.startsWith("//") || href === "/") return;
  if (href.startsWith("/ui/") || href.startsWith("/api/")) return;
  event.preventDefault();
  go(href);
}

onRead((read) => {
  readStatus.textContent = "read from " + read.node_id + " at index " + read.applied_index +
    " (" + read.consistency + ")";
});
logoutButton.addEventListener("click", logOut);
document.addEventListener("click", followLink);
setRouter(route);
window.addEventListener("popstate", route);
// Links from before views had paths (/#/tasks?state=running) lead to the same view.
if (location.hash.startsWith("#/")) history.replaceState(null, "", location.hash.slice(1));
try {
  route();
} catch (err) {
  document.getElementById("main").replaceChildren(errorBox(String(err)));
}

// Building the page. Children are nodes or strings, and strings only ever
// become text nodes: data from the API reaches the page as text or as
// attribute values, never parsed as HTML.

const SVG_NS = "http://www.w3.org/2000/svg";

export const TASK_STATES = ["pending", "queued", "assigned", "running", "completed", "failed",
  "cancelled", "skipped", "dead_letter"];
export const TERMINAL_TASK_STATES = ["completed", "failed", "cancelled", "skipped", "dead_letter"];
export const WORKFLOW_STATES = ["submitting", "running", "completed", "failed", "cancelled"];
export const TERMINAL_WORKFLOW_STATES = ["completed", "failed", "cancelled"];

export function append(parent, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.appendChild(typeof child === "string" || typeof child === "number"
      ? document.createTextNode(String(child)) : child);
  }
  return parent;
}

function setAttributes(node, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.setAttribute("class", value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
}

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttributes(node, attrs);
  return append(node, children);
}

export function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttributes(node, attrs);
  return append(node, children);
}

export function link(path, text, attrs) {
  return el("a", { ...attrs, href: path }, text);
}

export function table(id, headings, rows) {
  return el("table", { id },
    el("thead", {}, el("tr", {}, headings.map((name) => el("th", {}, name)))),
    el("tbody", {}, rows));
}

export function stateBadge(state) {
  return el("span", { class: "badge state-" + state, "data-state": state }, state || "?");
}

export function shortId(id) {
  return id ? id.slice(0, 8) : "";
}

export function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

export function plural(count, one, many) {
  return count + " " + (count === 1 ? one : many);
}

export function clip(text, chars) {
  return text.length > chars ? text.slice(0, chars - 1) + "…" : text;
}

export function commandText(command) {
  if (command === null || command === undefined || command === "") return "";
  return Array.isArray(command) ? command.join(" ") : String(command);
}

export function labelChips(labels) {
  return Object.entries(labels || {}).map(([key, value]) =>
    el("span", { class: "chip" }, value === "" ? key : key + "=" + value));
}

export function countChips(counts) {
  return Object.entries(counts || {}).map(([state, count]) =>
    el("span", { class: "chip", "data-count-state": state }, stateBadge(state), " " + count));
}

export function errorBox(message) {
  return el("p", { class: "error", role: "alert" }, message);
}

export function noticeBox(message) {
  return el("p", { class: "notice", role: "status" }, message);
}

// A definition list of the pairs whose value is not empty.
export function facts(pairs) {
  return el("dl", { class: "facts" }, pairs
    .filter(([, value]) => value !== null && value !== undefined && value !== "" &&
      !(Array.isArray(value) && value.length === 0))
    .map(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
}

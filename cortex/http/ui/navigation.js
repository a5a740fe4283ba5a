// Where the page is: its path and query string, changed with the History
// API so a reload, a shared link or the back button shows the same view,
// filters included. The router (app.js) shows the view of the current URL.

let router = () => {};

export function setRouter(show) {
  router = show;
}

// Shows the view at `url`, a new entry in the browser's history.
export function go(url) {
  if (url !== location.pathname + location.search) history.pushState(null, "", url);
  window.scrollTo(0, 0);
  router();
}

// Shows the current URL's view again (after logging in, say).
export function reload() {
  router();
}

export function withQuery(path, params) {
  const kept = new URLSearchParams();
  for (const [name, value] of params) if (value) kept.append(name, value);
  const query = kept.toString();
  return path + (query ? "?" + query : "");
}

export function taskPath(id) {
  return "/tasks/" + encodeURIComponent(id);
}

export function workflowPath(id) {
  return "/workflows/" + encodeURIComponent(id);
}

export function tasksPath(params) {
  return withQuery("/tasks", params || []);
}

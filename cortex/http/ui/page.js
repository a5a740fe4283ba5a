// One view at a time: timers and late answers of a view left behind are
// dropped. A view that needs the API token shows the login form instead.

import { LoginNeeded } from "./api.js";
import { append, el, errorBox } from "./dom.js";
import { reload } from "./navigation.js";

const main = document.getElementById("main");
const LOGGED_IN = "cortex-login";

let current = { alive: false, leaving: [] };

function leave(page) {
  page.alive = false;
  for (const stop of page.leaving) stop();
}

export function newPage() {
  leave(current);
  const dialog = document.getElementById("confirm");
  if (dialog.open) dialog.close("no");
  current = { alive: true, leaving: [] };
  return current;
}

// Runs `step` now, and again `ms` after each run for as long as the view is
// shown and `step` does not return false; not while the tab is hidden, so a
// background tab does not poll. The function returned runs it again at once
// (after the run in progress, if one is), as after a change.
export function repeat(page, step, ms) {
  let timer = null;
  let running = false;
  let again = false;
  const wait = () => {
    timer = setTimeout(() => {
      if (document.hidden) wait();
      else run();
    }, ms);
  };
  const run = async () => {
    if (!page.alive) return;
    if (running) {
      again = true;
      return;
    }
    clearTimeout(timer);
    running = true;
    let more = true;
    try {
      more = (await step()) !== false;
    } finally {
      running = false;
    }
    if (!page.alive) return;
    if (again) {
      again = false;
      run();
    } else if (more) {
      wait();
    }
  };
  page.leaving.push(() => clearTimeout(timer));
  run();
  return run;
}

export function show(page, ...children) {
  if (!page.alive) return;
  main.replaceChildren();
  append(main, children);
}

// An error in place of the whole view. The login form, when the API wants
// the token, ends the view (it polls no more); logging in shows it anew.
export function failed(page, err) {
  if (!page.alive) return;
  if (err instanceof LoginNeeded) {
    showLogin(page);
    leave(page);
  } else {
    show(page, errorBox(err.message || String(err)));
  }
}

// An error shown in `place`, the rest of the view kept (a form to correct,
// a table to read); a login needed replaces the view.
export function failedIn(page, place, err) {
  if (err instanceof LoginNeeded) failed(page, err);
  else if (page.alive) place.replaceChildren(errorBox(err.message || String(err)));
}

export function loggedIn() {
  return sessionStorage.getItem(LOGGED_IN) === "1";
}

function showLogin(page) {
  const input = el("input", { type: "password", name: "token", autocomplete: "current-password", required: true });
  const message = el("p", { class: "note" }, "This node wants its API token.");
  const form = el("form", {
    id: "login",
    onsubmit: async (event) => {
      event.preventDefault();
      const answer = await fetch("/login", {
        method: "POST",
        credentials: "same-origin",
        body: new URLSearchParams({ token: input.value }),
      });
      if (answer.status === 204) {
        sessionStorage.setItem(LOGGED_IN, "1");
        reload();
      } else {
        message.replaceChildren(errorBox(answer.status === 401
          ? "That is not the API token." : "The node answered " + answer.status + "; try again."));
        input.select();
      }
    },
  },
  el("label", {}, "API token ", input),
  el("button", { type: "submit" }, "Log in"));
  show(page, el("section", { class: "login panel" }, el("h1", {}, "Log in"), message, form));
  input.focus();
}

export async function logOut() {
  await fetch("/logout", { method: "POST", credentials: "same-origin" });
  sessionStorage.removeItem(LOGGED_IN);
  reload();
}

// Asks before a change: true when the user says yes.
export function confirmChoice(message, yes) {
  const dialog = document.getElementById("confirm");
  const yesButton = document.getElementById("confirm-yes");
  const noButton = document.getElementById("confirm-no");
  document.getElementById("confirm-message").textContent = message;
  yesButton.textContent = yes;
  return new Promise((resolve) => {
    const answer = (value) => () => dialog.close(value);
    const onYes = answer("yes");
    const onNo = answer("no");
    yesButton.addEventListener("click", onYes);
    noButton.addEventListener("click", onNo);
    dialog.addEventListener("close", () => {
      yesButton.removeEventListener("click", onYes);
      noButton.removeEventListener("click", onNo);
      resolve(dialog.returnValue === "yes");
    }, { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    noButton.focus();
  });
}

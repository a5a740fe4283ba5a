// The cluster: its leader and term, every member with its own applied index
// and state digest (members at the same index must hold the same digest; a
// difference is shown), and the newest events.

import { api } from "./api.js";
import { el, facts, link, shortId, table, when } from "./dom.js";
import { taskPath, workflowPath } from "./navigation.js";
import { failed, failedIn, repeat, show } from "./page.js";

const REFRESH_MS = 3000;

// Applied index -> the digests members at it hold.
function digestsByIndex(members) {
  const found = new Map();
  for (const member of members) {
    if (!member.reachable || member.applied_index === null) continue;
    if (!found.has(member.applied_index)) found.set(member.applied_index, new Set());
    found.get(member.applied_index).add(member.state_digest);
  }
  return found;
}

// "same": every member answered, at one index with one digest; "differ":
// members at the same index hold different digests; "apart": no
// disagreement seen, but not every member is at the same index.
function agreement(members, byIndex) {
  if ([...byIndex.values()].some((digests) => digests.size > 1)) return "differ";
  const everyone = members.every((member) => member.reachable);
  return everyone && byIndex.size === 1 ? "same" : "apart";
}

const AGREEMENT_TEXT = {
  same: "Every member is at the same applied index and holds the same state digest.",
  differ: "Members at the same applied index hold different state digests: their states have diverged.",
  apart: "Members are at different applied indexes (or not all answered); digests are compared at equal indexes.",
};

function memberRow(member, byIndex) {
  const differs = member.reachable && byIndex.get(member.applied_index)?.size > 1;
  const number = (value) => value === null || value === undefined ? "–" : String(value);
  return el("tr", {
    "data-node-id": member.node_id,
    "data-leader": member.is_leader ? "true" : "false",
    class: differs ? "digest-differs" : null,
  },
  el("td", {}, el("strong", {}, member.node_id), member.is_leader ? " (leader)" : "",
    el("div", { class: "note mono" }, member.grpc_address)),
  el("td", {}, el("span", { class: "badge status-" + member.status }, member.status)),
  el("td", {}, member.role || ""),
  el("td", {}, member.raft_state || ""),
  el("td", { class: "index" }, number(member.applied_index)),
  el("td", {}, number(member.commit_index)),
  el("td", { class: "digest mono", title: member.state_digest || "" }, member.state_digest ? member.state_digest.slice(0, 16) : "–"),
  el("td", {}, member.reachable ? "" : el("span", { class: "error-text" }, member.error || "did not answer")));
}

function eventRow(event) {
  return el("tr", { "data-seq": event.seq },
    el("td", {}, String(event.seq)),
    el("td", {}, when(event.ts)),
    el("td", {}, event.event),
    el("td", {}, event.task_id ? link(taskPath(event.task_id), shortId(event.task_id))
      : event.workflow_id ? link(workflowPath(event.workflow_id), shortId(event.workflow_id)) : ""),
    el("td", {}, event.to_state ? (event.from_state || "–") + " → " + event.to_state : ""),
    el("td", {}, event.node || ""),
    el("td", {}, event.attempt ? String(event.attempt) : ""),
    el("td", { class: "mono detail" }, event.detail ? JSON.stringify(event.detail) : ""));
}

export function clusterPage(page) {
  const summary = el("div", {}, el("p", { class: "note" }, "Loading…"));
  const verdict = el("p", { id: "digest-agreement" });
  const members = el("div", {});
  const events = el("div", {});
  const problem = el("div", {});
  show(page, el("h1", {}, "Cluster"), problem, summary, el("h2", {}, "Members"), verdict, members,
    el("h2", {}, "Recent events"), events);
  let loaded = false;
  repeat(page, async () => {
    let cluster;
    try {
      cluster = (await api("cluster")).cluster;
    } catch (err) {
      if (!loaded) {
        failed(page, err);
        return false;
      }
      failedIn(page, problem, err);
      return true;
    }
    if (!page.alive) return false;
    loaded = true;
    problem.replaceChildren();
    const byIndex = digestsByIndex(cluster.members);
    const agreed = agreement(cluster.members, byIndex);
    summary.replaceChildren(el("div", { class: "panel" }, facts([
      ["Leader", cluster.leader_id || "none known"],
      ["Term", String(cluster.term)],
      ["Quorum", cluster.has_quorum === undefined ? null : cluster.has_quorum ? "yes" : "no"],
      ["Answered by", cluster.node_id],
    ])));
    verdict.className = "agreement " + agreed;
    verdict.setAttribute("data-agreement", agreed);
    verdict.textContent = AGREEMENT_TEXT[agreed];
    members.replaceChildren(table("members",
      ["Member", "Status", "Role", "Raft", "Applied index", "Commit index", "State digest", ""],
      cluster.members.map((member) => memberRow(member, byIndex))));
    events.replaceChildren(table("events",
      ["#", "When", "Event", "Task", "Change", "Node", "Attempt", "Detail"],
      cluster.events.map(eventRow)));
    return true;
  }, REFRESH_MS);
}

// The live page: polls the controller's REST API and draws the fabric in tiers (core or
// spine on top, hosts at the bottom), each link coloured by its utilization; a click on a
// tree, INA plan, SELMCAST round or job highlights exactly the links it uses.
"use strict";

const POLL_MS = 2000;
const TIERS = ["core", "spine", "aggregation", "leaf", "edge", "switch"];
const SVG_NS = "http://www.w3.org/2000/svg";
const SLOT = 46;          // horizontal room per host
const ROW = 110;          // vertical distance between tiers

let state = {topology: null, links: [], trees: [], plans: [], rounds: [], jobs: []};
let selected = null;      // {kind, id}

async function fetchJson(path, fallback) {
  const response = await fetch(path, {cache: "no-store"});
  if (response.status === 404 && fallback !== undefined) {
    return fallback;      // that app is not loaded
  }
  if (!response.ok) {
    throw new Error(path + " answered " + response.status);
  }
  return response.json();
}

async function poll() {
  try {
    const [topology, links, trees, plans, rounds, jobs] = await Promise.all([
      fetchJson("/fabric/topology"), fetchJson("/fabric/links"),
      fetchJson("/multicast/trees", {trees: []}), fetchJson("/ina/plans", {plans: []}),
      fetchJson("/selmcast/rounds", {rounds: []}), fetchJson("/jobs", {jobs: []})]);
    state = {topology, links: links.links, trees: trees.trees, plans: plans.plans,
             rounds: rounds.rounds, jobs: jobs.jobs};
    render();
    setStatus("updated " + new Date().toLocaleTimeString(), false);
  } catch (error) {
    setStatus("cannot reach the controller: " + error.message, true);
  }
}

function setStatus(text, isError) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.classList.toggle("error", isError);
}

function linkKey(a, b) {
  return a < b ? a + "|" + b : b + "|" + a;
}

function pathKeys(path) {
  const keys = [];
  for (let i = 0; i + 1 < path.length; i++) {
    keys.push(linkKey(path[i], path[i + 1]));
  }
  return keys;
}

// --- what a selection uses -------------------------------------------------------------

function findItem(kind, id) {
  const list = {tree: state.trees, plan: state.plans, round: state.rounds, job: state.jobs}[kind];
  return list.find(item => item.id === id) || null;
}

function usage(kind, item) {
  const links = new Set();
  const nodes = new Set();
  if (kind === "tree") {
    item.edges.forEach(([a, b]) => links.add(linkKey(a, b)));
    [item.source, ...item.receivers].forEach(n => nodes.add(n));
  } else if (kind === "plan") {
    Object.values(item.workers).forEach(legs => legs.forEach(leg => {
      pathKeys(leg.path).forEach(k => links.add(k));
      leg.path.forEach(n => nodes.add(n));
    }));
    item.aggregates.forEach(aggregate => {
      pathKeys(aggregate.path).forEach(k => links.add(k));
      nodes.add(aggregate.aggregator);
    });
  } else if (kind === "job") {
    const parts = [...item.trees.map(id => ["tree", id]), ["plan", item.plan]];
    parts.map(([part, id]) => [part, findItem(part, id)]).filter(([, found]) => found)
      .forEach(([part, found]) => {
        const used = usage(part, found);
        used.links.forEach(k => links.add(k));
        used.nodes.forEach(n => nodes.add(n));
      });
  } else {
    item.trees.forEach(summary => {
      const tree = findItem("tree", summary.id);
      if (tree) {
        tree.edges.forEach(([a, b]) => links.add(linkKey(a, b)));
      }
      [summary.source, ...summary.receivers].forEach(n => nodes.add(n));
    });
  }
  return {links, nodes};
}

// --- drawing -----------------------------------------------------------------------------

function svg(name, attributes, parent) {
  const element = document.createElementNS(SVG_NS, name);
  Object.entries(attributes).forEach(([key, value]) => element.setAttribute(key, value));
  parent.appendChild(element);
  return element;
}

function utilizationColour(utilization) {
  if (utilization === null || utilization === undefined) {
    return "#b9bec7";
  }
  const u = Math.max(0, Math.min(1, utilization));
  const mix = (from, to, t) => Math.round(from + (to - from) * t);
  const [low, mid, high] = [[46, 158, 68], [232, 185, 35], [212, 60, 47]];
  const [a, b, t] = u < 0.5 ? [low, mid, u / 0.5] : [mid, high, (u - 0.5) / 0.5];
  return "rgb(" + a.map((v, i) => mix(v, b[i], t)).join(",") + ")";
}

function layout(topology) {
  const roleOf = {};
  topology.switches.forEach(s => { roleOf[s.name] = TIERS.includes(s.role) ? s.role : "switch"; });
  const tiers = TIERS.filter(role => topology.switches.some(s => roleOf[s.name] === role));
  const bottom = tiers[tiers.length - 1];
  const hostsOf = {};
  topology.hosts.forEach(h => { (hostsOf[h.switch] = hostsOf[h.switch] || []).push(h); });
  const lowest = topology.switches.filter(s => roleOf[s.name] === bottom);
  const slots = lowest.map(s => Math.max(1, (hostsOf[s.name] || []).length));
  const totalSlots = slots.reduce((sum, n) => sum + n, 0);
  const width = Math.max(720, totalSlots * SLOT + 40);
  const slot = (width - 40) / totalSlots;
  // hosts on switches above the bottom tier (aggregators on spines) get a row on top
  const upperHosts = topology.hosts.filter(h => roleOf[h.switch] && roleOf[h.switch] !== bottom);
  const top = upperHosts.length ? 90 : 40;
  const position = {};
  let x = 20;
  lowest.forEach((s, i) => {
    const room = slots[i] * slot;
    position[s.name] = {x: x + room / 2, y: top + ROW * tiers.indexOf(bottom)};
    (hostsOf[s.name] || []).forEach((h, j) => {
      position[h.name] = {x: x + slot * (j + 0.5), y: top + ROW * tiers.length};
    });
    x += room;
  });
  tiers.filter(role => role !== bottom).forEach((role, row) => {
    const members = topology.switches.filter(s => roleOf[s.name] === role);
    members.forEach((s, i) => {
      position[s.name] = {x: 20 + (width - 40) * (i + 0.5) / members.length, y: top + ROW * row};
    });
  });
  const onSwitch = {};
  upperHosts.forEach(h => {
    const at = position[h.switch];
    const index = onSwitch[h.switch] = (onSwitch[h.switch] || 0) + 1;
    position[h.name] = {x: at.x + 30 * (index - 1), y: at.y - 58};
  });
  return {position, width, height: top + ROW * tiers.length + 50};
}

function render() {
  const topology = state.topology;
  if (selected && !findItem(selected.kind, selected.id)) {
    selected = null;
  }
  const use = selected ? usage(selected.kind, findItem(selected.kind, selected.id))
                       : {links: new Set(), nodes: new Set()};
  renderFabric(topology, use);
  renderLists();
  renderDetails();
  document.getElementById("counts").textContent =
    topology.switches.length + " switches, " + topology.hosts.length + " hosts · " +
    state.trees.length + " trees, " + state.plans.length + " plans, " +
    state.rounds.length + " rounds, " + state.jobs.length + " jobs";
}

function renderFabric(topology, use) {
  const drawing = document.getElementById("fabric");
  drawing.replaceChildren();
  const {position, width, height} = layout(topology);
  drawing.setAttribute("viewBox", "0 0 " + width + " " + height);
  const undirected = {};
  state.links.forEach(link => {
    const key = linkKey(link.src, link.dst);
    const entry = undirected[key] = undirected[key] || {ends: [link.src, link.dst], directions: []};
    entry.directions.push(link);
  });
  const linkLayer = svg("g", {}, drawing);
  Object.entries(undirected).forEach(([key, entry]) => {
    const [a, b] = entry.ends.map(n => position[n]);
    if (!a || !b) {
      return;
    }
    const measured = entry.directions.filter(d => d.utilization !== null);
    const utilization = measured.length ? Math.max(...measured.map(d => d.utilization)) : null;
    const highlighted = use.links.has(key);
    const line = svg("line", {
      x1: a.x, y1: a.y, x2: b.x, y2: b.y, "data-link": key,
      class: "link" + (highlighted ? " highlighted" : ""),
      stroke: utilizationColour(utilization), "stroke-width": highlighted ? 6 : 3}, linkLayer);
    svg("title", {}, line).textContent = entry.directions.map(d =>
      d.src + "→" + d.dst + ": " + (d.rate_mbps === null ? "?" : d.rate_mbps.toFixed(2)) +
      " of " + d.capacity_mbps + " Mbit/s, " + d.reserved_mbps.toFixed(2) + " reserved").join("\n");
  });
  const nodeLayer = svg("g", {}, drawing);
  topology.switches.forEach(s => {
    const at = position[s.name];
    const group = svg("g", {class: "node switch" + (s.synced ? "" : " away") +
                                   (use.nodes.has(s.name) ? " highlighted" : ""),
                            "data-node": s.name}, nodeLayer);
    svg("rect", {x: at.x - 26, y: at.y - 11, width: 52, height: 22, rx: 4}, group);
    svg("text", {x: at.x, y: at.y + 4}, group).textContent = s.name;
    svg("title", {}, group).textContent = s.name + " dpid " + s.dpid +
      (s.synced ? ", synced" : s.connected ? ", connecting" : ", not connected");
  });
  topology.hosts.forEach(h => {
    const at = position[h.name];
    const aggregator = h.role === "aggregator";
    const group = svg("g", {class: "node host" + (aggregator ? " aggregator" : "") +
                                   (use.nodes.has(h.name) ? " highlighted" : ""),
                            "data-node": h.name}, nodeLayer);
    if (aggregator) {
      svg("path", {d: "M" + at.x + " " + (at.y - 10) + " l10 10 l-10 10 l-10 -10 z"}, group);
    } else {
      svg("circle", {cx: at.x, cy: at.y, r: 9}, group);
    }
    svg("text", {x: at.x, y: aggregator ? at.y - 14 : at.y + 24}, group).textContent = h.name;
    svg("title", {}, group).textContent = h.name + " " + h.ip +
      (aggregator ? ", aggregator " + h.aggregation_mbps + " Mbit/s" : "");
  });
}

function describeItem(kind, item) {
  if (kind === "tree") {
    return "tree " + item.id + ": " + item.source + " → " + item.receivers.join(",") +
      ", " + item.bandwidth_mbps + " Mbit/s";
  }
  if (kind === "plan") {
    const ps = Array.isArray(item.ps) ? item.ps.join(",") : item.ps;
    return "plan " + item.id + " (" + item.job + ", " + item.policy + "): " +
      Object.keys(item.workers).length + " workers → " + ps + ", θ " +
      item.theta_mbps.toFixed(2) + " Mbit/s";
  }
  if (kind === "job") {
    return "job " + item.id + " (generation " + item.generation + "): " + item.workers.length +
      " workers, " + item.shards.length + " shards on " + item.shards.map(s => s.host).join(",") +
      ", " + item.predicted_round_s.toFixed(3) + " s a round" + shareText(item) +
      classText(item);
  }
  return "round " + item.id + " (" + item.job + " #" + item.round + "): " +
    item.workers.length + " workers, " + item.trees.length + " trees";
}

// a job's traffic classes: its rate is a floor it may borrow beyond (in the borrowed
// class's DSCP, up to its workers' links), and its window when jobs are interleaved
function classText(job) {
  let text = "";
  if (job.borrow) {
    text += "; a floor, borrowing up to " + job.borrow.ceiling_mbps.toFixed(2) +
      " Mbit/s in DSCP " + job.borrow.dscp;
  }
  if (job.period_s !== undefined && job.period_s !== null) {
    text += "; its window from " + job.phase_offset_s.toFixed(3) + " s every " +
      job.period_s.toFixed(3) + " s";
  }
  return text;
}

// a job's rate against its fair share among the jobs installed now (absent from a
// controller older than shares)
function shareText(job) {
  if (job.rate_mbps === undefined) {
    return "";
  }
  return ", " + job.rate_mbps.toFixed(2) + " Mbit/s of a fair " +
    job.fair_share_mbps.toFixed(2) + " (weight " + job.weight + ", bound by " + job.bound_by + ")";
}

function renderLists() {
  [["tree", "trees"], ["plan", "plans"], ["round", "rounds"], ["job", "jobs"]].forEach(([kind, list]) => {
    const element = document.getElementById(list);
    element.replaceChildren();
    if (!state[list].length) {
      const none = document.createElement("li");
      none.className = "empty";
      none.textContent = "none";
      element.appendChild(none);
    }
    state[list].forEach(item => {
      const entry = document.createElement("li");
      entry.dataset.kind = kind;
      entry.dataset.id = item.id;
      entry.textContent = describeItem(kind, item);
      if (selected && selected.kind === kind && selected.id === item.id) {
        entry.classList.add("selected");
      }
      entry.addEventListener("click", () => {
        const same = selected && selected.kind === kind && selected.id === item.id;
        selected = same ? null : {kind, id: item.id};
        render();
      });
      element.appendChild(entry);
    });
  });
}

function renderDetails() {
  const details = document.getElementById("details");
  if (!selected) {
    details.textContent = "Click a tree, plan, round or job to highlight its links.";
    return;
  }
  const item = findItem(selected.kind, selected.id);
  const use = usage(selected.kind, item);
  let text = describeItem(selected.kind, item) + "\n" + use.links.size + " links\n";
  if (selected.kind === "plan") {
    text += "aggregates:\n" + item.aggregates.map(a =>
      "  " + a.aggregator + " → " + a.ps + ": " + a.workers.join(",") + " at " +
      a.rate_mbps.toFixed(2) + " Mbit/s").join("\n");
  } else if (selected.kind === "job") {
    text += "trees " + item.trees.join(",") + ", plan " + item.plan + "\nshards:\n" +
      item.shards.map(s => "  " + s.host + ": bytes " + s.bytes.join("–") + ", back on " +
        s.return.trees.map(t => t.group).join(",") + " at " + s.return.rate_mbps.toFixed(2) +
        " Mbit/s").join("\n");
  } else if (selected.kind === "tree") {
    text += "address " + item.address + "\nvia " + item.edges.map(e => e.join("→")).join(" ");
  } else {
    text += Object.entries(item.assignment).map(([w, to]) => "  " + w + " → " + to.join(","))
      .join("\n");
  }
  details.textContent = text;
}

poll();
setInterval(poll, POLL_MS);

// The GM dashboard: polls this GM's JSON API and redraws. No framework, no CDN.
// Token: when the API answers 401, the page asks for one and keeps it in this tab's
// sessionStorage (never in localStorage or a cookie). A script may open the page as
// `/#token=T` once: the token moves to sessionStorage and leaves the address bar.
"use strict";

const PERIOD_MS = 2000;
const HISTORY = 150; // usage samples kept per queue (5 minutes at 2 s)
const TOKEN_KEY = "megha-token";
const COLORS = ["#3d7bd9", "#d9663f", "#4caf7a", "#9c5bd1", "#e6b43c", "#2aa5a5", "#c2447a", "#777"];

const $ = (id) => document.getElementById(id);
const usageHistory = new Map(); // queue name -> [[t_ms, usage_share]]
let updates = 0;

function token() { return sessionStorage.getItem(TOKEN_KEY); }

async function api(path) {
  const headers = {};
  const t = token();
  if (t) headers.Authorization = "Bearer " + t;
  const r = await fetch(path, { headers });
  if (r.status === 401) throw { unauthorized: true };
  if (!r.ok) {
    let why = r.statusText;
    try { why = (await r.json()).error || why; } catch (_) { /* not JSON */ }
    throw new Error(path + ": " + r.status + " " + why);
  }
  return r.json();
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function taskName(t) { return typeof t === "object" && t !== null ? t.job + "." + t.index : String(t); }
function cpu(r) { return (r.cpu_millis / 1000).toFixed(1) + " cores"; }
function mem(r) { return r.memory_mb >= 1024 ? (r.memory_mb / 1024).toFixed(1) + " GiB" : r.memory_mb + " MiB"; }
function pct(x) { return (100 * x).toFixed(1) + "%"; }
function ago(ms) {
  const s = Math.max(0, ms) / 1000;
  return s < 60 ? s.toFixed(1) + " s" : s < 3600 ? (s / 60).toFixed(1) + " min" : (s / 3600).toFixed(1) + " h";
}
function fillBody(table, rows) { const b = $(table).tBodies[0]; b.replaceChildren(...rows); }

// A node's class: down, lent (lends resources to another partition), and how full.
function nodeClass(n) {
  if (n.down) return "down";
  const used = n.capacity.cpu_millis - n.free.cpu_millis, mused = n.capacity.memory_mb - n.free.memory_mb;
  const full = n.free.cpu_millis === 0 || n.free.memory_mb === 0;
  return full ? "used" : (used > 0 || mused > 0) ? "part" : "free";
}

// Per LM: {lm, known, partitions: [{gm, nodes: [{node, capacity, free, down, lent}]}]},
// from the LMs' own lists (/v1/cluster) when they answer, else the GM's view.
function clusterModel(cluster, view) {
  const authoritative = new Map();
  for (const a of cluster.lms) if (a.state) authoritative.set(a.lm, a.state);
  return view.lms.map((v) => {
    const lmState = authoritative.get(v.lm);
    if (lmState) {
      const parts = new Map();
      for (const n of lmState.nodes) {
        if (!parts.has(n.partition)) parts.set(n.partition, []);
        parts.get(n.partition).push({ node: n.node, capacity: n.capacity, free: n.free, down: n.down, lent: n.lent || [] });
      }
      return { lm: v.lm, known: true, source: "LM", partitions: [...parts.entries()].sort((a, b) => a[0] - b[0]).map(([gm, nodes]) => ({ gm, nodes })) };
    }
    const err = (cluster.lms.find((a) => a.lm === v.lm) || {}).error;
    return {
      lm: v.lm, known: v.known, source: "GM view", error: err, age: v.state_age_ms,
      partitions: (v.partitions || []).map((p) => ({ gm: p.gm, nodes: (p.nodes || []).map((n) => ({ ...n, down: false, lent: [] })) })),
    };
  });
}

function drawCluster(model, gm) {
  let total = 0, free = 0, used = 0, down = 0, logical = 0;
  const blocks = model.map((lm) => {
    const head = el("h3", {}, "LM " + lm.lm + " ", el("span", { class: "muted" },
      !lm.known ? "(no state yet)" : lm.source === "LM" ? "(its own list)" : "(GM view" + (lm.error ? "; LM unreachable: " + lm.error : "") + ")"));
    const parts = lm.partitions.map((p) => {
      const nodes = p.nodes.map((n) => {
        const c = nodeClass(n);
        total++;
        if (c === "down") down++; else if (c === "free") free++; else used++;
        logical += n.lent.length;
        const lentTo = n.lent.map((l) => "lends " + cpu(l.resources) + " to GM " + l.gm + " (task " + l.task + ")");
        const title = "node " + n.node + ": " + (n.down ? "down" : "free " + cpu(n.free) + ", " + mem(n.free) + " of " + cpu(n.capacity) + ", " + mem(n.capacity)) +
          (lentTo.length ? "\n" + lentTo.join("\n") : "");
        return el("span", { class: "node " + c + (n.lent.length ? " lent" : ""), title, "data-node": n.node, "data-class": c }, n.node);
      });
      const label = "partition of GM " + p.gm + (p.gm === gm ? " (internal)" : "") + " · " + p.nodes.length + " nodes";
      return el("div", { class: "partition" }, el("div", { class: "label" }, label), el("div", { class: "nodes" }, ...nodes));
    });
    return el("div", { class: "lm", "data-lm": lm.lm }, head, ...parts);
  });
  $("cluster").replaceChildren(...blocks);
  $("nodes-total").textContent = total;
  $("nodes-free").textContent = free;
  $("nodes-used").textContent = used;
  $("nodes-down").textContent = down;
  $("logical-nodes").textContent = logical;
  const sources = new Set(model.map((l) => l.source));
  $("cluster-source").textContent = "(" + [...sources].join(" + ") + ")";
}

function drawQueues(o) {
  fillBody("queues", o.queues.map((q) => el("tr", { "data-queue": q.name },
    el("td", {}, q.name), el("td", {}, q.share == null ? "–" : pct(q.share)), el("td", {}, pct(q.usage_share)),
    el("td", {}, cpu(q.usage)), el("td", {}, mem(q.usage)), el("td", { class: "queued" }, q.queued))));
  for (const q of o.queues) {
    if (!usageHistory.has(q.name)) usageHistory.set(q.name, []);
    const h = usageHistory.get(q.name);
    h.push([o.now_ms, q.usage_share]);
    if (h.length > HISTORY) h.shift();
  }
  lineChart($("usage-chart"), [...usageHistory.entries()], o.queues);
}

function lineChart(chart, series, queues) {
  const W = 480, H = 180, L = 36, R = 90, T = 8, B = 20;
  chart.replaceChildren();
  const all = series.flatMap(([, pts]) => pts);
  if (all.length === 0) return;
  const t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]), t0 + 1);
  const shares = queues.map((q) => q.share || 0);
  const ymax = Math.max(0.05, ...all.map((p) => p[1]), ...shares) * 1.1;
  const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0), y = (v) => H - B - (H - T - B) * v / ymax;
  chart.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }), svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const v of [0, ymax / 2, ymax]) chart.append(svg("text", { x: 2, y: y(v) + 3 }, pct(v)));
  chart.append(svg("text", { x: L, y: H - 4 }, "-" + ago(t1 - t0)), svg("text", { x: W - R - 20, y: H - 4 }, "now"));
  series.forEach(([name, pts], i) => {
    const color = COLORS[i % COLORS.length];
    const q = queues.find((q) => q.name === name);
    if (q && q.share != null) chart.append(svg("line", { x1: L, x2: W - R, y1: y(q.share), y2: y(q.share), stroke: color, "stroke-dasharray": "4 3", "stroke-opacity": 0.6 }));
    const d = pts.map((p, j) => (j ? "L" : "M") + x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" ");
    chart.append(svg("path", { d, fill: "none", stroke: color, "stroke-width": 2 }));
    chart.append(svg("text", { x: W - R + 6, y: T + 12 + 14 * i, fill: color, style: "fill:" + color }, name));
  });
  chart.append(svg("text", { x: W - R + 6, y: H - B }, "dashed: share"));
}

function drawAllocation(a) {
  const chart = $("alloc-chart");
  chart.replaceChildren();
  const W = 480, H = 200, L = 34, B = 34, T = 10;
  const labels = a.bounds_ms.map((b) => "≤" + (b >= 1000 ? b / 1000 + "s" : b + "ms")).concat([">" + a.bounds_ms[a.bounds_ms.length - 1] / 1000 + "s"]);
  const max = Math.max(1, ...a.counts), bw = (W - L - 4) / a.counts.length;
  chart.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W, y2: H - B }));
  chart.append(svg("text", { x: 2, y: T + 4 }, max), svg("text", { x: 2, y: H - B }, 0));
  a.counts.forEach((c, i) => {
    const h = (H - B - T) * c / max;
    const bar = svg("rect", { class: "bar", x: L + i * bw + 1, y: H - B - h, width: bw - 2, height: h, "data-count": c });
    bar.append(svg("title", {}, labels[i] + ": " + c + " tasks"));
    chart.append(bar);
    chart.append(svg("text", { x: L + i * bw + bw / 2, y: H - B + 12, "text-anchor": "middle", transform: "rotate(35 " + (L + i * bw + bw / 2) + " " + (H - B + 12) + ")" }, labels[i]));
  });
  const f = (v) => v == null ? "–" : v.toFixed(1) + " ms";
  $("alloc-summary").textContent = "(" + a.samples + " started tasks; mean " + f(a.mean_ms) + ", p50 " + f(a.p50_ms) + ", p99 " + f(a.p99_ms) + ")";
  $("alloc-summary").dataset.samples = a.samples;
}

function drawCounters(c) {
  $("counters").replaceChildren(...Object.entries(c).map(([k, v]) => el("div", { "data-counter": k }, k.replace(/_/g, " "), el("b", {}, v))));
}

function drawPending(p) {
  $("pending-total").textContent = "(" + p.total + ")";
  $("pending-total").dataset.total = p.total;
  if (p.shown.length === 0) {
    fillBody("pending", [el("tr", {}, el("td", { colspan: 5, class: "muted" }, "no task waiting"))]);
    return;
  }
  fillBody("pending", p.shown.slice(0, 50).map((t) => el("tr", {},
    el("td", {}, t.job + "." + t.index), el("td", {}, t.queue), el("td", {}, t.waiting_s.toFixed(1) + " s"),
    el("td", {}, t.attempts), el("td", { class: "reason", title: t.reason }, t.reason))));
}

// The cluster's newest jobs (GET /v1/jobs asks every GM), the GMs that did not
// answer named below them.
function drawJobs(o, page) {
  const rows = page.jobs.map((j) => {
    const states = Object.entries(j.states).map(([s, n]) => n + " " + s).join(", ");
    return el("tr", { "data-job": j.job, "data-state": j.state },
      el("td", {}, j.job), el("td", {}, Math.floor(j.job / 2 ** 48)),
      el("td", {}, el("span", { class: "state " + j.state }, j.state)),
      el("td", { title: states }, j.tasks + " (" + states + ")"), el("td", {}, j.queues.join(", ")),
      el("td", {}, j.user || "–"), el("td", {}, ago(o.now_ms - j.submitted_at_us / 1000) + " ago"));
  });
  for (const gone of page.unreachable || []) {
    rows.push(el("tr", { "data-unreachable-gm": gone.gm },
      el("td", { colspan: "7" }, "GM " + gone.gm + " did not answer: its jobs are missing (" + gone.error + ")")));
  }
  fillBody("jobs", rows);
}

function eventDetail(e) {
  const parts = [];
  if (e.lm !== undefined) parts.push("LM " + e.lm);
  if (e.node !== undefined) parts.push("node " + e.node);
  if (e.placement) parts.push(e.placement);
  if (e.reason) parts.push(typeof e.reason === "object" ? e.reason.reason || JSON.stringify(e.reason) : e.reason);
  return parts.join(" · ");
}

function drawEvents(o) {
  fillBody("events", o.events.slice(0, 30).map((e) => el("tr", { "data-event": e.event },
    el("td", {}, ago(o.now_ms - e.at / 1000) + " ago"), el("td", {}, taskName(e.task)), el("td", {}, e.event), el("td", {}, eventDetail(e)))));
}

function showError(text) {
  $("error").hidden = !text;
  $("error").textContent = text || "";
}

async function refresh() {
  try {
    const [o, view, cluster, pending, jobs, health] = await Promise.all([
      api("v1/overview"), api("v1/nodes"), api("v1/cluster"), api("v1/pending?limit=50"),
      api("v1/jobs?limit=20"),
      fetch("healthz").then((r) => r.json()).catch(() => ({ status: "unreachable" })),
    ]);
    $("gm-name").textContent = "GM " + o.gm + (o.designated ? " (designated)" : "");
    document.title = "Megha GM " + o.gm;
    const status = !o.ready ? "waiting for LM states" : health.status;
    $("status").textContent = status;
    $("status").className = "badge " + (health.status === "ok" && o.ready ? "ok" : "degraded");
    $("queued").textContent = o.queued;
    $("outstanding").textContent = o.outstanding;
    $("jain").textContent = o.jain == null ? "–" : o.jain.toFixed(3);
    drawCluster(clusterModel(cluster, view), o.gm);
    drawQueues(o);
    drawAllocation(o.allocation);
    drawCounters(o.counters);
    drawPending(pending);
    drawJobs(o, jobs);
    drawEvents(o);
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
    $("token-form").hidden = true;
    $("forget-token").hidden = !token();
    showError(null);
    updates++;
    document.body.dataset.updates = updates;
    document.body.dataset.loaded = "1";
  } catch (e) {
    if (e && e.unauthorized) {
      $("token-form").hidden = false;
      $("status").textContent = token() ? "token refused" : "token needed";
      $("status").className = "badge error";
      showError(token() ? "The GM refused this token (401). Paste another one." : "This GM requires an API token (401). Paste yours above; it stays in this tab only.");
    } else {
      $("status").textContent = "error";
      $("status").className = "badge error";
      showError(String(e && e.message ? e.message : e));
    }
  }
}

$("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const t = $("token").value.trim();
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  $("token").value = "";
  refresh();
});
$("forget-token").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); refresh(); });
const fromFragment = new URLSearchParams(location.hash.slice(1)).get("token");
if (fromFragment) {
  sessionStorage.setItem(TOKEN_KEY, fromFragment);
  history.replaceState(null, "", location.pathname + location.search);
}
$("period").textContent = PERIOD_MS / 1000;
refresh();
setInterval(refresh, PERIOD_MS);

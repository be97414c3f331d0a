/* failproofai-sidecar admin page.
 *
 * Polls the admin API (same origin) and renders it. Rules this file keeps:
 *  - every string that comes from the API (transcripts, results, errors,
 *    names) reaches the DOM through textContent / createTextNode only, never
 *    innerHTML, so a payload like <img onerror=...> renders as text;
 *  - a table is rebuilt only when its data changed, so polling never flickers;
 *  - the runs table is paginated on the server (cursor), so the page stays
 *    fast with hundreds of thousands of runs in the store. */
"use strict";
(function () {
  const POLL_MS = 2000;
  const $ = (id) => document.getElementById(id);
  const STATUS_COLORS = { succeeded: "#1f9d55", failed: "#d64545", timed_out: "#d98c12", cancelled: "#8a94a0" };

  /* ---------- helpers ---------- */
  function h(tag, props, ...children) {
    const e = document.createElement(tag);
    if (props) for (const k in props) {
      if (k === "class") e.className = props[k];
      else if (k === "title") e.title = props[k];
      else if (k.startsWith("data-")) e.setAttribute(k, props[k]);
      else e[k] = props[k];
    }
    for (const c of children) {
      if (c == null) continue;
      e.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  function text(id, v) { const n = $(id); const s = v == null ? "—" : String(v); if (n.textContent !== s) n.textContent = s; }
  function short(id, n = 8) { return id ? String(id).slice(0, n) : "—"; }
  function ago(iso) {
    if (!iso) return "—";
    const t = Date.parse(iso); if (isNaN(t)) return String(iso);
    const s = Math.round((Date.now() - t) / 1000);
    if (Math.abs(s) < 60) return s >= 0 ? `${s}s ago` : `in ${-s}s`;
    const m = Math.round(s / 60);
    if (Math.abs(m) < 60) return m >= 0 ? `${m}m ago` : `in ${-m}m`;
    return new Date(t).toISOString().replace("T", " ").slice(0, 19);
  }
  function duration(sec) {
    if (sec == null) return "—";
    sec = Math.floor(sec);
    const d = Math.floor(sec / 86400), hh = Math.floor((sec % 86400) / 3600), m = Math.floor((sec % 3600) / 60), s = sec % 60;
    return d ? `${d}d ${hh}h` : hh ? `${hh}h ${m}m` : m ? `${m}m ${s}s` : `${s}s`;
  }
  function ms(v) { return v == null ? "—" : v < 1000 ? `${Math.round(v)} ms` : `${(v / 1000).toFixed(2)} s`; }
  function statusCell(s) { return h("td", null, h("span", { class: "st st-" + String(s).replace(/[^a-z_]/g, "") }, s)); }

  let adminToken = sessionStorage.getItem("fps-admin-token") || "";
  async function api(path, opts) {
    opts = opts || {};
    const headers = { Accept: "application/json" };
    if (opts.body !== undefined) headers["Content-Type"] = "application/json";
    if (adminToken && opts.method && opts.method !== "GET") headers.Authorization = "Bearer " + adminToken;
    const res = await fetch(path, { method: opts.method || "GET", headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body), cache: "no-store" });
    let data = null;
    try { data = await res.json(); } catch (_) { /* non-JSON */ }
    if (!res.ok) {
      const msg = data && data.error ? `${data.error.code}: ${data.error.message}` : `HTTP ${res.status}`;
      const err = new Error(msg); err.status = res.status; throw err;
    }
    return data;
  }
  const lastRendered = new Map();
  function changed(key, data) {
    const s = JSON.stringify(data);
    if (lastRendered.get(key) === s) return false;
    lastRendered.set(key, s);
    return true;
  }

  /* ---------- status ---------- */
  function renderStatus(st) {
    const ready = $("ready-badge");
    const readyText = st.ready ? "ready" : "not ready";
    if (ready.textContent !== readyText) ready.textContent = readyText;
    ready.className = "badge " + (st.ready ? "badge-ok" : "badge-bad");
    ready.title = st.ready_reason || "";
    $("drain-badge").hidden = !st.draining;
    text("worker-id", st.worker_id);
    text("server", st.server);
    text("uptime", duration(st.uptime_seconds));
    text("version", st.version);
    const registered = st.registered === true;
    text("reg-state", registered ? "registered" : st.state || "not registered");
    $("reg-state").className = "big st st-" + (registered ? "succeeded" : "failed");
    text("reg-detail", registered && st.evaluator_instance_id ? `instance ${short(st.evaluator_instance_id, 13)}` : st.ready_reason || "");
    text("catalog", st.catalog_revision || "—");
    const timing = st.timing || {};
    text("active-assignments", st.active_assignments ?? 0);
    text("claim-limit", timing.claim_limit ?? "—");
    text("active-runs", st.active_runs ?? 0);
    text("sandboxes", st.active_sandboxes ?? 0);
    text("outbox", st.outbox_depth ?? 0);
    const le = st.last_error;
    text("last-error", le ? `${le.code || "error"}: ${le.message || ""}${le.at ? " (" + ago(le.at) + ")" : ""}` : "none");
    if (changed("jail", st.jail)) {
      const box = $("jail"); box.replaceChildren();
      const jail = st.jail || {};
      for (const k of Object.keys(jail)) box.appendChild(h("span", { class: "chip " + (jail[k] ? "on" : "off"), title: jail[k] ? "active" : "unavailable" }, k.replace(/_/g, " ")));
    }
  }

  /* ---------- evaluators ---------- */
  function renderEvaluators(data) {
    const list = (data && data.evaluators) || [];
    $("evaluators-empty").hidden = list.length > 0;
    if (!changed("evaluators", list)) return;
    $("evaluators").replaceChildren(...list.map((e) => h("tr", null,
      h("td", null, e.name), h("td", null, e.version), h("td", { class: "mono" }, e.endpoint),
      h("td", null, (e.definitions || []).map((d) => d.eval_key).join(", ")),
      h("td", null, e.ttl_seconds != null ? `${e.ttl_seconds}s (expires ${ago(e.expires_at)})` : "none"),
      statusCell(e.alive === false ? "expired" : "alive"))));
  }

  /* ---------- assignments ---------- */
  const recentAssignments = [];
  function renderAssignments(data) {
    const list = (data && data.assignments) || [];
    $("assignments-empty").hidden = list.length > 0;
    recentAssignments.length = 0; recentAssignments.push(...list);
    if (!changed("assignments", list)) return;
    $("assignments").replaceChildren(...list.map((a) => h("tr", null,
      h("td", { class: "mono", title: a.id }, short(a.id, 13)),
      h("td", null, a.session_id), h("td", null, a.agent_id), statusCell(a.status),
      h("td", null, a.lease_generation),
      h("td", null, a.runs ? `${a.runs.finished ?? 0}/${a.runs.total ?? 0}` : "—"),
      h("td", null, a.finished_at ? "finished " + ago(a.finished_at) : "lease " + ago(a.lease_expires_at)))));
    const sel = $("play-assignment");
    const keep = sel.value;
    sel.replaceChildren(...list.map((a) => h("option", { value: a.id }, `${short(a.id, 13)} · ${a.session_id || ""}`)));
    if (keep && list.some((a) => a.id === keep)) sel.value = keep;
  }

  /* ---------- runs ---------- */
  const runsState = { cursors: [null], page: 0, next: null, filters: {}, selected: null };
  function runsQuery() {
    const q = new URLSearchParams({ limit: "50" });
    for (const k in runsState.filters) if (runsState.filters[k]) q.set(k, runsState.filters[k]);
    const c = runsState.cursors[runsState.page];
    if (c) q.set("cursor", c);
    return "/v1/runs?" + q.toString();
  }
  async function loadRuns() {
    const data = await api(runsQuery());
    const list = (data && data.runs) || [];
    runsState.next = data ? data.next_cursor : null;
    $("runs-empty").hidden = list.length > 0;
    $("page-prev").disabled = runsState.page === 0;
    $("page-next").disabled = !runsState.next;
    text("page-info", `page ${runsState.page + 1}`);
    if (!changed("runs", [list, runsState.selected])) return;
    $("runs").replaceChildren(...list.map((r) => {
      const tr = h("tr", { class: r.id === runsState.selected ? "selected" : "", "data-run": r.id },
        h("td", { class: "mono", title: r.id }, short(r.id, 13)),
        h("td", null, r.eval_key), h("td", null, r.eval_version), h("td", null, r.execution_mode),
        statusCell(r.status), h("td", null, ago(r.started_at)), h("td", null, ms(r.duration_ms)),
        h("td", null, r.error_code || ""));
      tr.addEventListener("click", () => openRun(r.id));
      return tr;
    }));
  }
  function field(dl, k, v) { dl.appendChild(h("dt", null, k)); dl.appendChild(h("dd", null, v == null || v === "" ? "—" : String(v))); }
  async function openRun(id) {
    runsState.selected = id;
    lastRendered.delete("runs");
    const r = await api("/v1/runs/" + encodeURIComponent(id));
    $("run-detail").hidden = false;
    text("detail-id", r.id);
    const f = $("detail-fields"); f.replaceChildren();
    for (const k of ["assignment_id", "eval_key", "eval_version", "execution_mode", "status", "started_at", "finished_at"]) field(f, k, r[k]);
    field(f, "duration", ms(r.duration_ms));
    field(f, "summary", r.summary);
    $("detail-results").replaceChildren(...(r.results || []).map((it) => h("tr", null,
      h("td", { class: "mono" }, it.result_key), h("td", null, it.result_kind),
      h("td", null, it.numeric_value ?? it.text_value ?? ""), h("td", null, it.bool_value == null ? "" : String(it.bool_value)),
      h("td", null, it.unit || ""), h("td", null, it.display_value || ""), h("td", null, it.description || ""),
      h("td", null, it.reasoning || ""), h("td", null, (it.labels || []).join(", ")))));
    $("detail-error").textContent = r.error_code ? `${r.error_code}: ${r.error_message || ""}` : "none";
    const s = $("detail-submission"); s.replaceChildren();
    const sub = r.submission || {};
    for (const k of ["submission_id", "status", "attempts_count", "first_attempt_at", "last_attempt_at", "error_code", "error_message"]) field(s, k, sub[k]);
    for (const a of sub.attempts || []) field(s, `attempt ${a.attempt}`, `${a.at || ""} ${a.outcome || ""} ${a.http_status || ""} ${a.duration_ms != null ? ms(a.duration_ms) : ""} ${a.error_code || ""}`);
    $("run-detail").scrollIntoView({ behavior: "smooth", block: "nearest" });
    loadRuns().catch(() => {});
  }

  /* ---------- charts ---------- */
  function renderStats(st) {
    if (!st || !changed("stats", st)) return;
    const per = st.minutes || [];
    const labels = per.map((p) => String(p.t || "").slice(11, 16));
    const names = ["succeeded", "failed", "timed_out", "cancelled"];
    window.FpsChart.stackedBars($("chart-throughput"), $("legend-throughput"), labels,
      names.map((n) => ({ name: n, color: STATUS_COLORS[n], values: per.map((p) => p[n] || 0) })));
    window.FpsChart.lines($("chart-latency"), $("legend-latency"), labels, [
      { name: "p50", color: "#2f6fd6", values: per.map((p) => p.p50_ms ?? null) },
      { name: "p90", color: "#d98c12", values: per.map((p) => p.p90_ms ?? null) },
      { name: "p99", color: "#d64545", values: per.map((p) => p.p99_ms ?? null) }], "ms");
  }

  /* ---------- playground ---------- */
  async function runPlayground(ev) {
    ev.preventDefault();
    const kind = document.querySelector('input[name="kind"]:checked').value;
    const body = { kind, source: $("play-source").value, eval_key: $("play-key").value || "q" };
    const out = $("play-output"), status = $("play-status"), result = $("play-result");
    out.hidden = false;
    if ($("play-transcript-src").value === "paste") {
      try { body.transcript = JSON.parse($("play-transcript").value); } catch (e) {
        status.className = "play-status bad"; status.textContent = "transcript is not valid JSON";
        result.textContent = String(e.message); return;
      }
    } else if ($("play-assignment").value) {
      body.assignment_id = $("play-assignment").value;
    }
    status.className = "play-status"; status.textContent = "running…"; result.textContent = "";
    try {
      const r = await api("/v1/evaluate", { method: "POST", body });
      const good = r && r.ok;
      status.className = "play-status " + (good ? "ok" : "bad");
      if (good) status.textContent = "ok";
      else {
        let msg = `${r.stage || "error"}: ${r.message || r.error_type || ""}`;
        if (r.location) msg += ` (line ${r.location.line}, column ${r.location.col})`;
        status.textContent = msg;
      }
      result.textContent = JSON.stringify(r, null, 2);
    } catch (e) {
      if (e.status === 401 && !adminToken) {
        const t = window.prompt("This sidecar requires its admin token for the playground:");
        if (t) { adminToken = t; sessionStorage.setItem("fps-admin-token", t); return runPlayground(ev); }
      }
      status.className = "play-status bad"; status.textContent = e.message; result.textContent = "";
    }
  }

  /* ---------- wiring ---------- */
  async function poll() {
    const tasks = [
      api("/v1/status").then(renderStatus),
      api("/v1/evaluators").then(renderEvaluators),
      api("/v1/assignments?limit=20").then(renderAssignments),
      api("/v1/stats?minutes=60").then(renderStats),
    ];
    if (runsState.page === 0) tasks.push(loadRuns());
    const results = await Promise.allSettled(tasks);
    const down = results.some((r) => r.status === "rejected" && !(r.reason && r.reason.status));
    $("conn").className = down ? "conn down" : "conn";
    $("conn").title = down ? "cannot reach the sidecar" : "connected";
  }
  function applyFilters(ev) {
    if (ev) ev.preventDefault();
    runsState.filters = { status: $("filter-status").value, eval_key: $("filter-key").value.trim(), assignment: $("filter-assignment").value.trim() };
    runsState.cursors = [null]; runsState.page = 0;
    lastRendered.delete("runs");
    loadRuns().catch((e) => { text("page-info", e.message); });
  }
  document.addEventListener("DOMContentLoaded", () => {
    $("run-filters").addEventListener("submit", applyFilters);
    $("filter-status").addEventListener("change", applyFilters);
    $("filter-clear").addEventListener("click", () => { $("filter-status").value = ""; $("filter-key").value = ""; $("filter-assignment").value = ""; applyFilters(); });
    $("page-next").addEventListener("click", () => { if (!runsState.next) return; runsState.cursors[runsState.page + 1] = runsState.next; runsState.page++; lastRendered.delete("runs"); loadRuns(); });
    $("page-prev").addEventListener("click", () => { if (runsState.page === 0) return; runsState.page--; lastRendered.delete("runs"); loadRuns(); });
    $("detail-close").addEventListener("click", () => { $("run-detail").hidden = true; runsState.selected = null; lastRendered.delete("runs"); loadRuns(); });
    $("play-form").addEventListener("submit", runPlayground);
    $("play-transcript-src").addEventListener("change", () => {
      const paste = $("play-transcript-src").value === "paste";
      $("play-transcript").hidden = !paste; $("play-assignment").hidden = paste;
    });
    poll();
    setInterval(poll, POLL_MS);
  });
})();

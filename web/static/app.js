/* failproofai-sidecar admin page.
 *
 * Polls the admin API (same origin) and renders it. Rules this file keeps:
 *  - every string that comes from the API (transcripts, results, errors,
 *    names, log lines) reaches the DOM through textContent / createTextNode
 *    or a property (title), never innerHTML, so a payload like
 *    <img onerror=...> renders as text;
 *  - a table is rebuilt only when its data changed, so polling never flickers;
 *    relative times tick every second on their own, from data-ts attributes;
 *  - failures look like failures: a failed request shows a banner and clears
 *    what it would have replaced, an unreachable sidecar shows "data as of";
 *  - the view (filters, chart window, the run or assignment opened) lives in
 *    the URL's fragment, so it can be linked and survives a reload;
 *  - enumerations (statuses) come from GET /v1/meta, not from this file. */
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
  function utc(iso) {
    const t = Date.parse(iso);
    return isNaN(t) ? String(iso) : new Date(t).toISOString().replace("T", " ").replace("Z", " UTC");
  }
  function ago(iso) {
    if (!iso) return "—";
    const t = Date.parse(iso); if (isNaN(t)) return String(iso);
    const s = Math.round((Date.now() - t) / 1000);
    if (Math.abs(s) < 60) return s >= 0 ? `${s}s ago` : `in ${-s}s`;
    const m = Math.round(s / 60);
    if (Math.abs(m) < 60) return m >= 0 ? `${m}m ago` : `in ${-m}m`;
    const hh = Math.round(m / 60);
    if (Math.abs(hh) < 48) return hh >= 0 ? `${hh}h ago` : `in ${-hh}h`;
    return utc(iso).slice(0, 16) + " UTC";
  }
  /* A relative time that ticks every second, with the absolute UTC time on hover. */
  function when(iso, prefix) {
    if (!iso) return document.createTextNode(prefix ? `${prefix} —` : "—");
    const span = h("time", { "data-ts": iso, "data-prefix": prefix || "", title: utc(iso), dateTime: iso });
    span.textContent = (prefix ? prefix + " " : "") + ago(iso);
    return span;
  }
  function tickTimes() {
    for (const n of document.querySelectorAll("[data-ts]")) {
      const p = n.getAttribute("data-prefix");
      const s = (p ? p + " " : "") + ago(n.getAttribute("data-ts"));
      if (n.textContent !== s) n.textContent = s;
    }
  }
  function duration(sec) {
    if (sec == null) return "—";
    sec = Math.floor(sec);
    const d = Math.floor(sec / 86400), hh = Math.floor((sec % 86400) / 3600), m = Math.floor((sec % 3600) / 60), s = sec % 60;
    return d ? `${d}d ${hh}h` : hh ? `${hh}h ${m}m` : m ? `${m}m ${s}s` : `${s}s`;
  }
  function ms(v) {
    if (v == null) return "—";
    if (v < 1) return `${Math.round(v * 1000)} µs`;
    if (v < 10) return `${v.toFixed(2)} ms`;
    return v < 1000 ? `${v.toFixed(1)} ms` : `${(v / 1000).toFixed(2)} s`;
  }
  function bytes(n) {
    if (n == null) return "—";
    const u = ["B", "KiB", "MiB", "GiB"]; let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return `${i ? n.toFixed(1) : n} ${u[i]}`;
  }
  function cls(s) { return String(s).replace(/[^a-z_]/g, ""); }
  function statusCell(s) { return h("td", null, h("span", { class: "st st-" + cls(s) }, s)); }

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
  /* A state-changing call with the admin token: asked for once on a 401,
   * kept in sessionStorage for this tab. */
  async function adminCall(path, opts) {
    try { return await api(path, opts); } catch (e) {
      if (e.status !== 401) throw e;
      const t = window.prompt("This sidecar requires its admin token:");
      if (!t) throw e;
      adminToken = t; sessionStorage.setItem("fps-admin-token", t);
      return api(path, opts);
    }
  }
  const lastRendered = new Map();
  function changed(key, data) {
    const s = JSON.stringify(data);
    if (lastRendered.get(key) === s) return false;
    lastRendered.set(key, s);
    return true;
  }
  /* Each cell gets its column's name: the stacked-card layout shows it. */
  function labelCells(tbody) {
    const heads = [...tbody.closest("table").querySelectorAll("thead th")].map((th) => th.textContent);
    for (const tr of tbody.children) {
      if (tr.classList.contains("detail-row")) continue;
      [...tr.children].forEach((td, i) => td.setAttribute("data-label", heads[i] || ""));
    }
  }

  /* ---------- the view in the URL ---------- */
  const view = { status: "", eval_key: "", assignment: "", run: "", asg: "", window: "60", chart_key: "", bt: "" };
  function readHash() {
    const q = new URLSearchParams(location.hash.slice(1));
    for (const k of Object.keys(view)) view[k] = q.get(k) || (k === "window" ? "60" : "");
  }
  function writeHash() {
    const q = new URLSearchParams();
    for (const k of Object.keys(view)) if (view[k] && !(k === "window" && view[k] === "60")) q.set(k, view[k]);
    const s = q.toString();
    if (location.hash.slice(1) !== s) history.replaceState(null, "", s ? "#" + s : location.pathname);
  }

  /* ---------- status ---------- */
  let lastStatus = null;
  function renderTitle() {
    const st = lastStatus;
    let t;
    if (outage.down) t = "⚠ unreachable";
    else if (!st) t = "…";
    else if (st.draining) t = "⏸ draining";
    else t = st.ready ? "✓ ready" : "✕ not ready";
    const title = `${t} — failproofai-sidecar`;
    if (document.title !== title) document.title = title;
  }
  function renderStatus(st) {
    lastStatus = st;
    const ready = $("ready-badge");
    const readyText = st.ready ? "ready" : "not ready";
    if (ready.textContent !== readyText) ready.textContent = readyText;
    ready.className = "badge " + (st.ready ? "badge-ok" : "badge-bad");
    ready.title = st.ready_reason || "";
    $("drain-badge").hidden = !st.draining;
    text("drain-toggle", st.draining ? "resume claiming" : "drain");
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
    const mem = st.memory || {};
    text("memory-tree", mem.tree_bytes != null ? bytes(mem.tree_bytes) : "—");
    text("memory-budget", mem.budget_bytes != null ? bytes(mem.budget_bytes) : "no budget");
    const waiting = [mem.sandboxes_waiting ? `${mem.sandboxes_waiting} sandbox starts` : "", mem.claims_waiting ? "claims" : ""].filter(Boolean).join(", ");
    // what the budget did since start: sandboxes stopped and run again, and
    // playground evaluations refused for want of room
    const acted = [mem.sandbox_reruns ? `${mem.sandbox_reruns} re-run to keep the budget` : "",
      mem.sandboxes_refused ? `${mem.sandboxes_refused} refused` : ""].filter(Boolean).join(" · ");
    text("memory-detail", mem.budget_bytes != null
      ? `accounted ${bytes(mem.accounted_bytes ?? 0)} · ${waiting ? "waiting for memory: " + waiting : "nothing waiting"}${acted ? " · " + acted : ""}`
      : "process tree / budget");
    $("memory-card").className = "card" + (waiting ? " card-warn" : "");
    const store = st.store || {};
    text("outbox", store.outbox_depth ?? st.outbox_depth ?? 0);
    text("outbox-age", store.oldest_unsent_age_seconds ? duration(store.oldest_unsent_age_seconds) : "—");
    $("outbox-card").className = "card" + ((store.oldest_unsent_age_seconds || 0) > 300 ? " card-bad" : "");
    text("store-size", store.db_bytes != null ? bytes(store.db_bytes) : "—");
    text("store-detail", store.db_bytes != null
      ? `WAL ${bytes(store.wal_bytes)} · ${store.checkpoints ?? 0} checkpoints${store.checkpoints_blocked ? `, ${store.checkpoints_blocked} blocked` : ""}${store.writes_blocked ? " · writes blocked: " + store.writes_blocked : ""}`
      : "database · WAL · checkpoints");
    if (changed("counters", st.counters)) {
      const dl = $("counters"); dl.replaceChildren();
      const c = st.counters || {};
      for (const [k, label] of [["leases_lost", "leases lost"], ["protocol_errors", "protocol errors"], ["result_retries", "result retries"], ["heartbeat_failures", "heartbeat failures"], ["assignments_claimed", "claimed"]]) {
        dl.appendChild(h("dt", null, label));
        dl.appendChild(h("dd", { class: (c[k] || 0) > 0 && k !== "assignments_claimed" ? "st st-failed" : "" }, c[k] ?? 0));
      }
    }
    if (changed("last-error", st.last_error)) {
      const le = st.last_error, box = $("last-error");
      box.replaceChildren();
      box.className = "mono small" + (le ? " st-failed" : "");
      if (!le) box.textContent = "none";
      else {
        box.appendChild(document.createTextNode(`${le.code || "error"}: ${le.message || ""} `));
        if (le.source === "run" && le.run_id) box.appendChild(h("a", { href: "#", class: "link", "data-run": le.run_id }, `run ${short(le.run_id, 13)} (${le.eval_key || ""})`));
        box.appendChild(document.createTextNode(" "));
        box.appendChild(when(le.at));
      }
    }
    if (changed("jail", st.jail)) {
      const box = $("jail"); box.replaceChildren();
      const jail = st.jail || {};
      for (const k of Object.keys(jail)) box.appendChild(h("span", { class: "chip " + (jail[k] ? "on" : "off"), title: jail[k] ? "active" : "unavailable" }, k.replace(/_/g, " ")));
    }
    renderTitle();
  }

  /* ---------- evaluators ---------- */
  function renderEvaluators(data) {
    const list = (data && data.evaluators) || [];
    $("evaluators-empty").hidden = list.length > 0;
    if (!changed("evaluators", list)) return;
    $("evaluators").replaceChildren(...list.map((e) => {
      const state = e.state || (e.alive === false ? "expired" : "alive");
      const stateTd = h("td", null, h("span", { class: "st st-" + cls(state) }, state));
      if (state === "failing") stateTd.append(" ", when(e.failing_since, "since"), h("div", { class: "sub mono" }, e.last_error || ""));
      if (state === "expired") stateTd.append(" ", when(e.expired_at));
      return h("tr", { class: state === "alive" ? "" : "row-" + cls(state) },
        h("td", null, e.name), h("td", null, e.version || "—"), h("td", { class: "mono" }, e.endpoint || "—"),
        h("td", null, (e.definitions || []).map((d) => d.eval_key).join(", ") || "—"),
        h("td", null, e.ttl_seconds != null ? `${e.ttl_seconds}s ` : "—", e.expires_at ? when(e.expires_at, "expires") : null),
        stateTd);
    }));
    labelCells($("evaluators"));
  }

  /* ---------- row selection: detail next to the row, keyboard ---------- */
  function makeRow(tr, id, open) {
    tr.tabIndex = 0;
    tr.setAttribute("data-id", id);
    tr.addEventListener("click", (ev) => { if (!ev.target.closest("a,button")) open(id); });
    tr.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); open(id); return; }
      if (ev.key !== "ArrowDown" && ev.key !== "ArrowUp") return;
      ev.preventDefault();
      let n = ev.key === "ArrowDown" ? tr.nextElementSibling : tr.previousElementSibling;
      while (n && n.classList.contains("detail-row")) n = ev.key === "ArrowDown" ? n.nextElementSibling : n.previousElementSibling;
      if (n) n.focus();
    });
    return tr;
  }
  /* Rebuilds tbody from rows, keeping keyboard focus, and puts `detail` (a
   * node) in a full-width row right after the selected one (or first when
   * the selected one is not on this page). */
  function fillRows(tbody, rows, selectedId, detail) {
    const focused = document.activeElement && tbody.contains(document.activeElement) ? document.activeElement.getAttribute("data-id") : null;
    tbody.replaceChildren(...rows);
    labelCells(tbody);
    placeDetail(tbody, selectedId, detail);
    if (focused) { const r = tbody.querySelector(`tr[data-id="${CSS.escape(focused)}"]`); if (r) r.focus(); }
  }
  function placeDetail(tbody, selectedId, detail) {
    for (const r of tbody.querySelectorAll("tr.selected")) r.classList.remove("selected");
    const old = tbody.querySelector("tr.detail-row");
    if (!selectedId || !detail) { if (old) old.remove(); return; }
    const cols = tbody.closest("table").querySelectorAll("thead th").length;
    const row = old || h("tr", { class: "detail-row" }, h("td", { colSpan: cols }));
    if (row.firstChild.firstChild !== detail) row.firstChild.replaceChildren(detail);
    const sel = tbody.querySelector(`tr[data-id="${CSS.escape(selectedId)}"]`);
    if (sel) { sel.classList.add("selected"); sel.after(row); } else tbody.prepend(row);
  }

  /* ---------- assignments ---------- */
  // A paged list (runs, assignments): its state holds the cursors of the pages
  // seen and the ids of its empty note, prev/next buttons and page label.
  function showPage(state, data, list) {
    const c = state.controls;
    state.next = data ? data.next_cursor : null;
    $(c.empty).hidden = list.length > 0;
    $(c.prev).disabled = state.page === 0;
    $(c.next).disabled = !state.next;
    text(c.info, `page ${state.page + 1}`);
  }
  function wirePager(state, key, load) {
    const go = (page) => { state.page = page; lastRendered.delete(key); load().catch(() => {}); };
    $(state.controls.next).addEventListener("click", () => {
      if (!state.next) return;
      state.cursors[state.page + 1] = state.next;
      go(state.page + 1);
    });
    $(state.controls.prev).addEventListener("click", () => { if (state.page > 0) go(state.page - 1); });
  }
  const asgState = { cursors: [null], page: 0, next: null, detail: null,
    controls: { empty: "assignments-empty", prev: "asg-prev", next: "asg-next", info: "asg-info" } };
  function counts(a) {
    const r = a.runs || {}, b = r.by_status || {};
    return { ok: b.succeeded || 0, bad: (b.failed || 0) + (b.timed_out || 0), skipped: r.skipped || 0,
      cancelled: (b.cancelled || 0) + (b.abandoned || 0), open: (b.planned || 0) + (b.running || 0) };
  }
  function countsCell(a) {
    const c = counts(a);
    const worst = c.bad ? "failed" : c.cancelled ? "skipped" : c.open ? "running" : "succeeded";
    const td = h("td", { class: "counts st-" + worst, title: `${c.ok} succeeded, ${c.bad} failed or timed out, ${c.skipped} skipped by their condition, ${c.cancelled} cancelled or abandoned, ${c.open} still open` },
      h("span", { class: "n-ok" }, `✓ ${c.ok}`), " ", h("span", { class: "n-bad" }, `✗ ${c.bad}`), " ", h("span", { class: "n-skip" }, `⊘ ${c.skipped}`));
    if (c.cancelled) td.append(` (+${c.cancelled} cancelled)`);
    if (c.open) td.append(` (+${c.open} open)`);
    return td;
  }
  async function loadAssignments() {
    const q = new URLSearchParams({ limit: "20" });
    const c = asgState.cursors[asgState.page];
    if (c) q.set("cursor", c);
    const data = await api("/v1/assignments?" + q.toString());
    const list = (data && data.assignments) || [];
    showPage(asgState, data, list);
    if (asgState.page === 0) fillPlayground(list);
    if (!changed("assignments", [list, view.asg])) return;
    fillRows($("assignments"), list.map((a) => makeRow(h("tr", null,
      h("td", { class: "mono", title: a.id }, short(a.id, 13)),
      h("td", null, a.session_id), h("td", null, a.agent_id), statusCell(a.status),
      h("td", null, a.lease_generation), countsCell(a),
      h("td", null, a.finished_at ? when(a.finished_at, "finished") : when(a.lease_expires_at, "lease"))), a.id, openAssignment)),
    view.asg, asgState.detail);
  }
  function fillPlayground(list) {
    if (!changed("play-assignments", list.map((a) => a.id))) return;
    const sel = $("play-assignment");
    const keep = sel.value;
    sel.replaceChildren(...list.map((a) => h("option", { value: a.id }, `${short(a.id, 13)} · ${a.session_id || ""}`)));
    if (keep && list.some((a) => a.id === keep)) sel.value = keep;
  }
  // Shows a table's detail panel (made once from its template) under row `id`
  // and records it in the URL as view[viewKey].
  function showDetail(state, viewKey, tplId, closeSel, onClose, tableId, id) {
    view[viewKey] = id; writeHash();
    if (!state.detail) {
      state.detail = $(tplId).content.firstElementChild.cloneNode(true);
      state.detail.querySelector(closeSel).addEventListener("click", onClose);
    }
    placeDetail($(tableId), id, state.detail);
    lastRendered.delete(tableId);
  }
  // A detail panel's data from path + id, or null once onError(message) has
  // shown why it could not be fetched.
  async function detailData(path, id, onError) {
    try { return await api(path + encodeURIComponent(id)); } catch (e) { onError(e.message); return null; }
  }
  async function openAssignment(id) {
    showDetail(asgState, "asg", "asg-detail-tpl", "#asg-detail-close", closeAssignment, "assignments", id);
    const a = await detailData("/v1/assignments/", id, (message) => {
      $("asg-detail-id").textContent = id;
      $("asg-timeline").replaceChildren(h("li", { class: "st-failed" }, message));
    });
    if (!a) return;
    $("asg-detail-id").textContent = a.id;
    const f = $("asg-detail-fields"); f.replaceChildren();
    for (const k of ["status", "session_id", "session_revision_id", "agent_id", "environment", "trigger_reason", "event_count", "lease_generation", "worker_id"]) field(f, k, a[k]);
    if (a.error_code) field(f, "error", `${a.error_code}: ${a.error_message || ""}`);
    const ev = [];
    const add = (at, what, st) => { if (at) ev.push({ at, what, st }); };
    add(a.claimed_at, `claimed (lease generation ${a.lease_generation})`);
    const pr = a.plan_request || {};
    const skipped = (pr.skipped || []).map((d) => `${d.eval_key} skipped (${d.reason_code || "condition"})`);
    add(a.planned_at, `conditions: ${(pr.selected || []).length} applied${skipped.length ? "; " + skipped.join(", ") : ""}`);
    add(a.planned_at, `plan accepted: ${(a.run_list || []).length} runs`);
    for (const r of a.run_list || []) {
      add(r.started_at, `run ${r.eval_key} started (${r.execution_mode})`);
      add(r.finished_at, `run ${r.eval_key} ${r.status} in ${ms(r.duration_ms)}${r.error_code ? " — " + r.error_code : ""}`, r.status);
    }
    const key = Object.fromEntries((a.run_list || []).map((r) => [r.id, r.eval_key]));
    for (const s of a.submissions || []) add(s.at, `result of ${key[s.run_id] || short(s.run_id)} submitted, attempt ${s.attempt}: ${s.outcome}${s.http_status ? " (HTTP " + s.http_status + ")" : ""}${s.error_code ? " — " + s.error_code : ""}`, s.outcome === "committed" ? "succeeded" : s.outcome === "retried" ? "timed_out" : "failed");
    const hb = a.heartbeats || { count: 0, recent: [] };
    field(f, "heartbeats", hb.count ? `${hb.count} (last ${utc(hb.last_at)})` : "none");
    const hbOlder = hb.count - (hb.recent || []).length;
    if (hbOlder > 0) add(hb.first_at, `first heartbeat (${hbOlder} heartbeat${hbOlder === 1 ? "" : "s"} before the last ${hb.recent.length} not listed)`);
    for (const b of hb.recent || []) add(b.at, b.outcome === "ok" ? `heartbeat ok${b.lease_expires_at ? ", lease extended to " + utc(b.lease_expires_at).slice(11, 19) : ""}` : `heartbeat ${b.outcome === "lease_lost" ? "lost the lease" : "failed"}${b.error_code ? " — " + b.error_code : ""}`, b.outcome === "ok" ? "" : "failed");
    add(a.finished_at, `assignment ${a.status}${a.error_code ? " — " + a.error_code : ""}`, a.status);
    if (!a.finished_at) add(a.lease_expires_at, `lease generation ${a.lease_generation} expires (renewed by heartbeats)`);
    ev.sort((x, y) => Date.parse(x.at) - Date.parse(y.at));
    $("asg-timeline").replaceChildren(...ev.map((e) => h("li", null,
      h("time", { title: utc(e.at), dateTime: e.at }, utc(e.at).slice(11, 23)), " ",
      h("span", { class: e.st ? "st-" + cls(e.st) : "" }, e.what))));
  }
  function closeAssignment() {
    view.asg = ""; writeHash();
    placeDetail($("assignments"), "", null);
    lastRendered.delete("assignments");
  }

  /* ---------- runs ---------- */
  const runsState = { cursors: [null], page: 0, next: null, detail: null,
    controls: { empty: "runs-empty", prev: "page-prev", next: "page-next", info: "page-info" } };
  const seenKeys = new Set();
  function runsQuery() {
    const q = new URLSearchParams({ limit: "50" });
    for (const k of ["status", "eval_key", "assignment"]) if (view[k]) q.set(k, view[k]);
    const c = runsState.cursors[runsState.page];
    if (c) q.set("cursor", c);
    return "/v1/runs?" + q.toString();
  }
  function runsError(msg) {
    const b = $("runs-error");
    b.hidden = !msg;
    if (msg) { b.textContent = `The runs could not be loaded: ${msg}`; $("runs").replaceChildren(); $("runs-empty").hidden = true; lastRendered.delete("runs"); }
  }
  async function loadRuns() {
    let data;
    try { data = await api(runsQuery()); } catch (e) {
      if (e.status) runsError(e.message);
      throw e;
    }
    runsError("");
    const list = (data && data.runs) || [];
    showPage(runsState, data, list);
    for (const r of list) seenKeys.add(r.eval_key);
    if (changed("eval-keys", [...seenKeys])) $("eval-keys").replaceChildren(...[...seenKeys].sort().map((k) => h("option", { value: k })));
    if (!changed("runs", [list, view.run])) return;
    fillRows($("runs"), list.map((r) => makeRow(h("tr", { "data-run": r.id, class: r.status === "failed" || r.status === "timed_out" ? "row-failed" : "" },
      h("td", { class: "mono", title: r.id }, short(r.id, 13)),
      h("td", null, r.eval_key), h("td", null, r.eval_version), h("td", null, r.execution_mode),
      statusCell(r.status), h("td", null, when(r.started_at)), h("td", null, ms(r.duration_ms)),
      h("td", { class: "st-failed" }, r.error_code || "")), r.id, openRun)),
    view.run, runsState.detail);
  }
  function field(dl, k, v) { dl.appendChild(h("dt", null, k)); dl.appendChild(h("dd", null, v == null || v === "" ? "—" : typeof v === "object" ? v : String(v))); }
  async function openRun(id) {
    showDetail(runsState, "run", "run-detail-tpl", "#detail-close", closeRun, "runs", id);
    const r = await detailData("/v1/runs/", id, (message) => {
      $("detail-id").textContent = id;
      $("detail-fields").replaceChildren();
      $("detail-results").replaceChildren();
      $("detail-error").textContent = message;
    });
    if (!r || view.run !== id) return;
    $("detail-id").textContent = r.id;
    const f = $("detail-fields"); f.replaceChildren();
    for (const k of ["assignment_id", "eval_key", "eval_version", "execution_mode", "status"]) field(f, k, r[k]);
    field(f, "started", when(r.started_at)); field(f, "finished", when(r.finished_at));
    field(f, "duration", ms(r.duration_ms));
    field(f, "timeout", r.timeout_seconds != null ? `${r.timeout_seconds} s (as applied)` : null);
    field(f, "summary", r.summary);
    $("detail-results").replaceChildren(...(r.results || []).map((it) => h("tr", null,
      h("td", { class: "mono" }, it.result_key), h("td", null, it.result_kind),
      h("td", null, it.numeric_value ?? it.text_value ?? ""), h("td", null, it.bool_value == null ? "" : String(it.bool_value)),
      h("td", null, it.unit || ""), h("td", null, it.display_value || ""), h("td", null, it.description || ""),
      h("td", null, it.reasoning || ""), h("td", null, (it.labels || []).join(", ")))));
    labelCells($("detail-results"));
    $("detail-error").textContent = r.error_code ? `${r.error_code}: ${r.error_message || ""}` : "none";
    $("detail-error").className = "mono" + (r.error_code ? " st-failed" : "");
    const s = $("detail-submission"); s.replaceChildren();
    const sub = r.submission || {};
    for (const k of ["submission_id", "status", "attempts_count", "error_code", "error_message"]) field(s, k, sub[k]);
    for (const a of sub.attempts || []) field(s, `attempt ${a.attempt}`, h("span", null, when(a.at), ` ${a.outcome || ""} ${a.http_status || ""} ${a.duration_ms != null ? ms(a.duration_ms) : ""} ${a.error_code || ""}`));
  }
  function closeRun() {
    view.run = ""; writeHash();
    placeDetail($("runs"), "", null);
    lastRendered.delete("runs");
  }

  /* ---------- charts ---------- */
  function renderStats(st) {
    if (!st || !changed("stats", [st, view.window])) return;
    const minutes = Number(view.window);
    const per = st.minutes || [];
    const size = minutes <= 60 ? 1 : minutes <= 360 ? 5 : 15; /* minutes per bar */
    text("bucket-label", size === 1 ? "minute" : `${size} minutes`);
    const names = ["succeeded", "failed", "timed_out", "cancelled"];
    const buckets = [];
    for (let i = 0; i < per.length; i += size) {
      const part = per.slice(i, i + size);
      const b = { t: part[0].t, n: {} };
      for (const n of names) b.n[n] = part.reduce((a, p) => a + (p[n] || 0), 0);
      for (const m of ["python", "local"]) for (const q of ["p50_ms", "p99_ms"]) {
        const v = part.map((p) => (p.modes && p.modes[m] ? p.modes[m][q] : null)).filter((x) => x != null);
        b[m + q] = v.length ? Math.max(...v) : null;
      }
      buckets.push(b);
    }
    const labels = buckets.map((b) => String(b.t || "").slice(11, 16));
    const opts = { partialLast: true, unitX: "UTC" };
    window.FpsChart.stackedBars($("chart-throughput"), $("legend-throughput"), labels,
      names.map((n) => ({ name: n, color: STATUS_COLORS[n], values: buckets.map((b) => b.n[n]) })), opts);
    window.FpsChart.lines($("chart-latency"), $("legend-latency"), labels, [
      { name: "managed p50", color: "#2f6fd6", values: buckets.map((b) => b.pythonp50_ms) },
      { name: "managed p99", color: "#6f42c1", values: buckets.map((b) => b.pythonp99_ms) },
      { name: "local p50", color: "#1f9d55", values: buckets.map((b) => b.localp50_ms) },
      { name: "local p99", color: "#d98c12", values: buckets.map((b) => b.localp99_ms) }], "ms", opts);
    const total = buckets.reduce((a, b) => a + names.reduce((x, n) => x + b.n[n], 0), 0);
    const bad = buckets.reduce((a, b) => a + b.n.failed + b.n.timed_out, 0);
    const span = minutes < 60 ? `${minutes} minutes` : `${minutes / 60} h`;
    const fr = $("failure-rate");
    const which = st.eval_key ? ` of ${st.eval_key}` : "";
    fr.textContent = total ? `failed or timed out: ${(100 * bad / total).toFixed(1)}% of ${total} runs${which} in the last ${span}` : `no run${which} finished in the last ${span}`;
    fr.className = "sub" + (bad ? " st-failed" : "");
  }

  function statsQuery() {
    const q = new URLSearchParams({ minutes: view.window, by: "mode" });
    if (view.chart_key) q.set("eval_key", view.chart_key);
    return "/v1/stats?" + q.toString();
  }
  function loadStats() { return api(statsQuery()).then(renderStats); }

  /* ---------- outbox ---------- */
  function renderOutbox(data) {
    const list = (data && data.pending) || [];
    $("outbox-empty").hidden = list.length > 0;
    if (!changed("outbox", list)) return;
    $("outbox-rows").replaceChildren(...list.map((o) => h("tr", { class: o.last_error_code ? "row-failed" : "" },
      h("td", { class: "mono", title: o.run_id }, short(o.run_id, 13)), h("td", null, o.eval_key || "—"),
      h("td", null, when(o.queued_at)), h("td", null, duration(o.age_seconds)), h("td", null, o.attempts),
      h("td", null, when(o.last_attempt_at)),
      h("td", { class: "st-failed" }, o.last_error_code ? `${o.last_error_code}: ${o.last_error_message || ""}` : ""))));
    labelCells($("outbox-rows"));
  }

  /* ---------- logs ---------- */
  let logsAfter = 0;
  const logs = [];
  function renderLogs(data) {
    for (const e of (data && data.entries) || []) { logs.push(e); logsAfter = Math.max(logsAfter, e.seq); }
    if (logs.length > 100) logs.splice(0, logs.length - 100);
    $("logs-empty").hidden = logs.length > 0;
    if (!changed("logs", logsAfter)) return;
    $("logs").replaceChildren(...logs.slice().reverse().map((e) => {
      const x = e.entry || {};
      const rest = Object.keys(x).filter((k) => !["ts", "level", "msg"].includes(k)).map((k) => `${k}=${typeof x[k] === "string" ? x[k] : JSON.stringify(x[k])}`).join(" ");
      return h("li", { class: "log-" + cls(x.level) }, when(x.ts), " ", h("span", { class: "chip" }, x.level), " ", h("b", null, x.msg), " ", h("span", { class: "mono small" }, rest));
    }));
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
      const r = await adminCall("/v1/evaluate", { method: "POST", body });
      const good = r && r.ok;
      status.className = "play-status " + (good ? "ok" : "bad");
      if (good) status.textContent = "ok";
      else {
        let msg = `${r.stage || "error"}: ${r.message || r.error_type || ""}`;
        if (r.line) msg += ` (line ${r.line}, column ${r.column})`;
        status.textContent = msg;
      }
      result.textContent = JSON.stringify(r, null, 2);
    } catch (e) {
      status.className = "play-status bad"; status.textContent = e.message; result.textContent = "";
    }
  }

  /* ---------- drain, pause, outage ---------- */
  async function toggleDrain() {
    const draining = lastStatus && lastStatus.draining;
    if (!draining && !window.confirm("Drain this sidecar? It stops claiming new assignments and finishes the ones in flight. You can resume claiming afterwards.")) return;
    try {
      await adminCall("/v1/drain", { method: draining ? "DELETE" : "POST", body: {} });
    } catch (e) { window.alert(`${draining ? "Resume" : "Drain"} failed: ${e.message}`); }
    poll();
  }
  let paused = false;
  function togglePause() {
    paused = !paused;
    $("paused").hidden = !paused;
    text("refresh-toggle", paused ? "resume" : "pause");
    $("refresh-toggle").setAttribute("aria-pressed", String(paused));
    if (!paused) poll();
  }
  const outage = { down: false, asOf: null };
  function renderOutage() {
    const b = $("outage");
    b.hidden = !outage.down;
    $("conn").className = outage.down ? "conn down" : "conn";
    $("conn").title = outage.down ? "cannot reach the sidecar" : "connected";
    if (outage.down && !b.firstChild) {
      b.append("The sidecar cannot be reached. The data below is as of ");
      b.appendChild(outage.asOf ? h("b", { title: utc(outage.asOf) }, utc(outage.asOf).slice(11, 19) + " UTC") : h("b", null, "never"));
      b.append(" (");
      b.appendChild(outage.asOf ? when(outage.asOf) : document.createTextNode("—"));
      b.append("); retrying.");
    }
    if (!outage.down) b.replaceChildren();
    renderTitle();
  }

  /* ---------- wiring ---------- */
  let meta = null;
  async function loadMeta() {
    meta = await api("/v1/meta");
    const sel = $("filter-status");
    sel.replaceChildren(h("option", { value: "" }, "any"), ...meta.run_statuses.map((s) => h("option", { value: s }, s.replace(/_/g, " "))));
    sel.value = view.status;
  }
  let polling = false, pollCount = 0;
  async function poll() {
    if (polling) return;
    polling = true;
    try {
      if (!meta) await loadMeta().catch(() => {});
      const status = api("/v1/status");
      const tasks = [
        status.then(renderStatus),
        api("/v1/evaluators").then(renderEvaluators),
        api(`/v1/logs?after=${logsAfter}`).then(renderLogs),
        api("/v1/outbox?limit=20").then(renderOutbox),
      ];
      /* the long windows read more runs: every fifth poll is enough */
      if (Number(view.window) <= 60 || pollCount % 5 === 0) tasks.push(loadStats());
      pollCount++;
      if (asgState.page === 0) tasks.push(loadAssignments());
      if (runsState.page === 0) tasks.push(loadRuns());
      for (const p of panels) tasks.push(p.poll(status));
      const results = await Promise.allSettled(tasks);
      const down = results.some((r) => r.status === "rejected" && !(r.reason && r.reason.status));
      if (!down) outage.asOf = new Date().toISOString();
      if (down !== outage.down) { outage.down = down; $("outage").replaceChildren(); }
      renderOutage();
    } finally { polling = false; }
  }
  function applyView() {
    $("filter-status").value = view.status;
    $("filter-key").value = view.eval_key;
    $("filter-assignment").value = view.assignment;
    $("chart-window").value = view.window;
    $("chart-key").value = view.chart_key;
    runsState.cursors = [null]; runsState.page = 0;
    lastRendered.clear();
    if (view.run) openRun(view.run); else closeRun();
    if (view.asg) openAssignment(view.asg); else closeAssignment();
    for (const p of panels) p.applyView();
  }
  function applyFilters(ev) {
    if (ev) ev.preventDefault();
    view.status = $("filter-status").value;
    view.eval_key = $("filter-key").value.trim();
    view.assignment = $("filter-assignment").value.trim();
    writeHash();
    runsState.cursors = [null]; runsState.page = 0;
    lastRendered.delete("runs");
    loadRuns().catch(() => {});
  }
  /* Panels in files of their own (backtest.js) register {poll(status), applyView}
   * here before the page loads, and use the helpers this file owns; poll
   * gets the poll's GET /v1/status as a promise. */
  const panels = [];
  window.FpsApp = { h, api, adminCall, when, short, cls, changed, labelCells, view, writeHash, panels };
  document.addEventListener("DOMContentLoaded", () => {
    readHash();
    $("run-filters").addEventListener("submit", applyFilters);
    $("filter-status").addEventListener("change", applyFilters);
    $("filter-clear").addEventListener("click", () => { $("filter-status").value = ""; $("filter-key").value = ""; $("filter-assignment").value = ""; applyFilters(); });
    wirePager(runsState, "runs", loadRuns);
    wirePager(asgState, "assignments", loadAssignments);
    $("chart-window").addEventListener("change", () => { view.window = $("chart-window").value; writeHash(); loadStats().catch(() => {}); });
    $("chart-key").addEventListener("change", () => { view.chart_key = $("chart-key").value.trim(); writeHash(); loadStats().catch(() => {}); });
    $("refresh-toggle").addEventListener("click", togglePause);
    $("drain-toggle").addEventListener("click", toggleDrain);
    $("last-error").addEventListener("click", (ev) => {
      const a = ev.target.closest("a[data-run]");
      if (!a) return;
      ev.preventDefault();
      $("filter-status").value = ""; $("filter-key").value = ""; $("filter-assignment").value = "";
      applyFilters();
      openRun(a.getAttribute("data-run"));
    });
    window.addEventListener("hashchange", () => { readHash(); applyView(); });
    $("play-form").addEventListener("submit", runPlayground);
    $("play-transcript-src").addEventListener("change", () => {
      const paste = $("play-transcript-src").value === "paste";
      $("play-transcript").hidden = !paste; $("play-assignment").hidden = paste;
    });
    applyView();
    poll();
    setInterval(() => { if (!paused) poll(); }, POLL_MS);
    setInterval(tickTimes, 1000);
  });
})();

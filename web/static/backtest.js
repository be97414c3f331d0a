/* failproofai-sidecar admin page: the Backtest panel.
 *
 * Owns the panel's view of /v1/backtests: the form that starts one (from a
 * definition of the current catalog, its source editable, or from pasted
 * definitions; the baseline and the session filters the API takes), the
 * open backtest's progress, summary, histogram of primary-score deltas and
 * changed sessions (regressions first, both outcomes side by side, a link to
 * the session's live runs), and the list of recent backtests. The open
 * backtest is view.bt in the URL's fragment, so it can be linked.
 *
 * The catalog is GET /v1/catalog: the managed definitions of the newest
 * assignments, each with the evaluator source its newest stored run
 * received (one whose source was never received is listed, disabled).
 * Everything from the API reaches the DOM as text (app.js's h()), never as
 * markup. Registers itself with app.js (window.FpsApp.panels). */
"use strict";
(function () {
  const A = window.FpsApp;
  const { h, api, adminCall, when, short, cls, changed, labelCells, view, writeHash } = A;
  const $ = (id) => document.getElementById(id);
  const ACTIVE = new Set(["queued", "running"]);
  const ROWS_CAP = 5000; /* rows read for the histogram and the changes */
  const SHOWN = 200; /* changed sessions listed */
  const KIND = { pass_to_fail: "pass → fail", new_error: "new error", fail_to_pass: "fail → pass", fixed_error: "fixed error", changed: "changed" };
  const RANK = { pass_to_fail: 0, new_error: 0, fail_to_pass: 1, fixed_error: 1, changed: 2 };

  let catalog = [], catalogLoading = null;
  let open = null; /* the open backtest's document */
  let rows = [], rowsOf = "", rowsTotal = 0;

  function fmt(v) { return v == null ? "—" : String(Math.round(v * 10000) / 10000); }
  function showError(msg) { const b = $("bt-error"); b.hidden = !msg; b.textContent = msg || ""; }

  /* ---------- the catalog (GET /v1/catalog) ---------- */
  async function loadCatalog() {
    const cat = (await api("/v1/catalog")).definitions || [];
    catalog = cat.filter((d) => d.definition).map((d) => d.definition);
    const unseen = cat.filter((d) => !d.definition);
    const sel = $("bt-from"), keep = sel.value;
    sel.replaceChildren(...catalog.map((d) => h("option", { value: "def:" + d.eval_key }, `${d.eval_key} v${d.eval_version} (catalog)`)),
      ...(catalog.length > 1 ? [h("option", { value: "all" }, "every catalog definition")] : []),
      /* no stored run received its source: nothing to start from */
      ...unseen.map((d) => h("option", { value: "unseen:" + d.eval_key, disabled: true, title: "no stored run of this version received its source" },
        `${d.eval_key} v${d.eval_version} (source not seen yet)`)),
      h("option", { value: "paste" }, "pasted definitions"));
    if ([...sel.options].some((o) => o.value === keep) && keep !== "paste") sel.value = keep;
    else if (!$("bt-defs").value.trim() && catalog.length) { sel.value = "def:" + catalog[0].eval_key; fillFrom(); }
    else sel.value = "paste";
  }
  function ensureCatalog(force) {
    if (catalogLoading && !force) return catalogLoading;
    catalogLoading = loadCatalog().catch(() => { catalogLoading = null; });
    return catalogLoading;
  }
  function fillFrom() {
    const v = $("bt-from").value;
    const defs = v === "all" ? catalog : v.startsWith("def:") ? catalog.filter((d) => "def:" + d.eval_key === v) : null;
    if (defs) $("bt-defs").value = JSON.stringify(defs, null, 2);
  }

  /* ---------- start and cancel ---------- */
  async function start(ev) {
    ev.preventDefault();
    showError("");
    let defs;
    try { defs = JSON.parse($("bt-defs").value); } catch (e) { showError(`The definitions are not valid JSON: ${e.message}`); return; }
    if (!Array.isArray(defs)) defs = [defs];
    const body = { definitions: defs };
    const base = $("bt-baseline").value;
    if (base === "none") body.baseline = null;
    else if (base === "catalog") {
      const keys = new Set(defs.map((d) => d && d.eval_key));
      body.baseline = catalog.filter((d) => keys.has(d.eval_key));
      if (!body.baseline.length) { showError("None of these eval keys is in the catalog: choose another baseline."); return; }
    } else body.baseline = "production";
    const since = $("bt-since").value.trim(), limit = $("bt-limit").value.trim();
    if (since) body.since = since;
    if (limit) body.limit = Number(limit);
    $("bt-start").disabled = true;
    try {
      const doc = await adminCall("/v1/backtests", { method: "POST", body });
      view.bt = doc.id; writeHash();
      show(doc);
    } catch (e) { showError(`The backtest could not start: ${e.message}`); } finally { $("bt-start").disabled = false; }
  }
  async function cancel() {
    if (!open) return;
    try { show(await adminCall("/v1/backtests/" + encodeURIComponent(open.id), { method: "DELETE", body: {} })); } catch (e) { showError(`Cancel failed: ${e.message}`); }
  }

  /* ---------- the open backtest ---------- */
  function show(doc) {
    const first = !open || open.id !== doc.id;
    open = doc;
    const p = doc.progress || { done: 0, total: 0 };
    const bar = $("bt-progress");
    bar.hidden = false; bar.max = Math.max(1, p.total); bar.value = p.done;
    $("bt-state").textContent = `${short(doc.id)}: ${doc.state}, ${p.done} / ${p.total} sessions`;
    $("bt-state").className = "sub st st-" + cls(doc.state === "done" ? "succeeded" : doc.state);
    $("bt-cancel").hidden = !ACTIVE.has(doc.state);
    /* a run that could not go on says why, and has no summary */
    const failure = $("bt-failure");
    failure.hidden = doc.state !== "failed";
    failure.textContent = doc.state === "failed" ? `Backtest ${short(doc.id)} failed: ${doc.error || "no reason was recorded"}` : "";
    const link = $("bt-link"); link.hidden = false; link.href = "#bt=" + encodeURIComponent(doc.id);
    if (first) { $("bt-result").hidden = true; rows = []; rowsOf = ""; }
    if (doc.state === "done" && doc.summary) renderSummary(doc);
  }
  async function loadOpen() {
    const id = view.bt;
    if (!id) return;
    if (open && open.id === id && !ACTIVE.has(open.state) && (open.state !== "done" || rowsOf === id)) return;
    let doc;
    try { doc = await api("/v1/backtests/" + encodeURIComponent(id)); } catch (e) {
      if (!e.status) throw e;
      if (view.bt === id) { showError(`Backtest ${id}: ${e.message}`); $("bt-result").hidden = true; }
      return;
    }
    if (view.bt !== id) return;
    show(doc);
    if (doc.state === "done" && rowsOf !== id) await loadRows(id);
  }
  async function loadRows(id) {
    const got = [];
    let cursor = null, total = 0;
    do {
      const q = new URLSearchParams({ limit: "500" });
      if (cursor) q.set("cursor", cursor);
      const page = await api(`/v1/backtests/${encodeURIComponent(id)}/results?${q}`);
      got.push(...(page.rows || []));
      total = page.total || 0; cursor = page.next_cursor;
    } while (cursor && got.length < ROWS_CAP);
    if (view.bt !== id) return;
    rows = got; rowsOf = id; rowsTotal = total;
    renderRows();
  }
  function renderSummary(doc) {
    $("bt-result").hidden = false;
    const s = doc.summary;
    const defs = (doc.definitions || []).map((d) => `${d.eval_key} v${d.eval_version ?? "?"}`).join(", ");
    const base = doc.baseline === "production" ? "production" : doc.baseline == null ? "no baseline" : "definitions";
    $("bt-meta").textContent = `${s.sessions} sessions · candidate ${defs} · baseline ${base} · started ${doc.created_at || ""}`;
    if (!changed("bt-summary", [doc.id, s])) return;
    const cell = (field, v, bad) => h("td", { "data-field": field, class: bad && v > 0 ? "st st-failed" : "" }, v);
    $("bt-summary").replaceChildren(...(s.eval_keys || []).map((k) => h("tr", { "data-key": k.eval_key },
      h("td", { class: "mono", "data-field": "eval_key" }, k.eval_key), cell("sessions", k.sessions), cell("evaluated", k.evaluated),
      h("td", { "data-field": "skipped", title: "candidate / baseline skipped by their condition" }, `${k.skipped} / ${k.skipped_baseline}`),
      cell("no_baseline", k.no_baseline), cell("changed", k.changed), cell("pass_to_fail", k.pass_to_fail, true),
      cell("fail_to_pass", k.fail_to_pass), cell("new_errors", k.new_errors, true), cell("fixed_errors", k.fixed_errors),
      h("td", { "data-field": "errors", title: topErrors(k) }, `${k.errors.baseline} → ${k.errors.candidate}`),
      cell("mean_abs_delta", fmt(k.mean_abs_delta)), cell("max_abs_delta", fmt(k.max_abs_delta)))));
    labelCells($("bt-summary"));
    $("bt-input-errors").replaceChildren(...(s.input_errors || []).map((e) => h("li", { class: "log-error" },
      h("span", { class: "chip" }, "input error"), " ", h("span", { class: "mono small" }, e.source), " ", e.message)));
    const sel = $("bt-key"), keep = sel.value;
    sel.replaceChildren(h("option", { value: "" }, "all eval keys"), ...(s.eval_keys || []).map((k) => h("option", { value: k.eval_key }, k.eval_key)));
    sel.value = (s.eval_keys || []).some((k) => k.eval_key === keep) ? keep : "";
  }
  function topErrors(k) {
    const f = (l) => (l || []).map((e) => `${e.error_type} ×${e.count}`).join(", ") || "none";
    return `baseline: ${f(k.top_errors && k.top_errors.baseline)}; candidate: ${f(k.top_errors && k.top_errors.candidate)}`;
  }

  /* The comparison's classes, as the engine counts them (backtest.h). */
  function isError(o) { return !!o && (o.status === "failed" || o.status === "timed_out"); }
  function primary(o, key) { return o && o.status === "succeeded" ? (o.results || []).find((r) => r.result_key === key) : undefined; }
  function passValue(o, key) {
    const it = primary(o, key);
    if (!it || !it.result_kind || it.result_kind === "metric") return -1;
    return typeof it.bool_value === "boolean" ? (it.bool_value ? 1 : 0) : -1;
  }
  function kindOf(r) {
    const b = r.baseline, c = r.candidate;
    let kind = "changed";
    if (b && !isError(b) && isError(c)) kind = "new_error";
    if (b && isError(b) && !isError(c)) kind = "fixed_error";
    const pb = passValue(b, r.eval_key), pc = passValue(c, r.eval_key);
    if (pb === 1 && pc === 0) kind = "pass_to_fail";
    if (pb === 0 && pc === 1) kind = "fail_to_pass";
    return kind;
  }
  function delta(r) { const d = (r.deltas || {})[r.eval_key]; return typeof d === "number" ? d : null; }
  function outcomeCell(o, key) {
    if (!o) return h("td", { class: "sub" }, "none");
    const it = primary(o, key);
    const td = h("td", null, h("span", { class: "st st-" + cls(o.status) }, o.status));
    if (it) td.append(" ", h("b", null, it.numeric_value ?? it.text_value ?? (it.bool_value == null ? "" : String(it.bool_value))),
      it.bool_value == null || it.result_kind === "assertion" ? "" : it.bool_value ? " passed" : " not passed");
    if (o.error_type) td.append(" ", h("span", { class: "st-failed" }, o.error_type));
    if (o.skip_reason) td.append(" ", h("span", { class: "sub" }, o.skip_reason));
    if (o.summary) td.append(h("div", { class: "sub" }, o.summary));
    return td;
  }
  function renderRows() {
    const key = $("bt-key").value;
    const withDelta = rows.filter((r) => (!key || r.eval_key === key) && delta(r) != null).map(delta);
    const box = $("bt-histogram");
    if (withDelta.length) window.FpsChart.histogram(box, withDelta, 20, "Δ");
    else box.replaceChildren(h("p", { class: "empty" }, "No row has a primary numeric result on both sides."));
    const ch = rows.filter((r) => r.changed && (!key || r.eval_key === key)).map((r) => ({ r, kind: kindOf(r), d: delta(r) }));
    ch.sort((x, y) => RANK[x.kind] - RANK[y.kind] || Math.abs(y.d ?? 0) - Math.abs(x.d ?? 0)
      || (x.r.session_id < y.r.session_id ? -1 : x.r.session_id > y.r.session_id ? 1 : 0));
    $("bt-changes").replaceChildren(...ch.slice(0, SHOWN).map(({ r, kind, d }) => {
      const q = new URLSearchParams({ bt: rowsOf, eval_key: r.eval_key });
      if (r.assignment_id) q.set("assignment", r.assignment_id);
      return h("tr", { class: RANK[kind] === 0 ? "row-failed" : "", "data-session": r.session_id, "data-key": r.eval_key, "data-kind": kind },
        h("td", { class: "mono" }, r.session_id), h("td", null, r.eval_key),
        h("td", { class: "st-" + (RANK[kind] === 0 ? "failed" : RANK[kind] === 1 ? "succeeded" : "running") }, KIND[kind]),
        outcomeCell(r.baseline, r.eval_key), outcomeCell(r.candidate, r.eval_key), h("td", null, d == null ? "—" : (d > 0 ? "+" : "") + fmt(d)),
        h("td", null, r.assignment_id ? h("a", { class: "link bt-runs", href: "#" + q.toString(), title: `the live runs of assignment ${r.assignment_id}` }, "live runs") : "—"));
    }));
    labelCells($("bt-changes"));
    const capped = rows.length < rowsTotal ? ` (of the first ${rows.length} of ${rowsTotal} rows)` : "";
    $("bt-changes-note").textContent = ch.length === 0 ? `No session changed${capped}.`
      : ch.length > SHOWN ? `${SHOWN} of ${ch.length} changed sessions shown${capped}.` : `${ch.length} changed session${ch.length === 1 ? "" : "s"}${capped}.`;
  }

  /* ---------- the list, and the panel's part of the poll ---------- */
  function renderList(list) {
    $("bt-list-empty").hidden = list.length > 0;
    if (!changed("bt-list", [list, view.bt])) return;
    $("bt-list").replaceChildren(...list.map((b) => {
      const tr = h("tr", { "data-id": b.id, class: b.id === view.bt ? "selected" : "" },
        h("td", { class: "mono", title: b.id }, short(b.id, 13)), h("td", null, when(b.created_at)),
        h("td", null, h("span", { class: "st st-" + cls(b.state === "done" ? "succeeded" : b.state), title: b.error || "" }, b.state)),
        h("td", null, `${(b.progress || {}).done ?? 0} / ${(b.progress || {}).total ?? 0}`));
      tr.tabIndex = 0;
      const go = () => { view.bt = b.id; writeHash(); showError(""); A.changed("bt-list", null); loadOpen().catch(() => {}); };
      tr.addEventListener("click", go);
      tr.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); go(); } });
      return tr;
    }));
    labelCells($("bt-list"));
  }
  function setAvailable(ok, msg) {
    $("bt-unavailable").hidden = ok;
    if (!ok) $("bt-unavailable").textContent = msg;
    for (const id of ["bt-form", "bt-list"]) $(id).closest(id === "bt-list" ? "table" : "form").hidden = !ok;
  }
  /* Backtests run over the transcript archive: without it (status.archive
   * null) the panel says so and asks nothing of /v1/backtests. */
  async function poll(status) {
    const st = await status;
    if (!st.archive) {
      setAvailable(false, "Backtests run over the transcript archive, which is off: run the sidecar with --archive-max-mb N to keep the transcripts it evaluates.");
      return;
    }
    const list = (await api("/v1/backtests")).backtests || [];
    setAvailable(true);
    if (!catalogLoading) ensureCatalog();
    renderList(list);
    await loadOpen();
  }
  function applyView() {
    if (!view.bt) { open = null; rows = []; rowsOf = ""; $("bt-result").hidden = true; $("bt-progress").hidden = true; $("bt-state").textContent = ""; $("bt-cancel").hidden = true; $("bt-link").hidden = true; $("bt-failure").hidden = true; return; }
    if (open && open.id !== view.bt) open = null;
    loadOpen().catch(() => {});
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("bt-form").addEventListener("submit", start);
    $("bt-cancel").addEventListener("click", cancel);
    $("bt-from").addEventListener("change", fillFrom);
    $("bt-reload").addEventListener("click", () => ensureCatalog(true));
    $("bt-key").addEventListener("change", renderRows);
    $("bt-changes").addEventListener("click", (ev) => {
      /* the live runs open below: the fragment's filters apply (app.js), then scroll */
      if (ev.target.closest("a.bt-runs")) setTimeout(() => $("runs-panel").scrollIntoView(), 0);
    });
  });
  A.panels.push({ poll, applyView });
})();

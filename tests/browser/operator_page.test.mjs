// The admin page when things fail, in a real browser (Debian's chromium via
// playwright-core) against a real emulator, a real sidecar and two real local
// evaluators over loopback: one that answers every dispatch with a 500
// (failing), one that stops heartbeating (expired). A managed definition fails
// on some sessions. Screenshots at 1400 and 400 px go to tests/artifacts/.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ARTIFACTS, BIN, XSS, sleep, waitFor, getJSON, killAll, launchChromium, sendJSON as send, listenPort, start, startEmulator } from "./harness.mjs";

const TOKEN = "operator-test-token";

let browser, page, adminUrl, emuUrl, sidecar, evalServer;
const consoleErrors = [];

function transcript(n, events, who) {
  const t0 = "2026-11-29T10:00:00.000000Z";
  const ev = [];
  for (let i = 0; i < events; i++) ev.push({ id: `e${i}`, ts: t0, event_type: i % 2 ? "tool_use" : "agent_start", payload: { i } });
  return { schema_version: "2", assignment_id: `op-${n}`, session_id: who, session_revision_id: `rev-${n}`,
    agent_id: who, environment: "test", started_at: t0, ended_at: t0, event_count: events, events: ev };
}
const dataRows = (tbody) => `#${tbody} > tr[data-id]`;
async function noHorizontalScroll() {
  return page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth);
}

before(async () => {
  assert.ok(BIN, "FPS_BIN must name the failproofai-sidecar binary");
  mkdirSync(ARTIFACTS, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), "fps-operator-"));
  const defs = [
    { eval_key: "steady", eval_version: "1", display_name: "Steady", result_kind: "score", labels: [],
      condition_source: "session.event_count > 3", evaluator_source: "EvalResult(score=Score(1.0))", timeout_seconds: 5 },
    { eval_key: "flaky", eval_version: "1", display_name: "Flaky", result_kind: "score", labels: [],
      condition_source: null, evaluator_source: "EvalResult(score=Score(2.0 if session.event_count % 2 == 0 else 1.0))", timeout_seconds: null },
  ];
  emuUrl = await startEmulator(start, dir, TOKEN, defs, ["--sessions", "0", "--poll-seconds", "1", "--heartbeat-seconds", "2"]);

  // A local evaluator that answers every dispatch with a 500, after 2.5 s:
  // longer than the heartbeat interval, so every assignment heartbeats.
  evalServer = http.createServer((req, res) => { req.resume(); req.on("end", () => setTimeout(() => { res.writeHead(500, { "Content-Type": "application/json" }); res.end("{}"); }, 2500)); });
  await new Promise((r) => evalServer.listen(0, "127.0.0.1", r));

  sidecar = start(["run", "--server", emuUrl, "--listen", "127.0.0.1:0", "--db", join(dir, "sidecar.db"),
    "--worker-id", "operator-test-worker", "--insecure-open-admin"], { FAILPROOFAI_EVALUATOR_TOKEN: TOKEN });
  adminUrl = `http://127.0.0.1:${await listenPort(sidecar, "the sidecar's admin API")}`;
  await waitFor(() => getJSON(`${adminUrl}/v1/status`), "the sidecar");
  const endpoint = `http://127.0.0.1:${evalServer.address().port}/run`;
  let r = await send("PUT", `${adminUrl}/v1/evaluators/broken-judge`, { version: "1.0", endpoint, ttl_seconds: 600,
    definitions: [{ eval_key: "judged", eval_version: "1" }] });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  r = await send("PUT", `${adminUrl}/v1/evaluators/short-lived`, { version: XSS.slice(0, 60), endpoint, ttl_seconds: 1,
    definitions: [{ eval_key: "brief", eval_version: "1" }] });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  // wait until the catalog with "judged" is registered, then add sessions
  await waitFor(async () => (await getJSON(`${adminUrl}/v1/evaluators`)).evaluators.some((e) => e.state === "expired"), "short-lived to expire");
  await waitFor(async () => (await fetch(`${adminUrl}/readyz`)).ok, "ready after the catalog change");
  for (let i = 0; i < 6; i++) {
    const s = await fetch(`${emuUrl}/emulator/v1/sessions`, { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(transcript(i, 3 + i, i === 0 ? XSS : `session-${i}`)) });
    assert.ok(s.ok, `adding a session: HTTP ${s.status}`);
  }
  await waitFor(async () => {
    const a = (await getJSON(`${adminUrl}/v1/assignments?limit=50`)).assignments;
    return a.length === 6 && a.every((x) => x.finished_at && x.runs.pending_submissions === 0);
  }, "six finished assignments");

  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on("console", (m) => { if (m.type() === "error" && !/Failed to load resource/.test(m.text())) consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  page.on("dialog", (d) => d.accept());
  await page.goto(adminUrl + "/", { waitUntil: "load" });
  await page.waitForFunction((sel) => document.querySelectorAll(sel).length > 0, dataRows("runs"));
});

after(async () => {
  if (browser) await browser.close();
  if (evalServer) evalServer.close();
  killAll();
});

test("the status filter is built from /v1/meta", async () => {
  const meta = await getJSON(`${adminUrl}/v1/meta`);
  await page.waitForFunction(() => document.querySelectorAll("#filter-status option").length > 1);
  const values = await page.$$eval("#filter-status option", (os) => os.map((o) => o.value));
  assert.deepEqual(values, ["", ...meta.run_statuses]);
  assert.ok(values.includes("planned") && values.includes("abandoned") && !values.includes("pending"));
});

test("failures are visible: assignment counts, last error, lifetime counters, tab title", async () => {
  await page.waitForFunction(() => document.querySelector("#assignments td.counts.st-failed") !== null);
  const cell = await page.textContent("#assignments td.counts.st-failed");
  assert.match(cell, /✗ [1-9]/);
  await page.waitForFunction(() => /eval_error|evaluator_unavailable/.test(document.getElementById("last-error").textContent));
  assert.match(await page.textContent("#counters"), /leases lost\s*0/);
  assert.match(await page.title(), /not ready|ready/);
  assert.match(await page.textContent("#failure-rate"), /failed or timed out: \d+\.\d% of \d+ runs/);
});

test("failing and expired local evaluators are shown as such", async () => {
  await page.waitForFunction(() => /failing/.test(document.getElementById("evaluators").textContent));
  const rows = await page.$$eval("#evaluators tr", (trs) => trs.map((t) => t.textContent));
  const broken = rows.find((t) => t.startsWith("broken-judge"));
  assert.match(broken, /failing since \d+s ago/);
  assert.match(broken, /eval_error: /);
  assert.ok(rows.some((t) => t.startsWith("short-lived") && /expired/.test(t)), rows.join("\n"));
});

test("charts mark the partial minute, say UTC and switch windows", async () => {
  await page.waitForSelector("#chart-throughput svg rect.partial");
  assert.equal(await page.textContent("#chart-throughput svg text.axis-unit"), "UTC");
  assert.match(await page.textContent("#legend-throughput"), /in progress/);
  await page.selectOption("#chart-window", "15");
  await page.waitForFunction(() => /15 minutes/.test(document.getElementById("failure-rate").textContent));
  assert.match(page.url(), /window=15/);
  await page.selectOption("#chart-window", "1440");
  await page.waitForFunction(() => document.getElementById("bucket-label").textContent === "15 minutes");
  await page.selectOption("#chart-window", "60");
  assert.match(await page.textContent("#legend-latency"), /managed p50.*local p99/);
  await page.fill("#chart-key", "flaky");
  await page.dispatchEvent("#chart-key", "change");
  await page.waitForFunction(() => /runs of flaky in the last/.test(document.getElementById("failure-rate").textContent));
  assert.match(page.url(), /chart_key=flaky/);
  await page.fill("#chart-key", "");
  await page.dispatchEvent("#chart-key", "change");
});

test("an assignment opens next to its row with its timeline", async () => {
  await page.click("#assignments td.counts.st-failed");
  await page.waitForFunction(() => document.querySelectorAll("#asg-timeline li").length >= 5);
  const timeline = await page.textContent("#asg-timeline");
  for (const want of [/claimed \(lease generation 1\)/, /conditions: \d applied/, /plan accepted: \d runs/, /run flaky failed/, /submitted, attempt 1: committed/, /heartbeat ok, lease extended to \d\d:\d\d:\d\d/, /assignment completed/])
    assert.match(timeline, want);
  assert.match(await page.textContent("#asg-detail-fields"), /heartbeats[1-9]\d* \(last \d{4}-\d\d-\d\d /);
  const adjacent = await page.evaluate(() => {
    const d = document.querySelector("#assignments > tr.detail-row");
    return d && d.previousElementSibling && d.previousElementSibling.classList.contains("selected");
  });
  assert.ok(adjacent, "the detail row follows the selected row");
  await page.screenshot({ path: join(ARTIFACTS, "operator-assignment-1400.png"), fullPage: true });
  await page.click("#asg-detail-close");
});

test("keyboard: arrows move between rows, Enter opens the detail next to the row", async () => {
  await page.focus(`${dataRows("runs")} >> nth=0`);
  await page.keyboard.press("ArrowDown");
  const second = await page.evaluate(() => document.activeElement.getAttribute("data-id"));
  const ids = await page.$$eval("#runs > tr[data-id]", (trs) => trs.map((t) => t.getAttribute("data-id")));
  assert.equal(second, ids[1]);
  await page.keyboard.press("Enter");
  await page.waitForFunction((id) => document.getElementById("detail-id") && document.getElementById("detail-id").textContent === id, second);
  const prev = await page.evaluate(() => document.querySelector("#runs > tr.detail-row").previousElementSibling.getAttribute("data-id"));
  assert.equal(prev, second);
  await page.click("#detail-close");
});

test("deep link: filters and the opened run survive a reload", async () => {
  await page.fill("#filter-key", "flaky");
  await page.selectOption("#filter-status", "failed");
  await page.waitForFunction(() => [...document.querySelectorAll("#runs > tr[data-id]")].every((t) => t.children[4].textContent === "failed" && t.children[1].textContent === "flaky")
    && document.querySelectorAll("#runs > tr[data-id]").length > 0);
  const id = await page.getAttribute("#runs > tr[data-id] >> nth=0", "data-id");
  await page.click("#runs > tr[data-id] >> nth=0");
  await page.waitForFunction((x) => document.getElementById("detail-id") && document.getElementById("detail-id").textContent === x, id);
  const url = page.url();
  assert.match(url, /status=failed/);
  assert.match(url, /eval_key=flaky/);
  assert.match(url, new RegExp(`run=${id}`));
  await page.reload({ waitUntil: "load" });
  await page.waitForFunction((x) => document.getElementById("detail-id") && document.getElementById("detail-id").textContent === x, id);
  assert.equal(await page.inputValue("#filter-status"), "failed");
  assert.equal(await page.inputValue("#filter-key"), "flaky");
  assert.match(await page.textContent("#detail-error"), /eval_error: evaluation raised ValueError/);
  assert.match(await page.textContent("#detail-fields"), /30 s \(as applied\)/);
  await page.click("#detail-close");
  await page.click("#filter-clear");
  assert.doesNotMatch(page.url(), /status=|run=|eval_key=/);
});

test("a failed request shows an error banner and clears the stale table", async () => {
  await page.goto(adminUrl + "/#status=bogus", { waitUntil: "load" });
  await page.waitForSelector("#runs-error:not([hidden])");
  assert.match(await page.textContent("#runs-error"), /invalid_request: .*status must be one of/);
  assert.equal(await page.$$eval("#runs > tr", (t) => t.length), 0);
  await page.click("#filter-clear");
  await page.waitForSelector("#runs-error", { state: "hidden" });
  await page.waitForFunction(() => document.querySelectorAll("#runs > tr[data-id]").length > 0);
});

test("relative times tick while refresh is paused; paused means no requests", async () => {
  const s = await fetch(`${emuUrl}/emulator/v1/sessions`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify(transcript(99, 3, "fresh-session")) });
  assert.ok(s.ok);
  await page.waitForFunction(() => /^\d+s ago$/.test((document.querySelector("#runs time[data-ts]") || {}).textContent || ""));
  await page.click("#refresh-toggle");
  await page.waitForSelector("#paused:not([hidden])");
  let requests = 0;
  const count = (r) => { if (r.url().includes("/v1/")) requests++; };
  page.on("request", count);
  const sel = "#runs time[data-ts]";
  const before = await page.textContent(sel);
  await page.waitForFunction(([s, b]) => document.querySelector(s).textContent !== b, [sel, before], { timeout: 5000 });
  assert.match(await page.getAttribute(sel, "title"), /UTC$/);
  await sleep(2500);
  page.off("request", count);
  assert.equal(requests, 0, "no polling while paused");
  await page.click("#refresh-toggle");
  await page.waitForSelector("#paused", { state: "hidden" });
});

test("the outbox view says nothing waits once every result is in", async () => {
  await page.waitForSelector("#outbox-empty:not([hidden])");
  assert.equal(await page.$$eval("#outbox-rows tr", (t) => t.length), 0);
  assert.match(await page.textContent("#outbox-panel h2"), /oldest first/);
});

test("the log tail lists warnings and errors", async () => {
  await page.waitForFunction(() => document.querySelectorAll("#logs li").length > 0);
  assert.match(await page.textContent("#logs"), /local run failed|missed its TTL/);
});

test("drain with confirmation, then resume", async () => {
  await page.click("#drain-toggle");
  await page.waitForSelector("#drain-badge:not([hidden])");
  await page.waitForFunction(() => /draining/.test(document.title));
  assert.equal((await getJSON(`${adminUrl}/v1/status`)).draining, true);
  await page.waitForFunction(() => document.getElementById("drain-toggle").textContent === "resume claiming");
  await page.click("#drain-toggle");
  await page.waitForSelector("#drain-badge", { state: "hidden" });
  assert.equal((await getJSON(`${adminUrl}/v1/status`)).draining, false);
});

test("XSS payloads in new fields render inert", async () => {
  const asg = (await getJSON(`${adminUrl}/v1/assignments?limit=50`)).assignments.find((a) => a.session_id === XSS);
  assert.ok(asg, "the XSS session's assignment");
  await page.goto(`${adminUrl}/#asg=${asg.id}`, { waitUntil: "load" });
  await page.waitForFunction(() => document.querySelectorAll("#asg-timeline li").length > 0);
  assert.ok((await page.textContent("#asg-detail-fields")).includes(XSS.slice(0, 30)));
  // three events: the steady definition's condition did not apply
  assert.match(await page.textContent("#asg-timeline"), /conditions: \d applied; steady skipped \(condition_false\)/);
  assert.match(await page.textContent(`#assignments > tr[data-id="${asg.id}"] td.counts`), /⊘ 1/);
  assert.ok((await page.textContent("#evaluators")).includes(XSS.slice(0, 30)));
  await sleep(300);
  assert.equal(await page.evaluate(() => window.__xss), undefined, "no injected script ran");
  assert.equal(await page.evaluate(() => document.querySelectorAll("img, main script").length), 0);
});

test("400 px: stacked cards, no horizontal scroll; dark mode", async () => {
  await page.goto(adminUrl + "/", { waitUntil: "load" });
  await page.waitForFunction(() => document.querySelectorAll("#runs > tr[data-id]").length > 0);
  await page.screenshot({ path: join(ARTIFACTS, "operator-1400.png"), fullPage: true });
  assert.ok(await noHorizontalScroll(), "no horizontal overflow at 1400 px");
  await page.setViewportSize({ width: 400, height: 800 });
  await page.click("#runs > tr[data-id] >> nth=0");
  await page.waitForSelector("#run-detail");
  // The stacked layout labels each cell with its column: wait for the first
  // row's label rather than for a fixed time (a refresh may rebuild the rows
  // under a slow build), then report what it was if it never came.
  const label = () => {
    const td = document.querySelector("#runs > tr[data-id] > td");
    return td ? getComputedStyle(td, "::before").content : "(no row)";
  };
  await page
    .waitForFunction((want) => {
      const td = document.querySelector("#runs > tr[data-id] > td");
      return td !== null && getComputedStyle(td, "::before").content === want;
    }, '"run"', { timeout: 15000 })
    .catch(() => {});
  assert.equal(await page.evaluate(label), '"run"');
  assert.ok(await noHorizontalScroll(), "no horizontal overflow at 400 px");
  await page.screenshot({ path: join(ARTIFACTS, "operator-400.png"), fullPage: true });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: join(ARTIFACTS, "operator-400-top.png") });
  await page.$eval("#run-detail", (d) => d.scrollIntoView({ block: "center" }));
  await page.screenshot({ path: join(ARTIFACTS, "operator-400-detail.png") });
  await page.emulateMedia({ colorScheme: "dark" });
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(bg, "rgb(16, 21, 28)");
  assert.ok(await noHorizontalScroll(), "no horizontal overflow in dark mode");
  await page.screenshot({ path: join(ARTIFACTS, "operator-400-dark.png"), fullPage: true });
  await page.emulateMedia({ colorScheme: "light" });
  await page.setViewportSize({ width: 1400, height: 900 });
  assert.deepEqual(consoleErrors, []);
});

test("when the sidecar stops, a banner says the data is as of when it was last reached", async () => {
  sidecar.kill("SIGKILL");
  await page.waitForSelector("#outage:not([hidden])", { timeout: 15000 });
  assert.match(await page.textContent("#outage"), /cannot be reached\. The data below is as of \d\d:\d\d:\d\d UTC \(\d+s ago\)/);
  assert.match(await page.title(), /unreachable/);
  assert.ok(await page.$$eval("#runs > tr[data-id]", (t) => t.length) > 0, "the last data stays, marked");
  await page.screenshot({ path: join(ARTIFACTS, "operator-outage-1400.png"), fullPage: false });
});

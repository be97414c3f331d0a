// The admin page in a real browser: Debian's chromium driven by
// playwright-core, against a real emulator and a real sidecar over loopback.
// Screenshots go to tests/artifacts/ (look at them).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ARTIFACTS, BIN, XSS, sleep, waitFor, getJSON, killAll, launchChromium, listenPort, start, startEmulator } from "./harness.mjs";

const TOKEN = "browser-test-token";

let browser, page, adminUrl, emuUrl, xssAssignment;
const consoleErrors = [];


function transcript(id, payloadText) {
  const t0 = "2026-11-29T10:00:00.000000Z";
  return {
    schema_version: "2", assignment_id: id, session_id: "xss-session", session_revision_id: "rev-xss",
    agent_id: "agent-<b>bold</b>", environment: "test", started_at: t0, ended_at: "2026-11-29T10:01:00.000000Z",
    event_count: 3,
    events: [
      { id: "e1", ts: t0, event_type: "agent_start", payload: { note: payloadText } },
      { id: "e2", ts: t0, event_type: "tool_use", payload: { tool_name: payloadText } },
      { id: "e3", ts: "2026-11-29T10:01:00.000000Z", event_type: "agent_end", payload: { summary: payloadText } },
    ],
  };
}

before(async () => {
  assert.ok(BIN, "FPS_BIN must name the failproofai-sidecar binary");
  mkdirSync(ARTIFACTS, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), "fps-browser-"));
  const defs = [
    { eval_key: "tool_count", eval_version: "1", display_name: "Tool count", result_kind: "score", labels: ["tools"],
      condition_source: null, evaluator_source: 'EvalResult(score=Score(min(1.0, session.count("tool_use") / 10)), summary="tools used")', timeout_seconds: 10 },
    { eval_key: "echo_summary", eval_version: "1", display_name: "Echo summary", result_kind: "score", labels: [],
      condition_source: null, evaluator_source: 'EvalResult(score=Score(1.0, description=str(session.events[-1].payload.get("summary", "none"))[:900]), summary=str(session.events[-1].payload.get("summary", "none"))[:900])', timeout_seconds: 10 },
    { eval_key: "always_fails", eval_version: "1", display_name: "Always fails", result_kind: "score", labels: [],
      condition_source: null, evaluator_source: "EvalResult(score=Score(1 / 0))", timeout_seconds: 10 },
  ];
  emuUrl = await startEmulator(start, dir, TOKEN, defs, ["--sessions", "12", "--seed", "7", "--poll-seconds", "1"]);
  const r = await fetch(`${emuUrl}/emulator/v1/sessions`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify(transcript("xss-assignment", XSS)) });
  assert.ok(r.ok, `adding the XSS session: HTTP ${r.status}`);
  xssAssignment = (await r.json()).assignment_id;
  assert.ok(xssAssignment, "the emulator names the new assignment");

  const sc = start(["run", "--server", emuUrl, "--listen", "127.0.0.1:0", "--db", join(dir, "sidecar.db"),
    "--worker-id", "browser-test-worker", "--insecure-open-admin"], { FAILPROOFAI_EVALUATOR_TOKEN: TOKEN });
  adminUrl = `http://127.0.0.1:${await listenPort(sc, "the sidecar's admin API")}`;
  await waitFor(async () => (await getJSON(`${adminUrl}/v1/runs?limit=500`)).runs.length >= 30, "runs in the sidecar");

  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  await page.goto(adminUrl + "/", { waitUntil: "load" });
});

after(async () => {
  if (browser) await browser.close();
  killAll();
});

test("the page loads, fills its tables and logs no console error", async () => {
  await page.waitForFunction(() => document.querySelectorAll("#runs > tr[data-id]").length > 0);
  await page.waitForFunction(() => document.querySelectorAll("#assignments > tr[data-id]").length > 0);
  await page.waitForFunction(() => document.getElementById("worker-id").textContent === "browser-test-worker");
  await page.waitForFunction(() => document.querySelector("#chart-throughput svg rect") !== null);
  assert.equal(await page.textContent("#reg-state"), "registered");
  // the memory card: the tree as measured, and the budget /v1/status reports
  const mem = (await getJSON(`${adminUrl}/v1/status`)).memory;
  await page.waitForFunction(() => /\d/.test(document.getElementById("memory-tree").textContent));
  const budget = await page.textContent("#memory-budget");
  if (mem.budget_bytes == null) assert.equal(budget, "no budget");
  else assert.match(budget, /^[0-9.]+ (B|KiB|MiB|GiB)$/);
  await page.screenshot({ path: join(ARTIFACTS, "admin-overview.png"), fullPage: true });
  assert.deepEqual(consoleErrors, []);
});

test("the page is served with a strict Content-Security-Policy", async () => {
  const r = await fetch(adminUrl + "/");
  const csp = r.headers.get("content-security-policy") || "";
  assert.match(csp, /default-src 'self'/);
  assert.equal(r.headers.get("x-content-type-options"), "nosniff");
});

test("a status filter narrows the runs", async () => {
  const all = await page.$$eval("#runs > tr[data-id]", (rows) => rows.length);
  await page.selectOption("#filter-status", "failed");
  await page.waitForFunction(() => [...document.querySelectorAll("#runs > tr[data-id] > td:nth-child(5)")].every((td) => td.textContent === "failed")
    && document.querySelectorAll("#runs > tr[data-id]").length > 0);
  const failed = await page.$$eval("#runs > tr[data-id] > td:nth-child(5)", (tds) => tds.map((t) => t.textContent));
  assert.ok(failed.length > 0 && failed.length < all, `failed ${failed.length} of ${all}`);
  await page.fill("#filter-key", "always_fails");
  await page.click("#run-filters button[type=submit]");
  await page.waitForFunction(() => [...document.querySelectorAll("#runs > tr[data-id] > td:nth-child(2)")].every((td) => td.textContent === "always_fails"));
  await page.screenshot({ path: join(ARTIFACTS, "admin-filtered.png"), fullPage: false });
  await page.click("#filter-clear");
  await page.waitForFunction((n) => document.querySelectorAll("#runs > tr[data-id]").length >= n, all);
});

test("a run's detail opens with its results and error", async () => {
  await page.fill("#filter-key", "always_fails");
  await page.click("#run-filters button[type=submit]");
  await page.waitForFunction(() => document.querySelectorAll("#runs > tr[data-id]").length > 0
    && [...document.querySelectorAll("#runs > tr[data-id] > td:nth-child(2)")].every((td) => td.textContent === "always_fails"));
  await page.click("#runs > tr[data-id] >> nth=0");
  await page.waitForSelector("#run-detail:not([hidden])");
  assert.match(await page.textContent("#detail-error"), /eval_error: evaluation raised ZeroDivisionError/);
  await page.click("#filter-clear");
  await page.fill("#filter-key", "tool_count");
  await page.click("#run-filters button[type=submit]");
  await page.waitForFunction(() => document.querySelectorAll("#runs > tr[data-id]").length > 0
    && [...document.querySelectorAll("#runs > tr[data-id] > td:nth-child(2)")].every((td) => td.textContent === "tool_count"));
  await page.click("#runs > tr[data-id] >> nth=0");
  await page.waitForFunction(() => document.querySelectorAll("#detail-results tr").length > 0);
  assert.equal(await page.textContent("#detail-results tr:first-child td:first-child"), "tool_count");
  await page.screenshot({ path: join(ARTIFACTS, "admin-run-detail.png"), fullPage: true });
  await page.click("#detail-close");
  await page.click("#filter-clear");
});

test("the playground returns a result and an error", async () => {
  await page.fill("#play-source", 'EvalResult(score=Score(0.5), summary=f"{session.event_count} events")');
  await page.click("#play-run");
  await page.waitForFunction(() => document.getElementById("play-status").textContent === "ok");
  assert.match(await page.textContent("#play-result"), /"result_key": "q"/);
  await page.fill("#play-source", "(lambda: 1)()");
  await page.click("#play-run");
  await page.waitForFunction(() => /compile/.test(document.getElementById("play-status").textContent));
  assert.match(await page.textContent("#play-status"), /disallowed syntax: Lambda/);
  await page.screenshot({ path: join(ARTIFACTS, "admin-playground.png"), fullPage: false });
});

test("a session whose payloads hold <script> and <img onerror> renders inert", async () => {
  await page.fill("#filter-key", "echo_summary");
  await page.click("#run-filters button[type=submit]");
  // Find the run of the XSS session and open it: its description and summary are the payload.
  const runs = await waitFor(async () => {
    const l = (await getJSON(`${adminUrl}/v1/runs?eval_key=echo_summary&assignment=${xssAssignment}&limit=10`)).runs;
    return l.length > 0 && l[0].status === "succeeded" ? l : null;
  }, "the XSS session's evaluation");
  assert.equal(runs.length, 1);
  await page.fill("#filter-assignment", xssAssignment);
  await page.click("#run-filters button[type=submit]");
  await page.waitForFunction(() => document.querySelectorAll("#runs > tr[data-id]").length === 1);
  await page.click("#runs > tr[data-id] >> nth=0");
  // The panel may still hold the previously opened run: wait for this one.
  await page.waitForFunction(() => document.getElementById("detail-results").textContent.includes("echo_summary"));
  const shown = await page.textContent("#detail-results");
  assert.ok(shown.includes(XSS.slice(0, 40)), "the payload is shown as text");
  // Also through the playground, as a raw value taken from the transcript.
  await page.check('input[name="kind"][value="raw"]');
  await page.fill("#play-source", 'session.events[0].payload["note"]');
  await page.selectOption("#play-transcript-src", "paste");
  await page.fill("#play-transcript", JSON.stringify(transcript("xss-playground", XSS)));
  await page.click("#play-run");
  await page.waitForFunction(() => document.getElementById("play-status").textContent === "ok");
  assert.ok((await page.textContent("#play-result")).includes("onerror"));
  await sleep(500);
  assert.equal(await page.evaluate(() => window.__xss), undefined, "no injected script ran");
  assert.equal(await page.evaluate(() => document.querySelectorAll("img, main script").length), 0);
  await page.screenshot({ path: join(ARTIFACTS, "admin-xss-inert.png"), fullPage: true });
  assert.deepEqual(consoleErrors, []);
});

// The admin page's Backtest panel end to end: a real emulator and a real
// sidecar with the transcript archive on and its admin token required;
// Debian's chromium starts a backtest of changed catalog definitions from
// the page (the token asked for once), watches it finish, and the summary,
// the histogram and the changed sessions it shows are checked against the
// API's own answers (GET /v1/backtests/{id} and its /results). Then the
// deep link, the recent list and a changed session's live runs.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ARTIFACTS, BIN, XSS, waitFor, getJSON, killAll, launchChromium, listenPort, start, startEmulator } from "./harness.mjs";

const TOKEN = "backtest-page-token";
const ADMIN = "admin-token-of-the-backtest-page";
const SESSIONS = 12;
const TOOLS = 'session.count("tool_use")';
// v1 as the catalog serves them; the page edits them into v2 (below).
const DEFS = [
  { eval_key: "gate", eval_version: "1", display_name: "Gate", result_kind: "score", labels: [], condition_source: null,
    evaluator_source: `EvalResult(score=Score(min(1.0, ${TOOLS} / 10), passed=${TOOLS} >= 3))`, timeout_seconds: 10 },
  { eval_key: "crashy", eval_version: "1", display_name: "Crashy", result_kind: "score", labels: [], condition_source: null,
    evaluator_source: "EvalResult(score=Score(1.0))", timeout_seconds: 10 },
  { eval_key: "hostile", eval_version: "1", display_name: "Hostile", result_kind: "score", labels: [], condition_source: null,
    evaluator_source: 'EvalResult(score=Score(1.0), summary="plain")', timeout_seconds: 10 },
  { eval_key: "steady", eval_version: "1", display_name: "Steady", result_kind: "score", labels: [], condition_source: null,
    evaluator_source: `EvalResult(score=Score(min(1.0, ${TOOLS} / 20)))`, timeout_seconds: 10 },
  // its condition selects no session: the catalog lists it without a source
  { eval_key: "unseen", eval_version: "3", display_name: "Unseen", result_kind: "assertion", labels: [],
    condition_source: 'session.count("no_such_event") > 0', evaluator_source: "EvalResult(assertions={'unseen': Assertion(True)})",
    timeout_seconds: 5 },
];
const SEEN = DEFS.filter((d) => d.condition_source === null);
// v2: a tighter threshold, a KeyError on odd tool counts, a hostile summary, no change.
const V2 = {
  gate: `EvalResult(score=Score(min(1.0, ${TOOLS} / 10), passed=${TOOLS} >= 5))`,
  crashy: `EvalResult(score=Score(1.0 if ${TOOLS} % 2 == 0 else {}["missing"]))`,
  hostile: `EvalResult(score=Score(1.0), summary='${XSS}')`,
};

let browser, page, adminUrl, btId, dir;
const consoleErrors = [], prompts = [];

async function apiRows(id, changedOnly) {
  const rows = [];
  let cursor = null;
  do {
    const q = new URLSearchParams({ limit: "500" });
    if (changedOnly) q.set("changed", "true");
    if (cursor) q.set("cursor", cursor);
    const p = await getJSON(`${adminUrl}/v1/backtests/${id}/results?${q}`);
    rows.push(...p.rows);
    cursor = p.next_cursor;
  } while (cursor);
  return rows;
}

before(async () => {
  assert.ok(BIN, "FPS_BIN must name the failproofai-sidecar binary");
  mkdirSync(ARTIFACTS, { recursive: true });
  dir = mkdtempSync(join(tmpdir(), "fps-backtest-page-"));
  writeFileSync(join(dir, "admin.token"), ADMIN + "\n", { mode: 0o600 });
  const emuUrl = await startEmulator(start, dir, TOKEN, DEFS, ["--sessions", String(SESSIONS), "--seed", "7", "--poll-seconds", "1"]);
  const sc = start(["run", "--server", emuUrl, "--listen", "127.0.0.1:0", "--db", join(dir, "sidecar.db"),
    "--admin-token-file", join(dir, "admin.token"), "--archive-max-mb", "32"], { FAILPROOFAI_EVALUATOR_TOKEN: TOKEN });
  adminUrl = `http://127.0.0.1:${await listenPort(sc, "the sidecar's admin API")}`;
  // every session evaluated, its runs stored and its transcript archived
  await waitFor(async () => {
    const st = await getJSON(`${adminUrl}/v1/status`);
    const asg = (await getJSON(`${adminUrl}/v1/assignments?limit=100`)).assignments;
    return st.archive && st.archive.entries === SESSIONS && st.archive.queued === 0
      && asg.length === SESSIONS && asg.every((a) => a.status === "completed");
  }, "every session evaluated and archived");

  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  page.on("dialog", (d) => { if (d.type() === "prompt") { prompts.push(d.message()); d.accept(ADMIN); } else d.accept(); });
  await page.goto(adminUrl + "/", { waitUntil: "load" });
});

after(async () => {
  if (browser) await browser.close();
  killAll();
});

test("the panel offers the catalog's definitions with their sources", async () => {
  // GET /v1/catalog: every definition the emulator serves, the one never selected without a source
  const cat = (await getJSON(`${adminUrl}/v1/catalog`)).definitions;
  assert.deepEqual(cat.map((d) => d.eval_key), DEFS.map((d) => d.eval_key).sort());
  assert.deepEqual(cat.filter((d) => d.definition).map((d) => d.definition),
    [...SEEN].sort((a, b) => (a.eval_key < b.eval_key ? -1 : 1)));
  await page.waitForFunction((n) => document.querySelectorAll("#bt-from option[value^='def:']").length === n, SEEN.length);
  const options = await page.$$eval("#bt-from option", (os) => os.map((o) => [o.value, o.textContent, o.disabled]));
  assert.deepEqual(options, [
    ...cat.filter((d) => d.definition).map((d) => [`def:${d.eval_key}`, `${d.eval_key} v${d.eval_version} (catalog)`, false]),
    ["all", "every catalog definition", false],
    ...cat.filter((d) => !d.definition).map((d) => [`unseen:${d.eval_key}`, `${d.eval_key} v${d.eval_version} (source not seen yet)`, true]),
    ["paste", "pasted definitions", false]]);
  // the first one fills the text area, as the catalog has it
  assert.deepEqual(JSON.parse(await page.inputValue("#bt-defs")), [cat[0].definition]);
  await page.selectOption("#bt-from", "all");
  assert.deepEqual(JSON.parse(await page.inputValue("#bt-defs")), cat.filter((d) => d.definition).map((d) => d.definition));
});

test("definitions that are not JSON get a precise error, and nothing starts", async () => {
  const before = (await getJSON(`${adminUrl}/v1/backtests`)).backtests.length;
  const text = await page.inputValue("#bt-defs");
  await page.fill("#bt-defs", text.slice(0, -3));
  await page.click("#bt-start");
  await page.waitForSelector("#bt-error:not([hidden])");
  assert.match(await page.textContent("#bt-error"), /not valid JSON/);
  assert.equal((await getJSON(`${adminUrl}/v1/backtests`)).backtests.length, before);
  await page.fill("#bt-defs", text);
});

test("a backtest started from the page shows what the API reports", async () => {
  // edit the catalog's sources into v2, as a user would in the text area
  const edited = JSON.parse(await page.inputValue("#bt-defs")).map((d) =>
    V2[d.eval_key] ? { ...d, eval_version: "2", evaluator_source: V2[d.eval_key] } : d);
  await page.fill("#bt-defs", JSON.stringify(edited, null, 2));
  await page.selectOption("#bt-baseline", "production");
  await page.click("#bt-start");
  await page.waitForFunction(() => /^#bt=/.test(location.hash));
  assert.equal(prompts.length, 1, "the admin token is asked for once");
  btId = decodeURIComponent((await page.evaluate(() => location.hash)).slice(4));
  // the progress shows, then the summary once done
  await page.waitForSelector("#bt-progress:not([hidden])");
  await page.waitForFunction((n) => document.querySelectorAll("#bt-summary tr").length === n, SEEN.length, { timeout: 120000 });
  await page.waitForFunction(() => document.querySelectorAll("#bt-histogram rect.bar").length > 0);
  const doc = await getJSON(`${adminUrl}/v1/backtests/${btId}`);
  assert.equal(doc.state, "done");
  assert.deepEqual(doc.progress, { done: SESSIONS, total: SESSIONS });
  assert.match(await page.textContent("#bt-state"), new RegExp(`done, ${SESSIONS} / ${SESSIONS} sessions`));
  const s = doc.summary;
  assert.equal(s.sessions, SESSIONS);

  // the summary table, cell by cell
  const shown = await page.$$eval("#bt-summary tr", (trs) => trs.map((tr) =>
    Object.fromEntries([...tr.querySelectorAll("td[data-field]")].map((td) => [td.getAttribute("data-field"), td.textContent]))));
  const fmt = (v) => (v == null ? "—" : String(Math.round(v * 10000) / 10000));
  assert.deepEqual(shown, s.eval_keys.map((k) => ({
    eval_key: k.eval_key, sessions: String(k.sessions), evaluated: String(k.evaluated), skipped: `${k.skipped} / ${k.skipped_baseline}`,
    no_baseline: String(k.no_baseline), changed: String(k.changed), pass_to_fail: String(k.pass_to_fail), fail_to_pass: String(k.fail_to_pass),
    new_errors: String(k.new_errors), fixed_errors: String(k.fixed_errors), errors: `${k.errors.baseline} → ${k.errors.candidate}`,
    mean_abs_delta: fmt(k.mean_abs_delta), max_abs_delta: fmt(k.max_abs_delta) })));
  // the known differences: flips for the threshold, new errors for the KeyError, none for the unchanged
  const by = Object.fromEntries(s.eval_keys.map((k) => [k.eval_key, k]));
  assert.ok(by.gate.pass_to_fail > 0, "the tighter threshold flips some sessions");
  assert.ok(by.crashy.new_errors > 0 && by.crashy.errors.baseline === 0, "the KeyError is a new error");
  assert.equal(by.hostile.changed, SESSIONS);
  assert.equal(by.steady.changed, 0);

  // the changed sessions: the same (session, eval_key) set as the API's, kinds as its counts
  const apiChanged = await apiRows(btId, true);
  const rows = await page.$$eval("#bt-changes tr", (trs) => trs.map((tr) => ({
    session: tr.getAttribute("data-session"), key: tr.getAttribute("data-key"), kind: tr.getAttribute("data-kind") })));
  assert.deepEqual(rows.map((r) => `${r.key}/${r.session}`).sort(), apiChanged.map((r) => `${r.eval_key}/${r.session_id}`).sort());
  assert.equal(rows.length, s.eval_keys.reduce((a, k) => a + k.changed, 0));
  for (const k of s.eval_keys) {
    const mine = rows.filter((r) => r.key === k.eval_key);
    assert.equal(mine.filter((r) => r.kind === "pass_to_fail").length, k.pass_to_fail, `${k.eval_key} pass→fail`);
    assert.equal(mine.filter((r) => r.kind === "new_error").length, k.new_errors, `${k.eval_key} new errors`);
    assert.equal(mine.filter((r) => r.kind === "fail_to_pass").length, k.fail_to_pass, `${k.eval_key} fail→pass`);
    assert.equal(mine.filter((r) => r.kind === "fixed_error").length, k.fixed_errors, `${k.eval_key} fixed errors`);
  }
  // regressions first
  const rank = { pass_to_fail: 0, new_error: 0, fail_to_pass: 1, fixed_error: 1, changed: 2 };
  const ranks = rows.map((r) => rank[r.kind]);
  assert.deepEqual(ranks, [...ranks].sort((a, b) => a - b));
  assert.equal(ranks[0], 0);
  // both outcomes side by side: a new error shows the baseline's status and the candidate's error type
  const ne = apiChanged.find((r) => r.eval_key === "crashy" && r.candidate.status === "failed");
  const cells = await page.$$eval(`#bt-changes tr[data-key="crashy"][data-session="${ne.session_id}"] td`, (tds) => tds.map((t) => t.textContent));
  assert.match(cells[3], new RegExp(`^${ne.baseline.status}`));
  assert.match(cells[4], new RegExp(`^failed.*${ne.candidate.error_type}`));

  // the histogram counts every row with a primary delta on both sides
  const all = await apiRows(btId, false);
  const withDelta = all.filter((r) => typeof (r.deltas || {})[r.eval_key] === "number").length;
  const bars = await page.$$eval("#bt-histogram rect.bar", (rs) => rs.reduce((a, r) => a + Number(r.getAttribute("data-n")), 0));
  assert.equal(bars, withDelta);
  assert.ok(withDelta > 0);

  // the hostile summary is shown as text, and ran nothing
  assert.ok((await page.textContent("#bt-changes")).includes(XSS.slice(0, 30)));
  assert.equal(await page.evaluate(() => window.__xss), undefined, "no injected script ran");
  assert.equal(await page.evaluate(() => document.querySelectorAll("#backtest-panel img, #backtest-panel script").length), 0);
  await page.locator("#backtest-panel").screenshot({ path: join(ARTIFACTS, "admin-backtest.png") });
});

test("the recent list has the backtest, and its deep link opens it in a new tab", async () => {
  await page.waitForFunction((id) => !!document.querySelector(`#bt-list tr[data-id="${id}"]`), btId);
  const list = (await getJSON(`${adminUrl}/v1/backtests`)).backtests;
  assert.deepEqual(await page.$$eval("#bt-list tr", (trs) => trs.map((t) => t.getAttribute("data-id"))), list.map((b) => b.id));
  const other = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
  other.on("pageerror", (e) => consoleErrors.push(String(e)));
  await other.goto(`${adminUrl}/#bt=${encodeURIComponent(btId)}`, { waitUntil: "load" });
  await other.waitForFunction(() => document.querySelectorAll("#bt-changes tr").length > 0);
  assert.equal(await other.textContent("#bt-summary"), await page.textContent("#bt-summary"));
  assert.equal(await other.$$eval("#bt-changes tr", (t) => t.length), await page.$$eval("#bt-changes tr", (t) => t.length));
  await other.close();
});

test("a changed session opens its live runs", async () => {
  const first = await page.$eval("#bt-changes tr", (tr) => ({ session: tr.getAttribute("data-session"), key: tr.getAttribute("data-key") }));
  await page.click("#bt-changes tr >> nth=0 >> a.bt-runs");
  await page.waitForFunction(() => document.getElementById("filter-assignment").value !== "");
  const asg = await page.inputValue("#filter-assignment");
  assert.equal((await getJSON(`${adminUrl}/v1/assignments/${asg}`)).session_id, first.session);
  assert.equal(await page.inputValue("#filter-key"), first.key);
  await page.waitForFunction((key) => {
    const tds = [...document.querySelectorAll("#runs > tr[data-id] > td:nth-child(2)")];
    return tds.length > 0 && tds.every((td) => td.textContent === key);
  }, first.key);
  const live = (await getJSON(`${adminUrl}/v1/runs?assignment=${asg}&eval_key=${first.key}`)).runs.map((r) => r.id);
  assert.deepEqual(await page.$$eval("#runs > tr[data-id]", (trs) => trs.map((t) => t.getAttribute("data-id"))), live);
  // the backtest stays open beside them
  assert.match(await page.evaluate(() => location.hash), new RegExp(`bt=${btId}`));
  assert.ok(await page.isVisible("#bt-result"));
  // the one 401 is the start before the token was asked for
  assert.deepEqual(consoleErrors.filter((e) => !/status of 401/.test(e)), []);
  assert.equal(consoleErrors.length, 1);
});

test("a backtest whose archive cannot be read shows why it failed", async () => {
  // the archive moved away under the running sidecar (its writer keeps the files it has open)
  const archive = join(dir, "sidecar.db.archive");
  const moved = ["", "-wal", "-shm"].filter((ext) => existsSync(archive + ext));
  for (const ext of moved) renameSync(archive + ext, archive + ext + ".away");
  try {
    await page.selectOption("#bt-from", "def:steady");
    await page.click("#bt-start");
    await page.waitForFunction((old) => { const id = new URLSearchParams(location.hash.slice(1)).get("bt"); return id && id !== old; }, btId);
    const id = await page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get("bt"));
    await page.waitForSelector("#bt-failure:not([hidden])");
    const doc = await getJSON(`${adminUrl}/v1/backtests/${id}`);
    assert.equal(doc.state, "failed");
    assert.equal(doc.error, `the transcript archive ${archive} cannot be read: store: archive: open: ${archive} does not exist`);
    assert.equal(await page.textContent("#bt-failure"), `Backtest ${id.slice(0, 8)} failed: ${doc.error}`);
    assert.match(await page.textContent("#bt-state"), /failed, 0 \/ 0 sessions/);
    assert.ok(await page.isHidden("#bt-result"), "a failed backtest has no summary to show");
    // the recent list says so too, the reason on hover
    await page.waitForFunction((i) => !!document.querySelector(`#bt-list tr[data-id="${i}"]`), id);
    assert.equal(await page.$eval(`#bt-list tr[data-id="${id}"] .st`, (e) => [e.textContent, e.title].join("|")), `failed|${doc.error}`);
    // opening the earlier one hides the failure again
    await page.click(`#bt-list tr[data-id="${btId}"]`);
    await page.waitForSelector("#bt-failure", { state: "hidden" });
    await page.waitForSelector("#bt-result:not([hidden])");
  } finally {
    for (const ext of moved) renameSync(archive + ext + ".away", archive + ext);
  }
});

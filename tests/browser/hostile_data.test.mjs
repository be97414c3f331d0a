// Hostile data in every field the operator views render, put there by real
// processes over loopback: an emulator whose definition raises with a script
// payload and whose sessions carry payloads in their ids; a proxy in front of
// it that answers result submissions with a retryable error whose code and
// message are payloads (so they wait in the outbox); a local evaluator whose
// version and endpoint carry payloads and that fails every dispatch; the page
// opened with payloads in its URL filters (the API's 400 banner). In a real
// browser (Debian's chromium): nothing executes (window.__xss stays undefined,
// no element is injected) and each payload shows as literal text.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, sleep, waitFor, getJSON, killAll, launchChromium, sendJSON as send, listenPort, start, startEmulator } from "./harness.mjs";

const TOKEN = "hostile-test-token";
// an element, an attribute breakout, an svg handler and a script: each sets
// window.__xss if it ever runs
const XSS = `"'><img src=x onerror="window.__xss=1"><svg onload="window.__xss=3"><script>window.__xss=2</script>`;
const URL_XSS = "<svg/onload=window.__xss=4>"; // no spaces or quotes: fits a URL
const CODE_XSS = "<img_src=x_onerror=window.__xss=5>";

let browser, page, adminUrl, emuUrl, proxy, evalServer;
let holdResults = true;
const pageErrors = [];

function transcript(n) {
  const t0 = "2026-11-29T10:00:00.000000Z";
  const ev = [0, 1, 2, 3].map((i) => ({ id: `e${i}`, ts: t0, event_type: i % 2 ? "tool_use" : "agent_start", payload: { x: XSS } }));
  return { schema_version: "2", assignment_id: `hx-${n}`, session_id: `${XSS}-${n}`, session_revision_id: `${XSS}-rev`,
    agent_id: XSS, environment: XSS, started_at: t0, ended_at: t0, event_count: ev.length, events: ev };
}
// Nothing ran and nothing was injected into the page's own content.
async function assertInert(where) {
  await sleep(300);
  assert.equal(await page.evaluate(() => window.__xss), undefined, `${where}: an injected script ran`);
  // the page's own: the two script files and the charts' svg
  const injected = await page.evaluate(() => [...document.querySelectorAll("img, svg, script, iframe, object")]
    .filter((e) => !(e.tagName === "SCRIPT" && e.src) && !e.closest(".chart")).map((e) => e.outerHTML.slice(0, 80)));
  assert.deepEqual(injected, [], `${where}: an element was injected`);
  assert.deepEqual(pageErrors, [], `${where}: page errors`);
}

before(async () => {
  assert.ok(BIN, "FPS_BIN must name the failproofai-sidecar binary");
  const dir = mkdtempSync(join(tmpdir(), "fps-hostile-"));
  // "boom" fails (its error text is the sidecar's own: an exception's
  // message is not passed on); "chatty" puts payloads in its result.
  const defs = [{ eval_key: "boom", eval_version: "1", display_name: XSS.slice(0, 120), result_kind: "score", labels: [],
    condition_source: null, evaluator_source: "EvalResult(score=Score(2.0))", timeout_seconds: 5 },
  { eval_key: "chatty", eval_version: "1", display_name: "Chatty", result_kind: "score", labels: [], condition_source: null,
    evaluator_source: `EvalResult(score=Score(1.0), summary=${JSON.stringify(XSS)}, reasoning=${JSON.stringify(XSS)})`, timeout_seconds: 5 }];
  emuUrl = await startEmulator(start, dir, TOKEN, defs, ["--sessions", "0", "--poll-seconds", "1", "--heartbeat-seconds", "2"]);

  // The proxy: everything goes to the emulator, except result submissions
  // while holdResults, which get a retryable 503 carrying payloads.
  proxy = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      if (holdResults && /\/result$/.test(req.url)) {
        res.writeHead(503, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ protocol_version: "2", error: { code: CODE_XSS, message: XSS, retryable: true } }));
        return;
      }
      const up = http.request(`${emuUrl}${req.url}`, { method: req.method, headers: req.headers }, (ur) => {
        res.writeHead(ur.statusCode, ur.headers);
        ur.pipe(res);
      });
      up.on("error", () => { res.writeHead(502); res.end(); });
      up.end(Buffer.concat(chunks));
    });
  });
  await new Promise((r) => proxy.listen(0, "127.0.0.1", r));

  // A local evaluator that fails every dispatch.
  evalServer = http.createServer((req, res) => { req.resume(); req.on("end", () => { res.writeHead(500); res.end(XSS); }); });
  await new Promise((r) => evalServer.listen(0, "127.0.0.1", r));

  const sc = start(["run", "--server", `http://127.0.0.1:${proxy.address().port}`, "--listen", "127.0.0.1:0",
    "--db", join(dir, "sidecar.db"), "--worker-id", "hostile-test-worker", "--insecure-open-admin"],
  { FAILPROOFAI_EVALUATOR_TOKEN: TOKEN });
  adminUrl = `http://127.0.0.1:${await listenPort(sc, "the sidecar's admin API")}`;
  // The catalog the server has before the local evaluator registers: once
  // the status names another one, the server has the new catalog.
  let before = null;
  await waitFor(async () => (before = (await getJSON(`${adminUrl}/v1/status`)).catalog_revision), "the first registration");
  const r = await send("PUT", `${adminUrl}/v1/evaluators/hostile`, { version: XSS, ttl_seconds: 600,
    endpoint: `http://127.0.0.1:${evalServer.address().port}/run?${URL_XSS}`,
    definitions: [{ eval_key: "judged", eval_version: "1" }] });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  await waitFor(async () => {
    const rev = (await getJSON(`${adminUrl}/v1/status`)).catalog_revision;
    return rev && rev !== before && (await fetch(`${adminUrl}/readyz`)).ok;
  }, "registered with the local catalog, and ready");
  for (let i = 0; i < 2; i++) {
    const s = await fetch(`${emuUrl}/emulator/v1/sessions`, { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(transcript(i)) });
    assert.ok(s.ok, `adding a session: HTTP ${s.status}`);
  }
  await waitFor(async () => (await getJSON(`${adminUrl}/v1/outbox?limit=20`)).pending.some((o) => o.last_error_code), "a held submission with its error");
  await waitFor(async () => (await getJSON(`${adminUrl}/v1/evaluators`)).evaluators.some((e) => e.state === "failing"), "the local evaluator failing");

  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.on("dialog", (d) => { pageErrors.push(`dialog: ${d.message()}`); d.dismiss(); });
  await page.goto(adminUrl + "/", { waitUntil: "load" });
  await page.waitForFunction(() => document.querySelectorAll("#runs > tr[data-id]").length > 0);
});

after(async () => {
  if (browser) await browser.close();
  if (proxy) { proxy.closeAllConnections(); proxy.close(); }
  if (evalServer) { evalServer.closeAllConnections(); evalServer.close(); }
  killAll();
});

test("a failing local evaluator: name, version, endpoint and last error are text", async () => {
  await page.waitForFunction(() => /failing/.test(document.getElementById("evaluators").textContent));
  const row = await page.textContent("#evaluators tr");
  assert.ok(row.includes(XSS), row);
  assert.ok(row.includes(URL_XSS) || row.includes(encodeURI(URL_XSS)), row);
  assert.match(row, /eval_error: local evaluator 'hostile' answered HTTP 500/);
  await assertInert("evaluators");
});

test("the outbox: a held submission's error code and message are text", async () => {
  await page.waitForFunction((c) => [...document.querySelectorAll("#outbox-rows td.st-failed")].some((td) => td.textContent.startsWith(c)), `${CODE_XSS}: `);
  const cells = await page.$$eval("#outbox-rows td.st-failed", (tds) => tds.map((td) => td.textContent));
  assert.ok(cells.some((c) => c === `${CODE_XSS}: ${XSS}`), cells.join("\n"));
  await assertInert("outbox");
});

test("the log tail: messages carrying payloads are text", async () => {
  await page.waitForFunction(() => document.querySelectorAll("#logs li").length > 0);
  const logs = await page.textContent("#logs");
  assert.ok(logs.includes(XSS), logs.slice(0, 2000));
  await assertInert("logs");
});

test("runs: a failed run's error and a result's summary and reasoning are text", async () => {
  let id = (await getJSON(`${adminUrl}/v1/runs?eval_key=boom`)).runs[0].id;
  await page.goto(`${adminUrl}/#eval_key=boom&run=${id}`, { waitUntil: "load" });
  await page.waitForFunction(() => document.getElementById("detail-error") && document.getElementById("detail-error").textContent.length > 0);
  assert.match(await page.textContent("#detail-error"), /eval_error: evaluation raised ValueError/);
  id = (await getJSON(`${adminUrl}/v1/runs?eval_key=chatty`)).runs[0].id;
  await page.goto(`${adminUrl}/#eval_key=chatty&run=${id}`, { waitUntil: "load" });
  await page.waitForFunction((x) => document.getElementById("run-detail") && document.getElementById("run-detail").textContent.includes(x), XSS);
  await page.waitForFunction((x) => document.getElementById("runs").textContent.includes(x), XSS);
  await assertInert("run detail");
});

test("an assignment's fields and timeline are text", async () => {
  const asg = (await getJSON(`${adminUrl}/v1/assignments?limit=50`)).assignments[0];
  await page.goto(`${adminUrl}/#asg=${asg.id}`, { waitUntil: "load" });
  await page.waitForFunction(() => document.querySelectorAll("#asg-timeline li").length > 3);
  const fields = await page.textContent("#asg-detail-fields");
  for (const k of ["session_id", "session_revision_id", "agent_id", "environment"])
    assert.ok(fields.includes(asg[k]), `${k} shown literally`);
  assert.match(await page.textContent("#asg-timeline"), /run boom failed/);
  assert.ok((await page.textContent("#assignments")).includes(XSS));
  await assertInert("assignment detail");
});

test("filters and charts: meta-built options and eval_key options are text", async () => {
  const meta = await getJSON(`${adminUrl}/v1/meta`);
  await page.waitForFunction(() => document.querySelectorAll("#filter-status option").length > 1);
  assert.deepEqual(await page.$$eval("#filter-status option", (os) => os.slice(1).map((o) => o.value)), meta.run_statuses);
  const keys = await page.$$eval("#eval-keys option", (os) => os.map((o) => o.value));
  assert.ok(["boom", "chatty", "judged"].every((k) => keys.includes(k)), keys.join(","));
  await assertInert("filters");
});

test("status banners: a payload in the URL's filters comes back as text", async () => {
  await page.goto(`${adminUrl}/#status=${encodeURIComponent(XSS)}&eval_key=${encodeURIComponent(XSS)}`, { waitUntil: "load" });
  await page.waitForSelector("#runs-error:not([hidden])");
  const banner = await page.textContent("#runs-error");
  assert.match(banner, /invalid_request: /);
  assert.equal(await page.$$eval("#runs > tr", (t) => t.length), 0);
  assert.equal(await page.inputValue("#filter-key"), XSS);
  await assertInert("filter banner");
});

test("once the server answers, the outbox empties and the page stays inert", async () => {
  holdResults = false;
  await page.goto(adminUrl + "/", { waitUntil: "load" });
  await page.waitForSelector("#outbox-empty:not([hidden])", { timeout: 60000 });
  await assertInert("after the outbox drained");
});

// Drain and resume from the admin page when the sidecar requires its admin
// token (the default): the page asks for the token once, keeps it in
// sessionStorage for the tab, and sends it as a bearer token; a wrong token
// is refused and asked for again. Debian's chromium via playwright-core
// against a real emulator and sidecar.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, waitFor, getJSON, killAll, launchChromium, listenPort, start } from "./harness.mjs";

const ADMIN = "admin-token-for-the-page";
let browser, page, adminUrl;
const prompts = [];
let answer = ADMIN;

before(async () => {
  assert.ok(BIN, "FPS_BIN must name the failproofai-sidecar binary");
  const dir = mkdtempSync(join(tmpdir(), "fps-token-"));
  writeFileSync(join(dir, "admin.token"), ADMIN + "\n", { mode: 0o600 });
  const emu = start(["emulator", "--listen", "127.0.0.1:0", "--token", "t", "--sessions", "0"], {});
  const emuUrl = `http://127.0.0.1:${await listenPort(emu, "the emulator")}`;
  await waitFor(() => getJSON(`${emuUrl}/emulator/v1/state`), "the emulator");
  const sc = start(["run", "--server", emuUrl, "--listen", "127.0.0.1:0",
    "--db", join(dir, "sidecar.db"), "--admin-token-file", join(dir, "admin.token")],
  { FAILPROOFAI_EVALUATOR_TOKEN: "t" });
  adminUrl = `http://127.0.0.1:${await listenPort(sc, "the sidecar's admin API")}`;
  await waitFor(async () => (await getJSON(`${adminUrl}/v1/status`)).ready, "a ready sidecar");
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on("dialog", (d) => {
    if (d.type() === "prompt") { prompts.push(d.message()); d.accept(answer); } else d.accept();
  });
  await page.goto(adminUrl + "/", { waitUntil: "load" });
  await page.waitForFunction(() => document.getElementById("drain-toggle").textContent === "drain"
    && document.getElementById("ready-badge").textContent === "ready");
});

after(async () => {
  if (browser) await browser.close();
  killAll();
});

test("a wrong token is refused; the right one is asked for once and drains", async () => {
  answer = "not-the-token";
  await page.click("#drain-toggle");
  await waitFor(() => prompts.length === 1, "the token prompt");
  await page.waitForTimeout(500);
  assert.equal((await getJSON(`${adminUrl}/v1/status`)).draining, false, "the wrong token drained");
  answer = ADMIN; // the kept wrong token gets a 401 again: asked for again
  await page.click("#drain-toggle");
  await page.waitForSelector("#drain-badge:not([hidden])");
  assert.equal(prompts.length, 2);
  assert.equal(await page.evaluate(() => sessionStorage.getItem("fps-admin-token")), ADMIN);
});

test("resume uses the kept token without asking again", async () => {
  let auth = null;
  page.on("request", (r) => { if (r.url().endsWith("/v1/drain") && r.method() === "DELETE") auth = r.headers().authorization; });
  await page.waitForFunction(() => document.getElementById("drain-toggle").textContent === "resume claiming");
  await page.click("#drain-toggle");
  await page.waitForSelector("#drain-badge", { state: "hidden" });
  assert.equal(prompts.length, 2, "no second prompt");
  assert.equal(auth, "Bearer " + ADMIN);
  assert.equal((await getJSON(`${adminUrl}/v1/status`)).draining, false);
});

// Shared by the browser tests (*.test.mjs): the binary under test and the
// processes started from it and the ports they bound, polling, JSON fetches, the
// emulator's start, and Debian's chromium launched through playwright-core.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const BIN = process.env.FPS_BIN;
// Where the tests' screenshots go.
export const ARTIFACTS = join(dirname(fileURLToPath(import.meta.url)), "..", "artifacts");
// Markup that runs a script if the page ever renders data as HTML.
export const XSS = `<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>`;

// The processes this test file started: start() runs the binary with only
// PATH and env in its environment, killAll() ends them all. Each binds
// 127.0.0.1:0 where a test needs a port, so the kernel picks one nobody
// holds (a port found free and passed on could be taken in between), and
// listenPort() reads the one it bound from its own output: the emulator's
// {"listening": "HOST:PORT"} line on stdout, the sidecar's "admin API
// listening" log record on stderr. Both streams are read to their end, so
// a chatty process never blocks on a full pipe.
const procs = [];
export function start(args, env) {
  const p = spawn(BIN, args, { env: { PATH: process.env.PATH, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  procs.push(p);
  p.bound = new Promise((resolve) => {
    for (const stream of [p.stdout, p.stderr]) {
      createInterface({ input: stream }).on("line", (line) => {
        let rec;
        try { rec = JSON.parse(line); } catch (_) { return; }
        if (rec && typeof rec.listening === "string") resolve(Number(rec.listening.split(":").pop()));
        else if (rec && rec.msg === "admin API listening" && rec.port) resolve(Number(rec.port));
      });
    }
    p.on("exit", () => resolve(null));
  });
  return p;
}
export function killAll() {
  for (const p of procs) { try { p.kill("SIGKILL"); } catch (_) { /* gone */ } }
}
// The port `p` (from start) bound; throws if it exits or says nothing for
// 60 s.
export async function listenPort(p, what) {
  let timer;
  const timeout = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out waiting for ${what} to listen`)), 60000); });
  try {
    const port = await Promise.race([p.bound, timeout]);
    if (!port) throw new Error(`${what} exited before it listened`);
    return port;
  } finally {
    clearTimeout(timer);
  }
}
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export async function waitFor(fn, what, timeoutMs = 60000) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try { const v = await fn(); if (v) return v; } catch (e) { last = e; }
    await sleep(200);
  }
  throw new Error(`timed out waiting for ${what}${last ? ": " + last.message : ""}`);
}
export async function getJSON(url) { const r = await fetch(url); if (!r.ok) throw new Error(`${url}: ${r.status}`); return r.json(); }
export function launchChromium() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
}
export async function sendJSON(method, url, body) {
  const r = await fetch(url, { method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json().catch(() => null) };
}
// Writes `defs` to dir/defs.json, starts the emulator on a port of its own through
// `start` (the test's spawner, which tracks the process) with them and
// `args`, and resolves to its base URL once it answers.
export async function startEmulator(start, dir, token, defs, args = []) {
  const path = join(dir, "defs.json");
  writeFileSync(path, JSON.stringify(defs));
  const emu = start(["emulator", "--listen", "127.0.0.1:0", "--token", token, "--definitions", path, ...args], {});
  const url = `http://127.0.0.1:${await listenPort(emu, "the emulator")}`;
  await waitFor(() => getJSON(`${url}/emulator/v1/state`), "the emulator");
  return url;
}

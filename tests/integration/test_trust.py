"""The local trust boundary, attacked the way another process on the same
host (or in the same pod) would: real `failproofai-sidecar run` processes and
evaluator HTTP servers over loopback.

- Tokens: the admin and registration tokens are generated beside the
  database (mode 0600, path logged, value never) when none is configured;
  state-changing routes refuse callers without them; reads stay open.
- Owners: a second evaluator cannot take over, renew or delete a name it
  does not own, nor squat its eval keys; the admin token can; expiry
  releases the name and its keys; a registration restored without an owner
  is the admin token's to adopt.
- Loopback means an address: hostname tricks on --server and on evaluator
  endpoints are refused, and so is an endpoint on the admin API itself; the
  name localhost goes to 127.0.0.1 whatever /etc/hosts says."""

import json
import os
import socket
import sqlite3
import stat
import subprocess
import tempfile
import threading
import time
import unittest
from http.server import ThreadingHTTPServer

from admin_harness import BIN, JsonHandler, Sidecar, dead_server, emulator, sample_transcript
from emulator_harness import catalog_revision

SECRET_HEADER = "X-FailproofAI-Registration-Secret"


class Recorder(JsonHandler):
    """An evaluator endpoint that records what reaches it."""
    hits = []

    def do_POST(self):
        Recorder.hits.append((self.server.server_port, self.path))
        self.reply({"score": 1.0})


def serve():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def registration(port, keys=("judge_score",), ttl=60):
    return {"version": "1", "endpoint": f"http://127.0.0.1:{port}/", "ttl_seconds": ttl,
            "definitions": [{"eval_key": k, "eval_version": "1"} for k in keys]}


class GeneratedTokensTest(unittest.TestCase):
    def test_tokens_generated_beside_the_database_and_required(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        db = os.path.join(tmp.name, "sidecar.db")
        with Sidecar(dead_server(), tokens=False, db=db) as sc:
            paths = {}
            for rec in sc.logs():
                if rec.get("msg") == "admin API token generated":
                    paths[rec["which"]] = rec["path"]
            self.assertEqual(set(paths), {"admin", "registration"})
            values = {}
            for name, path in paths.items():
                self.assertEqual(os.path.dirname(path), os.path.dirname(sc.db))
                self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600, path)
                with open(path) as f:
                    values[name] = f.read().strip()
                self.assertRegex(values[name], r"^[0-9a-f]{64}$")
                self.assertNotIn(values[name], sc.log_text())
            self.assertNotEqual(values["admin"], values["registration"])
            # reads and the page stay open; every state change needs a token
            for path in ("/healthz", "/v1/status", "/v1/evaluators", "/"):
                self.assertEqual(sc.get(path).status, 200, path)
            self.assertIs(sc.get("/v1/status").body["admin"]["token_required"], True)
            reg = registration(9)
            for method, path, body in (("POST", "/v1/drain", {}),
                                       ("POST", "/v1/evaluate", {"source": "1", "mode": "check"}),
                                       ("PUT", "/v1/evaluators/x", reg),
                                       ("POST", "/v1/evaluators/x/heartbeat", {}),
                                       ("DELETE", "/v1/evaluators/x", {})):
                r = sc.request(method, path, body=body, auth=None)
                self.assertEqual((r.status, r.code), (401, "unauthorized"), (method, path))
                self.assertEqual(r.headers.get("www-authenticate"), "Bearer")
            # the registration token registers but is not the operator's
            reg_auth = {"Authorization": "Bearer " + values["registration"]}
            r = sc.request("PUT", "/v1/evaluators/x", body=reg, headers=reg_auth, auth=None)
            self.assertEqual(r.status, 201, r)
            for method, path, body in (("POST", "/v1/drain", {}),
                                       ("POST", "/v1/evaluate", {"source": "1", "mode": "check"})):
                r = sc.request(method, path, body=body, headers=reg_auth, auth=None)
                self.assertEqual(r.status, 401, (method, path))
            adm = {"Authorization": "Bearer " + values["admin"]}
            r = sc.request("POST", "/v1/evaluate", body={"source": "1", "mode": "check"},
                           headers=adm, auth=None, timeout=60)
            self.assertEqual(r.status, 200, r)
        # a restart reads the same files: the tokens stay valid
        with Sidecar(dead_server(), tokens=False, db=db) as sc:
            self.assertIn("admin API token loaded", [r.get("msg") for r in sc.logs()])
            r = sc.request("POST", "/v1/drain", body={}, auth=None,
                           headers={"Authorization": "Bearer " + values["admin"]})
            self.assertEqual(r.status, 202, r)

    def test_memory_database_tokens_live_in_a_private_directory(self):
        # ":memory:" has no directory: the tokens must not land in the working
        # directory as ":memory:.admin-token", and they go when the process does
        cwd = tempfile.TemporaryDirectory()
        tmpdir = tempfile.TemporaryDirectory()
        self.addCleanup(cwd.cleanup)
        self.addCleanup(tmpdir.cleanup)
        sc = Sidecar(dead_server(), tokens=False, db=":memory:", cwd=cwd.name,
                     env={"TMPDIR": tmpdir.name})
        with sc:
            paths = {rec["which"]: rec["path"] for rec in sc.logs()
                     if rec.get("msg") == "admin API token generated"}
            self.assertEqual(set(paths), {"admin", "registration"})
            home = os.path.dirname(paths["admin"])
            self.assertEqual(os.path.dirname(home), tmpdir.name)
            self.assertEqual(stat.S_IMODE(os.stat(home).st_mode), 0o700)
            for path in paths.values():
                self.assertEqual(os.path.dirname(path), home)
                self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600, path)
            with open(paths["admin"]) as f:
                admin = f.read().strip()
            r = sc.request("POST", "/v1/drain", body={}, auth=None,
                           headers={"Authorization": "Bearer " + admin})
            self.assertEqual(r.status, 202, r)
            self.assertEqual(os.listdir(cwd.name), [])
        self.assertFalse(os.path.exists(home), home)
        self.assertEqual(os.listdir(cwd.name), [])

    def test_insecure_open_admin_is_explicit_and_logged(self):
        with Sidecar(dead_server(), "--insecure-open-admin") as sc:
            warn = [r for r in sc.logs() if r.get("level") == "warn"
                    and "--insecure-open-admin" in r.get("msg", "")]
            self.assertEqual(len(warn), 1, sc.log_text()[-2000:])
            self.assertFalse(any(r.get("msg", "").startswith("admin API token")
                                 for r in sc.logs()))
            self.assertEqual(sc.request("POST", "/v1/drain", body={}, auth=None).status, 202)
            self.assertIs(sc.get("/v1/status").body["admin"]["open_admin"], True)


class OwnershipTest(unittest.TestCase):
    """Two evaluators: the victim registers "judge"; the attacker, holding
    only the registration token every evaluator has, tries to take it."""

    def setUp(self):
        self.sc = Sidecar(dead_server())
        self.sc.start()
        self.victim, self.attacker = serve(), serve()
        Recorder.hits = []

    def tearDown(self):
        self.sc.stop()
        self.sc.tmp.cleanup()
        for s in (self.victim, self.attacker):
            s.shutdown()
            s.server_close()

    def put(self, name, body, secret=None, auth="registration"):
        h = {SECRET_HEADER: secret} if secret else {}
        return self.sc.request("PUT", f"/v1/evaluators/{name}", body=body, headers=h, auth=auth)

    def test_takeover_renewal_delete_and_squatting_are_refused(self):
        r = self.put("judge", registration(self.victim.server_port))
        self.assertEqual(r.status, 201, r)
        secret = r.body["registration_secret"]
        self.assertRegex(secret, r"^[0-9a-f]{64}$")
        evil = registration(self.attacker.server_port)
        # takeover: refused, with or without a guessed secret
        for guess in (None, "0" * 64, secret[:-1]):
            r = self.put("judge", evil, secret=guess)
            self.assertEqual((r.status, r.code), (403, "not_owner"), r)
        self.assertEqual(self.sc.get("/v1/evaluators/judge").body["endpoint"],
                         f"http://127.0.0.1:{self.victim.server_port}/")
        # renewing or deleting someone else's name: refused
        for method, path in (("POST", "/v1/evaluators/judge/heartbeat"),
                             ("DELETE", "/v1/evaluators/judge")):
            r = self.sc.request(method, path, body={}, auth="registration")
            self.assertEqual((r.status, r.code), (403, "not_owner"), (method, r))
        # squatting the victim's eval key under another name: refused
        r = self.put("other", evil)
        self.assertEqual((r.status, r.code), (409, "duplicate_eval_key"), r)
        # the owner renews and replaces with its secret; the secret is kept
        r = self.sc.request("POST", "/v1/evaluators/judge/heartbeat", body={},
                            headers={SECRET_HEADER: secret}, auth="registration")
        self.assertEqual(r.status, 200, r)
        r = self.put("judge", registration(self.victim.server_port, ("judge_score", "b")),
                     secret=secret)
        self.assertEqual(r.status, 200, r)
        self.assertNotIn("registration_secret", r.body)
        # the operator (admin token) may replace or delete any registration
        r = self.put("judge", evil, auth="admin")
        self.assertEqual(r.status, 200, r)
        r = self.sc.request("DELETE", "/v1/evaluators/judge", body={}, auth="admin")
        self.assertEqual(r.status, 200, r)

    def test_expiry_releases_the_name_and_its_keys(self):
        r = self.put("judge", registration(self.victim.server_port, ttl=1))
        self.assertEqual(r.status, 201, r)
        old = r.body["registration_secret"]
        time.sleep(1.5)
        # the name and the key are free again, for a new owner with a new secret
        r = self.put("rival", registration(self.attacker.server_port))
        self.assertEqual(r.status, 201, r)
        self.sc.request("DELETE", "/v1/evaluators/rival", body={}, auth="admin")
        r = self.put("judge", registration(self.attacker.server_port))
        self.assertEqual(r.status, 201, r)
        self.assertNotEqual(r.body["registration_secret"], old)
        r = self.sc.request("POST", "/v1/evaluators/judge/heartbeat", body={},
                            headers={SECRET_HEADER: old}, auth="registration")
        self.assertEqual(r.status, 403, r)


class OwnerlessRegistrationTest(unittest.TestCase):
    """A registration persisted before registrations had owners (its row
    holds the bare body, no owner secret) has nothing its evaluator could
    prove: after a restart, the registration token alone may not adopt,
    renew or delete it; the admin token adopts it and gets its new secret."""

    def test_only_the_admin_token_adopts_an_ownerless_registration(self):
        victim, attacker = serve(), serve()
        for s in (victim, attacker):
            self.addCleanup(s.server_close)
            self.addCleanup(s.shutdown)
        sc = Sidecar(dead_server())
        self.addCleanup(sc.tmp.cleanup)
        sc.start()
        try:
            r = sc.request("PUT", "/v1/evaluators/judge",
                           body=registration(victim.server_port, ttl=600), auth="registration")
            self.assertEqual(r.status, 201, r)
        finally:
            sc.stop()
        with sqlite3.connect(sc.db) as db:
            (stored,) = db.execute(
                "SELECT registration_json FROM evaluators WHERE name = 'judge'").fetchone()
            self.assertIn("owner_secret", json.loads(stored))
            db.execute("UPDATE evaluators SET registration_json = ? WHERE name = 'judge'",
                       (json.dumps(json.loads(stored)["registration"]),))
        sc.start()
        try:
            # the registration token alone: refused, with what to do instead
            evil = registration(attacker.server_port)
            for method, path, body in (("PUT", "/v1/evaluators/judge", evil),
                                       ("POST", "/v1/evaluators/judge/heartbeat", {}),
                                       ("DELETE", "/v1/evaluators/judge", {})):
                for guess in (None, "0" * 64):
                    h = {SECRET_HEADER: guess} if guess else {}
                    r = sc.request(method, path, body=body, headers=h, auth="registration")
                    self.assertEqual((r.status, r.code), (403, "not_owner"), (method, r))
                    self.assertIn("an operator must adopt it", r.message)
            self.assertEqual(sc.get("/v1/evaluators/judge").body["endpoint"],
                             f"http://127.0.0.1:{victim.server_port}/")
            # the restore said so, at warn
            warn = [rec for rec in sc.logs() if rec.get("level") == "warn"
                    and rec.get("evaluator") == "judge"
                    and "without an owner" in rec.get("msg", "")]
            self.assertEqual(len(warn), 1, sc.log_text()[-2000:])
            # the admin token adopts it: the answer carries its new secret,
            # which from then on works like any owner's
            r = sc.request("PUT", "/v1/evaluators/judge",
                           body=registration(victim.server_port), auth="admin")
            self.assertEqual(r.status, 201, r)
            secret = r.body["registration_secret"]
            self.assertRegex(secret, r"^[0-9a-f]{64}$")
            self.assertNotIn(secret, sc.log_text())
            r = sc.request("POST", "/v1/evaluators/judge/heartbeat", body={},
                           headers={SECRET_HEADER: secret}, auth="registration")
            self.assertEqual(r.status, 200, r)
            r = sc.request("PUT", "/v1/evaluators/judge", body=evil, auth="registration")
            self.assertEqual((r.status, r.code), (403, "not_owner"), r)
            self.assertIn("registered by another owner", r.message)
        finally:
            sc.stop()


class Decoy:
    """A listener on 127.0.0.2:port that counts the connections it accepts:
    where traffic for `localhost` would go if a resolver decided."""

    def __init__(self, port):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.2", port))
        self.sock.listen(16)
        self.accepted = 0
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self):
        self.sock.close()


def hosts_namespace(tmp):
    """A command that runs its argv in a private mount namespace whose
    /etc/hosts maps localhost to 127.0.0.2 (root in a user namespace when
    not root already)."""
    hosts = os.path.join(tmp, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.2 localhost\n")
    return ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"]) + \
        ["sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"', hosts]


class LocalhostIsPinnedTest(unittest.TestCase):
    """The name localhost is never resolved: with an /etc/hosts that maps
    it to 127.0.0.2, where decoys listen, the server (--server
    http://localhost:P), an evaluator endpoint (http://localhost:Q/) and the
    admin API (--listen localhost:0) are all reached on 127.0.0.1. The
    libcurl this is built against (7.88) also answers the name localhost
    itself; the sidecar's own pin keeps that true on any libcurl, and the
    admin API's bind address has no such help."""

    def test_localhost_goes_to_127_0_0_1_whatever_the_resolver_says(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        wrap = hosts_namespace(tmp.name)
        probe = subprocess.run([*wrap, "getent", "hosts", "localhost"], capture_output=True,
                               text=True, timeout=30)
        self.assertEqual(probe.stdout.split()[:1], ["127.0.0.2"], probe)
        emu = emulator("--sessions", "0", "--poll-seconds", "1", "--heartbeat-seconds", "2",
                       "--lease-seconds", "30")
        emu.start()
        self.addCleanup(emu.stop)
        evaluator = serve()
        self.addCleanup(evaluator.server_close)
        self.addCleanup(evaluator.shutdown)
        decoys = [Decoy(emu.port), Decoy(evaluator.server_port)]
        for d in decoys:
            self.addCleanup(d.close)
        Recorder.hits = []
        sc = Sidecar(f"http://localhost:{emu.port}", "--listen", "localhost:0", wrap=wrap)
        self.addCleanup(sc.tmp.cleanup)
        sc.start()
        try:
            # the harness talks to 127.0.0.1: the admin API is there
            sc.wait_for(lambda: sc.get("/readyz").status == 200, what="registration")
            r = sc.request("PUT", "/v1/evaluators/judge", auth="registration", body={
                "version": "1", "endpoint": f"http://localhost:{evaluator.server_port}/",
                "ttl_seconds": 60, "definitions": [{"eval_key": "judge_score",
                                                    "eval_version": "1"}]})
            self.assertEqual(r.status, 201, r)
            want = catalog_revision([{"eval_key": "judge_score", "eval_version": "1",
                                      "display_name": "Judge score", "result_kind": "score",
                                      "labels": []}])
            sc.wait_for(lambda: sc.get("/v1/status").body.get("catalog_revision") == want
                        and sc.get("/readyz").status == 200, what="the evaluator in the catalog")
            r = emu.request("POST", "/emulator/v1/sessions", sample_transcript())
            self.assertIn(r.status, (200, 201), r)
            runs = sc.wait_for(lambda: emu.request("GET", "/emulator/v1/runs").body["runs"],
                               timeout=60, what="the dispatched run")
        finally:
            sc.stop()
        self.assertEqual([(x["eval_key"], x["status"]) for x in runs],
                         [("judge_score", "succeeded")], runs)
        self.assertEqual(Recorder.hits, [(evaluator.server_port, "/")])
        self.assertEqual([d.accepted for d in decoys], [0, 0])


class LoopbackIsAnAddressTest(unittest.TestCase):
    def test_server_hostname_tricks_are_refused(self):
        for url in ("http://127.0.0.1.evil.example:18790", "http://127.evil.example:1",
                    "http://127.0.0.1@evil.example:1", "http://localhost.evil.example:1",
                    "http://0x7f000001:1", "http://[::ffff:8.8.8.8]:1"):
            p = subprocess.run([BIN, "run", "--server", url, "--listen", "127.0.0.1:0",
                                "--db", "/nonexistent/x.db"],
                               env=dict(os.environ, FAILPROOFAI_EVALUATOR_TOKEN="t"),
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 2, (url, p.stderr))
            self.assertIn("https", p.stderr, url)

    def test_endpoint_tricks_and_the_admin_api_are_refused(self):
        with Sidecar(dead_server()) as sc:
            bad = ["http://127.1.2.3.4:19001/", "http://127.0.0.1.evil.example:19001/",
                   "http://localhost.:19001/", "http://127.0.0.1.nip.io:19001/",
                   f"http://127.0.0.1:{sc.port}/v1/drain", f"http://localhost:{sc.port}/",
                   f"http://[::1]:{sc.port}/", f"http://127.0.0.2:{sc.port}/"]
            for i, url in enumerate(bad):
                body = {"version": "1", "endpoint": url,
                        "definitions": [{"eval_key": f"k{i}", "eval_version": "1"}]}
                r = sc.request("PUT", f"/v1/evaluators/e{i}", body=body, auth="registration")
                self.assertEqual((r.status, r.code), (422, "invalid_registration"), (url, r))
                self.assertIn("endpoint", r.message, url)
            for url in ("http://127.0.0.1:19001/", "http://127.3.4.5:19001/",
                        "http://[::1]:19001/", "http://localhost:19001/"):
                body = {"version": "1", "endpoint": url,
                        "definitions": [{"eval_key": "ok", "eval_version": "1"}]}
                r = sc.request("PUT", "/v1/evaluators/good", body=body, auth="admin")
                self.assertIn(r.status, (200, 201), (url, r))
            self.assertIs(sc.get("/v1/status").body["draining"], False)


if __name__ == "__main__":
    unittest.main()

"""Token files rotate under a running sidecar as kubelet rotates a mounted
Secret: a new timestamped directory, then an atomic swap of the `..data`
symlink that the token files point through. The server token is used from
the next request on (work goes on), the old admin and registration tokens are
refused, an empty rotated file keeps the current value, and no log line holds
a token."""

import http.client
import json
import os
import shutil
import signal
import tempfile
import time
import unittest

import fps_fakecloud
from fps_fakecloud import FakeCloud, managed
from fps_sidecar import Sidecar

SCORE = "EvalResult(score=Score(1.0))"
NAMES = ("token", "admin", "registration")


class SecretDir:
    """A directory laid out as kubelet lays out a mounted Secret."""

    def __init__(self, values):
        self.root = tempfile.mkdtemp(prefix="fps-secret-")
        self.gen = 0
        self.write(values)
        for name in NAMES:
            os.symlink(os.path.join("..data", name), os.path.join(self.root, name))

    def path(self, name):
        return os.path.join(self.root, name)

    def write(self, values):
        self.gen += 1
        ts = os.path.join(self.root, f"..2026_12_02_{self.gen:02d}")
        os.mkdir(ts)
        for name in NAMES:
            with open(os.path.join(ts, name), "w") as f:
                f.write(values[name] + "\n")
        tmp = os.path.join(self.root, "..data_tmp")
        os.symlink(os.path.basename(ts), tmp)
        os.rename(tmp, os.path.join(self.root, "..data"))  # the atomic swap

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)


def wait_for(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


class RotationTest(unittest.TestCase):
    def setUp(self):
        self.old = {"token": "server-old-" + os.urandom(8).hex(),
                    "admin": "admin-old-" + os.urandom(8).hex(),
                    "registration": "reg-old-" + os.urandom(8).hex()}
        self.new = {k: v.replace("-old-", "-new-") for k, v in self.old.items()}
        self.saved_token = fps_fakecloud.TOKEN
        fps_fakecloud.TOKEN = self.old["token"]
        self.secrets = SecretDir(self.old)
        self.cloud = FakeCloud([managed("q", SCORE)], sessions=2).start()
        self.sc = Sidecar(self.cloud.url, token="", extra=[
            "--token-file", self.secrets.path("token"),
            "--admin-token-file", self.secrets.path("admin"),
            "--registration-token-file", self.secrets.path("registration")])
        line = self.sc.wait_log(lambda l: l.get("msg") == "admin API listening", 30)
        self.assertIsNotNone(line, self.sc.raw_log()[-2000:])
        self.port = int(line["port"])

    def tearDown(self):
        self.sc.stop(signal.SIGKILL)
        self.cloud.stop()
        self.secrets.cleanup()
        fps_fakecloud.TOKEN = self.saved_token

    def admin(self, method, path, token):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, headers={"Authorization": "Bearer " + token})
            r = conn.getresponse()
            r.read()
            return r.status
        finally:
            conn.close()

    def register(self, token):
        """PUT of a new registration (its own name and eval_key): the status."""
        name = "rot" + os.urandom(4).hex()
        body = json.dumps({"version": "1", "endpoint": "http://127.0.0.1:9/run", "ttl_seconds": 60,
                           "definitions": [{"eval_key": name, "eval_version": "1"}]})
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("PUT", "/v1/evaluators/" + name, body=body,
                         headers={"Authorization": "Bearer " + token,
                                  "Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            return r.status
        finally:
            conn.close()

    def committed(self):
        return len(self.cloud.committed_runs())

    def test_every_token_file_rotates(self):
        self.assertTrue(self.cloud.wait(lambda c: len(c.committed_runs()) == 2, 30),
                        self.sc.raw_log()[-3000:])
        self.assertEqual(self.admin("POST", "/v1/drain", self.old["admin"]), 202)
        self.assertEqual(self.admin("DELETE", "/v1/drain", self.old["admin"]), 200)
        self.assertEqual(self.register(self.old["registration"]), 201)

        # the server now accepts only the new token; the sidecar must follow
        fps_fakecloud.TOKEN = self.new["token"]
        self.secrets.write(self.new)
        t0 = time.monotonic()
        self.assertTrue(wait_for(lambda: self.admin("POST", "/v1/drain", self.new["admin"]) == 202,
                                 5.0), "the new admin token was not taken within 5 s")
        self.assertLess(time.monotonic() - t0, 5.0)
        self.assertEqual(self.admin("DELETE", "/v1/drain", self.new["admin"]), 200)
        self.assertEqual(self.admin("POST", "/v1/drain", self.old["admin"]), 401)
        self.assertTrue(wait_for(lambda: self.register(self.new["registration"]) == 201, 5.0))
        self.assertEqual(self.register(self.old["registration"]), 401)
        # work goes on, with the new server token
        before = len(self.cloud.requests)
        for _ in range(2):
            self.cloud.add_session()
        self.assertTrue(self.cloud.wait(lambda c: len(c.committed_runs()) >= 4, 30),
                        self.sc.raw_log()[-3000:])
        auths = {h.get("Authorization") for _, _, h in self.cloud.requests[before:]}
        self.assertIn("Bearer " + self.new["token"], auths)

        # an empty rotated file keeps the current value, and says why
        self.secrets.write({"token": self.new["token"], "admin": "", "registration":
                            self.new["registration"]})
        self.assertIsNotNone(self.sc.wait_log(
            lambda l: l.get("msg", "").startswith("a rotated secret file cannot be used")
            and l.get("which") == "admin", 10), self.sc.raw_log()[-2000:])
        self.assertEqual(self.admin("POST", "/v1/drain", self.new["admin"]), 202)
        self.assertEqual(self.admin("DELETE", "/v1/drain", self.new["admin"]), 200)

        rotations = [l for l in self.sc.lines() if l.get("msg") == "secret rotated"]
        self.assertEqual(sorted(l["which"] for l in rotations), ["admin", "registration", "server"])
        log = self.sc.raw_log()
        for v in list(self.old.values()) + list(self.new.values()):
            self.assertNotIn(v, log)


if __name__ == "__main__":
    unittest.main()

"""deploy/kubernetes.yaml: parses, and its probes, tokens, ports and timings
match the binary's defaults (read from `run --help` and exercised against a
running sidecar, which drains on SIGTERM without a preStop hook)."""

import os
import re
import signal
import subprocess
import unittest
from urllib.parse import urlsplit

import yaml

from admin_harness import BIN, SOURCE, Sidecar, dead_server

MANIFEST = os.path.join(SOURCE, "deploy", "kubernetes.yaml")


def curl_url(cmd):
    urls = [a for a in cmd if a.startswith("http://")]
    assert len(urls) == 1, cmd
    return urls[0]


class ManifestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(MANIFEST) as f:
            cls.docs = [d for d in yaml.safe_load_all(f) if d]
        cls.deploy = next(d for d in cls.docs if d["kind"] == "Deployment")
        spec = cls.deploy["spec"]["template"]["spec"]
        cls.pod = spec
        cls.sidecar = next(c for c in spec["containers"] if c["name"] == "failproofai-sidecar")
        cls.help = subprocess.run([BIN, "run", "--help"], capture_output=True, text=True,
                                  timeout=30).stdout

    def default(self, flag):
        m = re.search(re.escape(flag) + r"[^\n]*\(default ([^)]+)\)", self.help)
        self.assertIsNotNone(m, f"no default for {flag} in run --help")
        return m.group(1)

    def args(self):
        out = {}
        for a in self.sidecar["args"]:
            k, _, v = a.partition("=")
            out[k] = v
        return out

    def test_parses_and_has_agent_and_sidecar(self):
        names = [c["name"] for c in self.pod["containers"]]
        self.assertIn("agent", names)
        self.assertIn("failproofai-sidecar", names)
        self.assertIn("Secret", [d["kind"] for d in self.docs])

    def test_probe_paths_and_port_match_binary_defaults(self):
        listen = self.default("--listen")  # 127.0.0.1:8787
        host, port = listen.rsplit(":", 1)
        self.assertEqual(self.args().get("--listen", listen), listen)
        live = urlsplit(curl_url(self.sidecar["livenessProbe"]["exec"]["command"]))
        ready = urlsplit(curl_url(self.sidecar["readinessProbe"]["exec"]["command"]))
        for u in (live, ready):
            self.assertEqual((u.hostname, u.port), (host, int(port)))
        self.assertEqual(live.path, "/healthz")
        self.assertEqual(ready.path, "/readyz")
        # drain is SIGTERM's job: no hook curling an endpoint that needs a token
        self.assertNotIn("lifecycle", self.sidecar)
        self.assertIn(int(port), [p["containerPort"] for p in self.sidecar["ports"]])

    def test_grace_period_above_drain_timeout(self):
        drain = float(self.args().get("--drain-timeout", self.default("--drain-timeout")))
        self.assertGreater(self.pod["terminationGracePeriodSeconds"], drain)

    def test_token_from_mounted_secret_and_db_on_volume(self):
        a = self.args()
        self.assertNotIn("FAILPROOFAI_EVALUATOR_TOKEN", [e["name"] for e in self.sidecar.get("env", [])])
        mounts = {m["name"]: m["mountPath"] for m in self.sidecar["volumeMounts"]}
        vols = {v["name"]: v for v in self.pod["volumes"]}
        tok_vol = next(n for n, p in mounts.items() if a["--token-file"].startswith(p + "/"))
        self.assertIn("secret", vols[tok_vol])
        for flag in ("--admin-token-file", "--registration-token-file"):
            vol = next(n for n, p in mounts.items() if a[flag].startswith(p + "/"))
            self.assertIn("secret", vols[vol], flag)
        # the agent's evaluator gets the registration token, never the admin token
        agent = next(c for c in self.pod["containers"] if c["name"] == "agent")
        agent_vols = [vols[m["name"]] for m in agent.get("volumeMounts", [])]
        self.assertTrue(agent_vols)
        for v in agent_vols:
            self.assertEqual([i["key"] for i in v["secret"]["items"]], ["registration-token"])
        db_vol = next(n for n, p in mounts.items() if a["--db"].startswith(p + "/"))
        self.assertTrue("emptyDir" in vols[db_vol] or "persistentVolumeClaim" in vols[db_vol])

    def test_restrictive_security_context(self):
        sc = self.sidecar["securityContext"]
        self.assertIs(sc["allowPrivilegeEscalation"], False)
        self.assertIs(sc["readOnlyRootFilesystem"], True)
        self.assertIs(sc["runAsNonRoot"], True)
        self.assertEqual(sc["capabilities"]["drop"], ["ALL"])
        self.assertNotIn("privileged", sc)

    def test_probe_commands_work_against_the_binary(self):
        """The probe URLs answer as the manifest expects on a real sidecar (its
        port swapped for an ephemeral one) without a token, and SIGTERM
        drains it."""
        with Sidecar(dead_server()) as sc:
            def run(cmd):
                cmd = [c.replace(":8787", f":{sc.port}") for c in cmd]
                return subprocess.run(cmd, capture_output=True, timeout=30).returncode
            self.assertEqual(run(self.sidecar["livenessProbe"]["exec"]["command"]), 0)
            # not registered with any server: the readiness probe must fail
            self.assertNotEqual(run(self.sidecar["readinessProbe"]["exec"]["command"]), 0)
            sc.proc.send_signal(signal.SIGTERM)
            sc.wait_for(lambda: any(r.get("msg") == "signal received: draining"
                                    for r in sc.logs()), what="the drain on SIGTERM")
            self.assertEqual(sc.proc.wait(30), 0)


if __name__ == "__main__":
    unittest.main()

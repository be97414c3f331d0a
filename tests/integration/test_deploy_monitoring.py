"""deploy/prometheus-rules.yaml and deploy/grafana-dashboard.json against a
live sidecar: every metric either of them names is in a fresh /metrics (so
no alert or panel silently watches nothing), promtool accepts the rules and
lints the exposition, and the rules alert on what an operator needs (not
ready, lease loss, failure ratio, outbox age, WAL size)."""

import json
import os
import re
import shutil
import subprocess
import unittest

import yaml
from prometheus_client.parser import text_string_to_metric_families

from admin_harness import SOURCE, Sidecar, dead_server

RULES = os.path.join(SOURCE, "deploy", "prometheus-rules.yaml")
DASHBOARD = os.path.join(SOURCE, "deploy", "grafana-dashboard.json")
METRIC = re.compile(r"\b((?:failproofai_sidecar|process)_[a-z0-9_]+)\b")


def rule_exprs():
    with open(RULES, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    return {r["alert"]: r["expr"] for g in doc["groups"] for r in g["rules"]}


def dashboard_exprs():
    with open(DASHBOARD, encoding="utf-8") as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    return exprs


class MonitoringTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sc = Sidecar(dead_server())
        cls.sc.start()
        cls.text = cls.sc.get("/metrics").raw.decode()
        cls.samples = {s.name for fam in text_string_to_metric_families(cls.text)
                       for s in fam.samples}

    @classmethod
    def tearDownClass(cls):
        cls.sc.stop()

    def check_names(self, exprs, what):
        names = {m for e in exprs for m in METRIC.findall(e)}
        self.assertTrue(names, what)
        missing = sorted(n for n in names if n not in self.samples)
        self.assertEqual(missing, [], f"{what} names metrics a live /metrics lacks")
        return names

    def test_rules_name_live_metrics(self):
        rules = rule_exprs()
        names = self.check_names(rules.values(), "prometheus-rules.yaml")
        for needed in ("failproofai_sidecar_ready", "failproofai_sidecar_leases_lost_total",
                       "failproofai_sidecar_runs_total",
                       "failproofai_sidecar_store_outbox_oldest_age_seconds",
                       "failproofai_sidecar_store_wal_bytes"):
            self.assertIn(needed, names)
        self.assertEqual(len(rules), 5)

    def test_dashboard_names_live_metrics(self):
        names = self.check_names(dashboard_exprs(), "grafana-dashboard.json")
        self.assertIn("failproofai_sidecar_evaluation_duration_seconds_bucket", names)
        self.assertIn("failproofai_sidecar_build_info", names)
        with open(DASHBOARD, encoding="utf-8") as f:
            dash = json.load(f)
        self.assertEqual(len({p["id"] for p in dash["panels"]}), len(dash["panels"]))
        self.assertEqual({v["name"] for v in dash["templating"]["list"]},
                         {"datasource", "instance", "eval_key"})

    def test_promtool(self):
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool (Debian's prometheus package, "
                                       "scripts/install-deps.sh) is needed")
        r = subprocess.run([promtool, "check", "rules", RULES], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("SUCCESS: 5 rules found", r.stdout)
        r = subprocess.run([promtool, "check", "metrics"], input=self.text, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()

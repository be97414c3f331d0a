"""The binary's command line: version, help, unknown commands and flags."""
import os
import subprocess
import unittest

BIN = os.environ["FPS_BIN"]


def run(*args, env=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=30, env=env)


class CliTest(unittest.TestCase):
    def test_version(self):
        r = run("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^failproofai-sidecar \d+\.\d+\.\d+\n$")

    def test_help_lists_commands(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        for cmd in ("run", "eval", "check", "emulator", "demo"):
            self.assertIn(cmd, r.stdout)

    def test_each_command_help(self):
        for cmd in ("run", "eval", "check", "emulator", "demo"):
            r = run(cmd, "--help")
            self.assertEqual(r.returncode, 0, cmd)
            self.assertIn("usage: failproofai-sidecar " + cmd, r.stdout)

    def test_run_help_names_env(self):
        r = run("run", "--help")
        self.assertIn("FAILPROOFAI_EVALUATOR_URL", r.stdout)
        self.assertIn("--server", r.stdout)

    def test_unknown_command(self):
        r = run("frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown command 'frobnicate'", r.stderr)
        self.assertIn("--help", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)

    def test_unknown_flag(self):
        r = run("run", "--frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown flag '--frobnicate'", r.stderr)

    def test_bad_config_is_one_line(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAILPROOFAI_")}
        env["FAILPROOFAI_EVALUATOR_TOKEN"] = "secret-token-value"
        r = run("run", "--server", "http://evaluator.example.com", env=env)
        self.assertEqual(r.returncode, 2)
        self.assertIn("https", r.stderr)
        self.assertNotIn("secret-token-value", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)


if __name__ == "__main__":
    unittest.main()

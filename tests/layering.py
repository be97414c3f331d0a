#!/usr/bin/env python3
"""The layer rule, checked: no first-party file includes a header of a layer
above its own. Layers, lowest first (a layer may include its own headers and
those of every layer it lists):

    common <- sandbox/lang <- sandbox/jail ─┐
    common <- store ────────────────────────┴─ <- api (+ web) <- sidecar
    common <- emulator <- sidecar

and inside sidecar/, whose top folder is the composition root:

    http <- cloud                      (the Evaluator v2 client)
    evaluation                         (what the worker and backtests share)
    http, evaluation <- local          (registry, catalog, dispatch)
    cloud, local, evaluation <- worker
    local, evaluation <- backtest      (never the worker)

Run by ctest as `layering`; prints every offending #include and exits 1."""

import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "--self-test" else
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# layer -> the layers it may include (besides itself)
ALLOWED = {
    "common": set(),
    "sandbox/lang": {"common"},
    "sandbox/jail": {"common", "sandbox/lang"},
    "store": {"common"},
    "web": set(),
    "api": {"common", "sandbox/lang", "sandbox/jail", "store", "web"},
    "emulator": {"common"},
    "sidecar/http": {"common"},
    "sidecar/cloud": {"common", "sandbox/lang", "sidecar/http"},
    "sidecar/local": {"common", "sandbox/lang", "sandbox/jail", "store", "sidecar/http",
                      "sidecar/evaluation"},
    "sidecar/evaluation": {"common", "sandbox/lang", "sandbox/jail"},
    "sidecar/worker": {"common", "sandbox/lang", "sandbox/jail", "store", "sidecar/http",
                       "sidecar/cloud", "sidecar/local", "sidecar/evaluation"},
    "sidecar/backtest": {"common", "sandbox/lang", "sandbox/jail", "store", "sidecar/http",
                         "sidecar/local", "sidecar/evaluation"},
    "sidecar": {"common", "sandbox/lang", "sandbox/jail", "store", "web", "api", "emulator",
                "sidecar/http", "sidecar/cloud", "sidecar/local", "sidecar/evaluation",
                "sidecar/worker", "sidecar/backtest"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    """The layer a repository-relative path belongs to, or None."""
    for name in sorted(ALLOWED, key=len, reverse=True):
        if path == name or path.startswith(name + "/"):
            return name
    return None


def main():
    bad = []
    checked = 0
    for layer in ALLOWED:
        top = os.path.join(ROOT, layer)
        for dirpath, _, files in os.walk(top):
            for f in files:
                if not f.endswith((".c", ".h")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), ROOT)
                if layer_of(rel) != layer:
                    continue  # a nested layer's file, checked under its own name
                checked += 1
                with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m or "/" not in m.group(1):
                            continue
                        target = layer_of(m.group(1))
                        if target is None or target == layer or target in ALLOWED[layer]:
                            continue
                        bad.append(f"{rel}:{n}: {layer} includes {m.group(1)} ({target} is not below it)")
    for b in bad:
        print(b)
    print(f"layering: {checked} files checked, {len(bad)} upward includes")
    return 1 if bad or checked == 0 else 0


def self_test():
    """Proves the check catches what it must: a tree whose only upward include
    (sidecar/cloud including the worker) fails, the same tree without it passes."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory(prefix="fps-layering-") as tmp:
        def write(rel, text):
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        write("common/err.h", "#pragma once\n")
        write("sidecar/worker/worker.h", '#include "sidecar/cloud/cloud.h"\n')
        write("sidecar/cloud/cloud.c", '#include "common/err.h"\n#include "sidecar/http/curl_pool.h"\n')
        write("sidecar/http/curl_pool.h", "#pragma once\n")

        def run():
            return subprocess.run([sys.executable, os.path.abspath(__file__), tmp],
                                  capture_output=True, text=True)
        good = run()
        if good.returncode != 0:
            print("self-test: a tree with no upward include failed:\n" + good.stdout)
            return 1
        write("sidecar/cloud/cloud_claim.c", '#include "sidecar/worker/worker.h"\n')
        bad = run()
        if bad.returncode != 1 or "sidecar/cloud/cloud_claim.c:1: sidecar/cloud includes" not in bad.stdout:
            print(f"self-test: an injected upward include was not caught (exit {bad.returncode}):\n"
                  + bad.stdout)
            return 1
    print("layering self-test: the injected upward include was caught, the clean tree passed")
    return 0


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:2] == ["--self-test"] else main())

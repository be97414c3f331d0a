#!/usr/bin/python3
"""Assembles the reference Python SDK's `failproofai_sdk` package, the copy
FPS_REFSDK names (tests/interop/README.md), from its public source: each
file of refsdk.manifest (path, commit, sha256) fetched from
FailproofAI/failproofai at that commit (sdk/python/<path>) and checked
against its sha256. The SDK left that repository's main branch, and its
files' last versions do not all work together, so the manifest pins a set
that does: its worker short-polls claims and evaluates managed
definitions in `_sandbox_runner` processes. `_version.py`, which the
package imports and the repository does not hold, is written here.

  refsdk_fetch.py DEST            fetch into DEST (needs github.com)
  refsdk_fetch.py --verify DEST   check a copy already in DEST

Standard library only. Exit 0 when every file is present and matches."""
import argparse
import hashlib
import os
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
RAW = "https://raw.githubusercontent.com/FailproofAI/failproofai/{commit}/sdk/python/{path}"
VERSION = '__version__ = "0.0.1b2"\n'  # the version the SDK's CHANGELOG names


def manifest():
    with open(os.path.join(HERE, "refsdk.manifest"), encoding="utf-8") as fh:
        return [line.rstrip("\n").split("\t") for line in fh if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dest")
    ap.add_argument("--verify", action="store_true", help="only check the copy in DEST")
    a = ap.parse_args()
    files = manifest()
    bad = 0
    for path, commit, digest in files:
        out = os.path.join(a.dest, path)
        try:
            if a.verify:
                with open(out, "rb") as fh:
                    data = fh.read()
            else:
                with urllib.request.urlopen(RAW.format(commit=commit, path=path), timeout=60) as r:
                    data = r.read()
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with open(out, "wb") as fh:
                    fh.write(data)
        except OSError as e:
            print(f"{path}: {e}", file=sys.stderr)
            bad += 1
            continue
        got = hashlib.sha256(data).hexdigest()
        if got != digest:
            print(f"{path}: sha256 {got}, the manifest pins {digest} (commit {commit})", file=sys.stderr)
            bad += 1
    version = os.path.join(a.dest, "failproofai_sdk", "_version.py")
    if not a.verify:
        os.makedirs(os.path.dirname(version), exist_ok=True)
        with open(version, "w", encoding="utf-8") as fh:
            fh.write(VERSION)
    elif not os.path.isfile(version):
        print("failproofai_sdk/_version.py: missing", file=sys.stderr)
        bad += 1
    print(f"{len(files) + 1 - bad} of {len(files) + 1} files in place (the manifest's and _version.py)" +
          ("" if bad else f"; export FPS_REFSDK={os.path.abspath(a.dest)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""Locates the reference Python SDK (FailproofAI/failproofai, sdk/python) named
by FPS_REFSDK, for the interop check and the benchmarks that run it side by
side with ours. Owns the one rule they share: the directory goes on sys.path
for this process and on PYTHONPATH for its children, because the reference
evaluates every managed definition in a fresh `python -m
failproofai_sdk.evaluator._sandbox_runner`, which imports the package anew
(with only sys.path changed, each such child dies on the import, prints
nothing, and the reference reports the run as timed out).

What FPS_REFSDK must hold: tests/interop/README.md."""

import os
import sys

# The modules the reference worker and its managed path are made of.
REQUIRED = ("authoring.py", "client.py", "protocol.py", "runtime.py", "source.py", "_sandbox_runner.py")


def root():
    """FPS_REFSDK, or None when it is unset or empty."""
    return os.environ.get("FPS_REFSDK") or None


def problem(path):
    """Why `path` is not a usable reference SDK directory, or None."""
    evaluator = os.path.join(path, "failproofai_sdk", "evaluator")
    if not os.path.isdir(evaluator):
        return f"FPS_REFSDK={path}: no failproofai_sdk/evaluator/ in it (point it at the SDK's sdk/python directory)"
    missing = [m for m in REQUIRED if not os.path.isfile(os.path.join(evaluator, m))]
    if missing:
        return f"FPS_REFSDK={path}: failproofai_sdk/evaluator/ lacks {', '.join(missing)}"
    return None


def activate(path=None):
    """Makes the SDK at `path` (default FPS_REFSDK) importable here and in
    child processes. Raises RuntimeError with the reason when it cannot be."""
    path = path or root()
    if not path:
        raise RuntimeError("FPS_REFSDK is not set: point it at the reference SDK's sdk/python directory")
    path = os.path.abspath(path)
    why = problem(path)
    if why:
        raise RuntimeError(why)
    if path not in sys.path:
        sys.path.insert(0, path)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if path not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([path] + parts)
    return path

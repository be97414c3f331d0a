"""The benchmark's anchor: the reference SDK's way of running one managed
evaluation, rewritten here (our own code) so it runs without the SDK.

Per evaluation, as the reference worker does it (source.py _run_sandboxed and
_sandbox_runner.py): the parent turns the session back into its wire dict,
pickles (kind, source, wire, cpu_seconds, mem_bytes, eval_key) into a temp
file, takes a slot of a 4-slot semaphore, starts a FRESH `python3` process
(scrubbed environment, stdout piped) and reads at most 1 MiB from it before a
wall-clock deadline, killing it on timeout/overflow; the child imports what the
SDK's evaluator package imports (the -m runner loads the package __init__:
authoring, client, protocol, runtime, source), unpickles its input, rebuilds the
transcript as dataclasses, compiles + AST-validates the source, installs
RLIMIT_CPU and RLIMIT_AS on itself, evaluates, validates the result and pickles
the outcome to stdout.

usage: anchor.py TRANSCRIPT.json N EXPR   -> one JSON line of latencies (ms)
       anchor.py --child INPUT.pkl        (internal)
"""
import dataclasses
import json
import math
import os
import pickle
import re
import select
import subprocess
import sys
import tempfile
import threading
import time

MAX_RESULT = 1 << 20
SLOTS = threading.Semaphore(4)
ENV_PASSTHROUGH = ("PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE",
                   "PYTHONUNBUFFERED", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR")


# ------------------------------------- the SDK's data types (picklable)

@dataclasses.dataclass(frozen=True)
class Event:
    id: str
    ts: str
    event_type: str
    payload: dict

@dataclasses.dataclass(frozen=True)
class Session:
    assignment_id: str
    session_id: str
    session_revision_id: str
    agent_id: str
    environment: str
    started_at: str
    ended_at: str
    event_count: int
    events: tuple
    schema_version: str = "2"

    def events_of_type(self, t):
        return tuple(e for e in self.events if e.event_type == t)

    def count(self, t):
        return sum(1 for e in self.events if e.event_type == t)

def text_ok(v, limit):
    if not isinstance(v, str) or not v or len(v.encode()) > limit:
        raise ValueError("invalid text")
    if any(ord(c) < 32 and c not in "\t\n\r" for c in v):
        raise ValueError("control characters")

@dataclasses.dataclass(frozen=True)
class Score:
    value: float
    passed: object = None
    unit: str = "ratio"
    display_value: object = None
    description: object = None

    def __post_init__(self):
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            raise TypeError("score must be a number")
        if not math.isfinite(self.value) or not 0 <= self.value <= 1:
            raise ValueError("score must be in [0, 1]")
        text_ok(self.unit, 64)

@dataclasses.dataclass(frozen=True)
class Metric:
    value: float
    unit: str = ""
    display_value: object = None
    description: object = None

@dataclasses.dataclass(frozen=True)
class Assertion:
    passed: bool
    description: object = None

@dataclasses.dataclass(frozen=True)
class ConditionResult:
    applicable: bool
    reason_code: str = "condition_false"

KEY_RE = re.compile(r"^[a-z][a-z0-9_]*$")

@dataclasses.dataclass(frozen=True)
class EvalResult:
    score: object = None
    metrics: dict = dataclasses.field(default_factory=dict)
    assertions: dict = dataclasses.field(default_factory=dict)
    reasoning: object = None
    summary: object = None
    labels: tuple = ()

    def result_items(self, key):
        items = []
        if self.score is not None:
            items.append((key, "score", self.score.value))
        for k in sorted(self.metrics):
            v = self.metrics[k]
            items.append((k, "metric", v.value if isinstance(v, Metric) else float(v)))
        for k in sorted(self.assertions):
            v = self.assertions[k]
            items.append((k, "assertion", v.passed if isinstance(v, Assertion) else bool(v)))
        if not 1 <= len(items) <= 25:
            raise ValueError("at most 25 results")
        for k, _, _ in items:
            if not KEY_RE.match(k):
                raise ValueError("bad key")
        return items


# ---------------------------------------------------------------- child side

def child(path):
    # What `python -m failproofai_sdk.evaluator._sandbox_runner` pulls in
    # through the package __init__ (client: urllib/http/ssl/json; runtime:
    # asyncio, concurrent.futures, logging; protocol/authoring: dataclasses,
    # enum, typing, re, math; source: ast, hashlib, subprocess, tempfile, ...).
    import ast  # noqa: F401
    import asyncio  # noqa: F401
    import concurrent.futures  # noqa: F401
    import enum  # noqa: F401
    import hashlib  # noqa: F401
    import http.client  # noqa: F401
    import logging  # noqa: F401
    import random  # noqa: F401
    import resource
    import ssl  # noqa: F401
    import typing  # noqa: F401
    import urllib.parse  # noqa: F401
    import urllib.request  # noqa: F401
    import uuid  # noqa: F401

    with open(path, "rb") as f:
        kind, source, wire, cpu_seconds, mem_bytes, eval_key = pickle.loads(f.read())

    allowed = (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.IfExp, ast.Dict, ast.Set,
               ast.List, ast.Tuple, ast.ListComp, ast.SetComp, ast.DictComp, ast.comprehension,
               ast.Compare, ast.Call, ast.FormattedValue, ast.JoinedStr, ast.Constant, ast.Name,
               ast.Load, ast.Store, ast.Attribute, ast.Subscript, ast.Slice, ast.keyword, ast.And,
               ast.Or, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
               ast.USub, ast.UAdd, ast.Not, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
               ast.In, ast.NotIn, ast.Is, ast.IsNot)

    try:
        events = tuple(Event(e["id"], e["ts"], e["event_type"], dict(e["payload"]))
                       for e in wire["events"])
        session = Session(wire["assignment_id"], wire["session_id"], wire["session_revision_id"],
                          wire["agent_id"], wire["environment"], wire["started_at"],
                          wire["ended_at"], wire["event_count"], events)
        tree = ast.parse(source, mode="eval")
        nodes = list(ast.walk(tree))
        if len(nodes) > 5000:
            raise SyntaxError("too large")
        for node in nodes:
            if not isinstance(node, allowed):
                raise SyntaxError(f"disallowed syntax: {type(node).__name__}")
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                raise SyntaxError("private attribute")
            if isinstance(node, ast.Name) and node.id.startswith("_"):
                raise SyntaxError("private name")
        code = compile(tree, "<managed>", "eval")
        cpu = max(1, int(cpu_seconds))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
        env = {"__builtins__": {}, "session": session, "Score": Score, "Metric": Metric,
               "Assertion": Assertion, "EvalResult": EvalResult, "ConditionResult": ConditionResult}
        for name in ("abs", "all", "any", "bool", "dict", "float", "int", "len", "list", "max", "min",
                     "range", "round", "set", "sorted", "str", "sum", "tuple"):
            env[name] = getattr(__builtins__, name) if not isinstance(__builtins__, dict) \
                else __builtins__[name]
        result = eval(code, env)
        if kind == "evaluator":
            result.result_items(eval_key or "result")
        payload = pickle.dumps(("ok", result))
    except BaseException as error:  # noqa: BLE001
        payload = pickle.dumps(("err", type(error).__name__, str(error)[:500]))
    sys.stdout.buffer.write(payload)
    sys.stdout.buffer.flush()


# --------------------------------------------------------------- parent side

def to_wire(session):
    """The reference re-serializes the session for every evaluation."""
    return {**{k: v for k, v in session.items() if k != "events"},
            "events": [{"id": e["id"], "ts": e["ts"], "event_type": e["event_type"],
                        "payload": e["payload"]} for e in session["events"]]}


def run_sandboxed(kind, source, session, timeout=30.0, eval_key="q"):
    payload = pickle.dumps((kind, source, to_wire(session), timeout, 512 << 20, eval_key))
    handle, path = tempfile.mkstemp(prefix="anchor-sandbox-", suffix=".pkl")
    try:
        with os.fdopen(handle, "wb") as tmp:
            tmp.write(payload)
        deadline = time.monotonic() + timeout
        if not SLOTS.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise TimeoutError("slot")
        try:
            env = {k: os.environ[k] for k in ENV_PASSTHROUGH if os.environ.get(k)}
            proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", path],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, env=env)
            chunks, total, fd = [], 0, proc.stdout.fileno()
            try:
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError("deadline")
                    ready, _, _ = select.select([fd], [], [], left)
                    if not ready:
                        raise TimeoutError("deadline")
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    total += len(chunk)
                    if total > MAX_RESULT:
                        raise TimeoutError("too large")
                    chunks.append(chunk)
            finally:
                proc.stdout.close()
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
        finally:
            SLOTS.release()
    finally:
        os.unlink(path)
    return pickle.loads(b"".join(chunks))


def main():
    if sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    with open(sys.argv[1], encoding="utf-8") as f:
        session = json.load(f)
    n, expr = int(sys.argv[2]), sys.argv[3]
    lat, last = [], None
    for _ in range(n):
        t = time.monotonic()
        last = run_sandboxed("evaluator", expr, session)
        lat.append((time.monotonic() - t) * 1e3)
    lat.sort()
    print(json.dumps({"n": n, "p50_ms": lat[len(lat) // 2], "p99_ms": lat[min(n - 1, int(n * 0.99))],
                      "mean_ms": sum(lat) / n, "last": repr(last)[:120]}))


if __name__ == "__main__":
    main()

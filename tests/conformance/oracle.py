"""Conformance oracle: a CPython model of the managed-evaluation language.

Owns the expected side of the conformance corpus and the differential fuzzer
(docs/LANGUAGE.md). CPython 3.11 evaluates the expression; this module supplies
what the reference worker (FailproofAI/failproofai sdk/python/.../evaluator)
puts around it:

  * the source checks (the rule table of docs/LANGUAGE.md, nodes counted with
    ast.walk, same messages in the same order as the reference's _compile);
  * the `session` object and its events (frozen dataclasses shaped like the
    reference's SessionTranscript / TranscriptEvent, so reprs, equality and
    hashing match);
  * the five result types with the reference's validation (same exception
    types and messages) and its result items on the wire;
  * the globals: only the allowlisted builtins and constructors, `session`
    bound as a *local* of the eval (exactly as the reference does it, so a
    comprehension body other than its first iterable cannot see `session`);
  * outcome(kind, source, eval_key, transcript) -> the outcome dict of
    docs/LANGUAGE.md's last section.

Written independently of the reference (standard library only).
"""
from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

# ---------------------------------------------------------------- limits
MAX_CONDITION_SOURCE_BYTES = 16 * 1024
MAX_EVALUATOR_SOURCE_BYTES = 128 * 1024
MAX_AST_NODES = 5000
MAX_POW_EXPONENT = 64

MAX_RESULTS_PER_RUN = 25
MAX_EVAL_KEY_BYTES = 128
MAX_LABEL_BYTES = 64
MAX_LABELS_PER_RESULT = 20
MAX_SUMMARY_BYTES = 4 * 1024
MAX_REASONING_BYTES = 16 * 1024
MAX_UNIT_BYTES = 64
MAX_DISPLAY_VALUE_BYTES = 256
MAX_DESCRIPTION_BYTES = 1000

KEY_PATTERN = "^[a-z][a-z0-9_]*$"
_KEY_RE = re.compile(KEY_PATTERN)

AUTHORING_MODULE = "failproofai_sdk.evaluator.authoring"
PROTOCOL_MODULE = "failproofai_sdk.evaluator.protocol"


# ------------------------------------------------------ field validation
def _text(value: Any, name: str, limit: int) -> str:
    """A bounded, non-empty text field (TypeError / ValueError as the SDK)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string")
    if value == "":
        raise ValueError(f"{name} must not be empty")
    nbytes = len(value.encode("utf-8"))
    if nbytes > limit:
        raise ValueError(f"{name} is {nbytes} bytes; maximum is {limit}")
    for ch in value:  # C0 controls and DEL, except tab / newline / CR
        code = ord(ch)
        if (code < 0x20 and ch not in "\t\n\r") or code == 0x7F:
            raise ValueError(
                f"{name} must not contain control characters (found U+{code:04X})")
    return value


def _number(value: Any, name: str) -> float:
    """A finite number, bool excluded; converted to float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number")
    as_float = float(value)
    if not math.isfinite(as_float):
        raise ValueError(f"{name} must be finite")
    return as_float


def _key(value: Any, name: str) -> str:
    _text(value, name, MAX_EVAL_KEY_BYTES)
    if _KEY_RE.fullmatch(value) is None:
        raise ValueError(f"{name} must match {KEY_PATTERN}")
    return value


def _label_tuple(values: list) -> tuple:
    if len(values) > MAX_LABELS_PER_RESULT:
        raise ValueError(f"at most {MAX_LABELS_PER_RESULT} labels are allowed")
    checked = [_text(v, "label", MAX_LABEL_BYTES) for v in values]
    if len(checked) != len(set(checked)):
        raise ValueError("labels must be unique")
    return tuple(sorted(checked))


def _optional_texts(unit: Any, display_value: Any, description: Any) -> None:
    # The unit is only checked when truthy (an empty unit means "none").
    if unit:
        _text(unit, "unit", MAX_UNIT_BYTES)
    if display_value is not None:
        _text(display_value, "display value", MAX_DISPLAY_VALUE_BYTES)
    if description is not None:
        _text(description, "description", MAX_DESCRIPTION_BYTES)


# ----------------------------------------------------------- result types
@dataclass(frozen=True)
class Score:
    value: float
    passed: bool | None = None
    unit: str = "ratio"
    display_value: str | None = None
    description: str | None = None

    def __post_init__(self) -> None:
        number = _number(self.value, "score value")
        if not (0 <= number <= 1):
            raise ValueError("score value must be between 0 and 1")
        object.__setattr__(self, "value", number)
        if self.passed is not None and not isinstance(self.passed, bool):
            raise TypeError("score passed must be a boolean or None")
        _optional_texts(self.unit, self.display_value, self.description)


@dataclass(frozen=True)
class Metric:
    value: float
    unit: str = ""
    display_value: str | None = None
    description: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", _number(self.value, "metric value"))
        _optional_texts(self.unit, self.display_value, self.description)


@dataclass(frozen=True)
class Assertion:
    passed: bool
    description: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.passed, bool):
            raise TypeError("assertion passed must be a boolean")
        if self.description is not None:
            _text(self.description, "description", MAX_DESCRIPTION_BYTES)


@dataclass(frozen=True)
class ConditionResult:
    applicable: bool
    reason_code: str = "condition_false"

    def __post_init__(self) -> None:
        if not isinstance(self.applicable, bool):
            raise TypeError("condition applicable must be a boolean")
        _key(self.reason_code, "condition reason code")


def _item(key, kind, numeric=None, boolean=None, unit="", display_value=None,
          description=None, reasoning=None, labels=()) -> dict:
    """One result item as it crosses the wire (ResultItem.to_wire())."""
    return {
        "result_key": key,
        "result_kind": kind,
        "numeric_value": numeric,
        "bool_value": boolean,
        "text_value": None,
        "unit": unit,
        "display_value": display_value,
        "description": description,
        "reasoning": reasoning,
        "labels": list(labels),
    }


@dataclass(frozen=True)
class EvalResult:
    score: Score | None = None
    metrics: Mapping[str, Metric | float] = field(default_factory=dict)
    assertions: Mapping[str, Assertion | bool] = field(default_factory=dict)
    reasoning: str | None = None
    summary: str | None = None
    labels: tuple = ()

    def __post_init__(self) -> None:
        if self.reasoning is not None:
            _text(self.reasoning, "reasoning", MAX_REASONING_BYTES)
        if self.summary is not None:
            _text(self.summary, "summary", MAX_SUMMARY_BYTES)
        object.__setattr__(self, "labels", _label_tuple(list(self.labels)))

    def wire_items(self, eval_key: str) -> list:
        """The result items in order (score, metrics by key, assertions by
        key), validated as the reference's result_items()."""
        items = []
        if self.score is not None:
            s = self.score
            items.append(_item(eval_key, "score", s.value, s.passed, s.unit,
                               s.display_value, s.description, self.reasoning,
                               self.labels))
        for key, raw in sorted(self.metrics.items()):
            _key(key, "metric key")
            metric = raw if isinstance(raw, Metric) else Metric(raw)
            items.append(_item(key, "metric", metric.value, None, metric.unit,
                               metric.display_value, metric.description,
                               self.reasoning if key == eval_key else None,
                               self.labels))
        for key, raw in sorted(self.assertions.items()):
            _key(key, "assertion key")
            assertion = raw if isinstance(raw, Assertion) else Assertion(raw)
            items.append(_item(key, "assertion", None, assertion.passed, "",
                               None, assertion.description,
                               self.reasoning if key == eval_key else None,
                               self.labels))
        if not items:
            raise ValueError("an EvalResult must contain a score, metric, or assertion")
        if len(items) > MAX_RESULTS_PER_RUN:
            raise ValueError(
                f"an EvalResult may contain at most {MAX_RESULTS_PER_RUN} results")
        keys = [i["result_key"] for i in items]
        if len(set(keys)) != len(keys):
            raise ValueError("result keys must be unique within one evaluation run")
        # Values pass through asdict() in the reference: deep copies, same data.
        return items


for _cls in (Score, Metric, Assertion, ConditionResult, EvalResult):
    _cls.__module__ = AUTHORING_MODULE


# -------------------------------------------------------------- session
@dataclass(frozen=True)
class TranscriptEvent:
    id: str
    ts: str
    event_type: str
    payload: Mapping[str, Any]


@dataclass(frozen=True)
class SessionTranscript:
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

    def events_of_type(self, event_type):
        return tuple(e for e in self.events if e.event_type == event_type)

    def count(self, event_type):
        return sum(e.event_type == event_type for e in self.events)


for _cls in (TranscriptEvent, SessionTranscript):
    _cls.__module__ = PROTOCOL_MODULE


def session_from_wire(data: Mapping[str, Any]) -> SessionTranscript:
    """Builds the session from a transcript JSON object (already loaded with
    json.loads, so numbers are int/float as Python's json makes them)."""
    events = tuple(
        TranscriptEvent(id=e["id"], ts=e["ts"], event_type=e["event_type"],
                        payload=dict(e["payload"]))
        for e in data["events"])
    if data.get("schema_version") != "2":
        raise ValueError("unsupported transcript schema version")
    if data["event_count"] != len(events):
        raise ValueError("event_count does not match the events")
    return SessionTranscript(
        assignment_id=data["assignment_id"], session_id=data["session_id"],
        session_revision_id=data["session_revision_id"], agent_id=data["agent_id"],
        environment=data["environment"], started_at=data["started_at"],
        ended_at=data["ended_at"], event_count=data["event_count"], events=events)


# ------------------------------------------------------------ source checks
ALLOWED_NODES = tuple(getattr(ast, n) for n in """
Expression BoolOp BinOp UnaryOp IfExp Dict Set List Tuple ListComp SetComp
DictComp comprehension Compare Call FormattedValue JoinedStr Constant Name Load
Store Attribute Subscript Slice keyword And Or Add Sub Mult Div FloorDiv Mod Pow
USub UAdd Not Eq NotEq Lt LtE Gt GtE In NotIn Is IsNot""".split())

DATA_ATTRS = frozenset("""events event_count event_type payload id ts agent_id
environment session_id session_revision_id assignment_id started_at ended_at
schema_version""".split())

METHOD_ATTRS = frozenset("""events_of_type count get keys values items lower
upper strip lstrip rstrip split rsplit splitlines startswith endswith replace
find rfind index join title capitalize casefold swapcase isdigit isalpha isalnum
isspace isnumeric isdecimal islower isupper istitle zfill ljust rjust center
partition rpartition removeprefix removesuffix encode decode hex union
intersection difference symmetric_difference issubset issuperset
isdisjoint""".split())

BUILTIN_NAMES = ("abs all any bool dict float int len list max min range round "
                 "set sorted str sum tuple").split()


class SourceRejected(Exception):
    """A source-check failure; str(e) is the wire message."""


def field_for(kind: str) -> tuple[str, int]:
    if kind == "condition":
        return "condition_source", MAX_CONDITION_SOURCE_BYTES
    return "evaluator_source", MAX_EVALUATOR_SOURCE_BYTES


def check_source(kind: str, source: str) -> ast.Expression:
    """Applies the source checks; returns the tree or raises SourceRejected."""
    name, limit = field_for(kind)
    if not isinstance(source, str) or not source.strip():
        raise SourceRejected(f"{name} must not be empty")
    if len(source.encode("utf-8")) > limit:
        raise SourceRejected(f"{name} exceeds {limit} bytes")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError:
        raise SourceRejected(f"{name} must be one expression") from None
    called = {id(n.func) for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    for count, node in enumerate(ast.walk(tree), start=1):
        if count > MAX_AST_NODES:
            raise SourceRejected(f"{name} is too large ({MAX_AST_NODES}-node ceiling)")
        if not isinstance(node, ALLOWED_NODES):
            raise SourceRejected(
                f"{name} contains disallowed syntax: {type(node).__name__}")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            exp = node.right
            ok = (isinstance(exp, ast.Constant) and type(exp.value) is int
                  and 0 <= exp.value <= MAX_POW_EXPONENT)
            if not ok:
                raise SourceRejected(
                    f"{name} exponent must be an integer constant in 0..{MAX_POW_EXPONENT}")
        if isinstance(node, ast.Attribute):
            attr = node.attr
            if attr.startswith("_"):
                raise SourceRejected(f"{name} may not access private or dunder attributes")
            if attr not in DATA_ATTRS and attr not in METHOD_ATTRS:
                raise SourceRejected(f"{name} may not access attribute '{attr}'")
            if attr in METHOD_ATTRS and id(node) not in called:
                raise SourceRejected(
                    f"{name} may reference method '{attr}' only to call it; "
                    "a bare bound method leaks a heap address when stringified")
        if isinstance(node, ast.Name) and node.id.startswith("_"):
            raise SourceRejected(f"{name} may not access private names")
    return tree


# ------------------------------------------------------------- evaluation
def fresh_globals() -> dict:
    import builtins
    g = {"__builtins__": {}}
    for n in BUILTIN_NAMES:
        g[n] = getattr(builtins, n)
    for cls in (Score, Metric, Assertion, EvalResult, ConditionResult):
        g[cls.__name__] = cls
    return g


def evaluate(tree: ast.Expression, session: Any, kind: str) -> Any:
    name, _ = field_for(kind)
    code = compile(tree, f"<{name}>", "eval", dont_inherit=True, optimize=2)
    return eval(code, fresh_globals(), {"session": session})  # noqa: S307


# The reference also rejects a condition/evaluator value whose repr looks like
# a heap address (defence in depth, `_forbid_object_reprs`). docs/LANGUAGE.md does
# not specify that outcome, so the generators drop every case that hits it.
OBJECT_REPR = re.compile(r" at 0x[0-9a-fA-F]+|0x[0-9a-fA-F]{6,}")
UNSAFE_OUTCOME = {"ok": False, "stage": "runtime", "error_type": "UnsafeEvaluatorSource"}


def outcome(kind: str, source: str, eval_key: str | None, transcript: Any) -> dict:
    """The outcome dict of docs/LANGUAGE.md for one input line. `transcript` is a
    SessionTranscript (or a loaded transcript dict, converted here)."""
    session = transcript
    if isinstance(transcript, Mapping):
        session = session_from_wire(transcript)
    try:
        tree = check_source(kind, source)
    except SourceRejected as rejected:
        return {"ok": False, "stage": "compile", "message": str(rejected)}
    try:
        value = evaluate(tree, session, kind)
        if kind == "raw":
            return {"ok": True, "repr": repr(value)}
        if kind == "condition":
            if not isinstance(value, (bool, ConditionResult)):
                raise TypeError("condition_source must return bool or ConditionResult")
            if OBJECT_REPR.search(repr(value)):
                return UNSAFE_OUTCOME
            if isinstance(value, ConditionResult):
                applicable, reason = value.applicable, value.reason_code
            else:
                applicable, reason = value, "condition_false"
            if applicable:
                return {"ok": True, "applicable": True}
            return {"ok": True, "applicable": False, "reason_code": reason}
        if not isinstance(value, EvalResult):
            raise TypeError("evaluator_source must return EvalResult")
        if OBJECT_REPR.search(repr(value)):
            return UNSAFE_OUTCOME
        items = value.wire_items(eval_key or "q")
        # Round-trip through JSON as the wire does (validates serializability).
        items = json.loads(json.dumps(items, ensure_ascii=False, allow_nan=False))
        return {"ok": True, "results": items, "summary": value.summary}
    except Exception as error:  # the expression's own exception
        return {"ok": False, "stage": "runtime", "error_type": type(error).__name__}


def outcome_line(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False)


def strict_equal(a: Any, b: Any) -> bool:
    """JSON values equal with exact types (1 != 1.0 != True), floats exact."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def run_batch(lines, transcript: Mapping[str, Any]) -> list:
    """Outcomes of input lines ({"kind", "source", "eval_key"?} JSON), in order."""
    import warnings
    warnings.simplefilter("ignore")
    session = session_from_wire(transcript)
    out = []
    for line in lines:
        case = json.loads(line)
        out.append(outcome(case["kind"], case["source"], case.get("eval_key"), session))
    return out


if __name__ == "__main__":
    # oracle.py --batch TRANSCRIPT < input.jsonl > outcomes.jsonl
    # oracle.py KIND SOURCE [TRANSCRIPT]
    import sys
    if sys.argv[1] == "--batch":
        with open(sys.argv[2], encoding="utf-8") as fh:
            data = json.load(fh)
        lines = [ln for ln in sys.stdin.read().split("\n") if ln.strip()]
        for result in run_batch(lines, data):
            sys.stdout.write(outcome_line(result) + "\n")
        sys.exit(0)
    path = sys.argv[3] if len(sys.argv) > 3 else None
    data = json.load(open(path, encoding="utf-8")) if path else None
    sess = session_from_wire(data) if data else None
    print(outcome_line(outcome(sys.argv[1], sys.argv[2], "q", sess)))

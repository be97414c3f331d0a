#!/usr/bin/python3
"""Generates the conformance corpus of the managed-evaluation language.

Writes, next to this file:
  transcript.json  the fixed sample transcript (make_transcript.py)
  corpus.jsonl     input lines {"kind", "source", "eval_key"?} for `eval --batch`
  expected.jsonl   CPython's outcome for each line (oracle.py), same order

Deterministic: the case list is built without any hash-order dependence, and
every case is evaluated by the oracle in three processes with different
PYTHONHASHSEEDs; a case whose outcome differs between them (set-of-strings
iteration order, the one allowed difference of docs/LANGUAGE.md) is dropped.

Run: /usr/bin/python3 tests/conformance/gen_corpus.py
"""
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_transcript  # noqa: E402

CASES = []
_SEEN = set()


def add(kind, source, eval_key=None):
    key = (kind, source, eval_key)
    if key in _SEEN:
        return
    _SEEN.add(key)
    case = {"kind": kind, "source": source}
    if eval_key is not None:
        case["eval_key"] = eval_key
    CASES.append(case)


def R(*sources):
    for s in sources:
        add("raw", s)


def E(*sources, eval_key=None):
    for s in sources:
        add("evaluator", s, eval_key)


def C(*sources):
    for s in sources:
        add("condition", s)


# ------------------------------------------------------------------ literals
def literals():
    R("0", "-0", "1_000_000", "0x1F", "0XfF", "0o17", "0O777", "0b1011", "0B0", "00",
      "123456789012345678901234567890", "-123456789012345678901234567890",
      "0x_ff", "1_0.0_1", "9" * 60,
      "0.1", "1.0", "-0.0", "0.0", ".5", "5.", "1e5", "1E+05", "1e-5", "1e16", "1e15",
      "1e22", "1e23", "123456789.123456789", "1.7976931348623157e308", "5e-324",
      "2.2250738585072014e-308", "0.1 + 0.2", "1 / 3", "2 / 3", "100.0", "1e100",
      "12345678901234567.0", "0.000123", "0.0001", "1_000.000_1", "3.141592653589793",
      "1e309", "-1e309", "4.35", "0.3", "2.675", "1e-7", "123e-20",
      "1j", "2.5j", "1 + 2j", "(1 + 2j) * (3 - 1j)", "abs(3 + 4j)", "1j * 1j", "-1j",
      "0j", "(1+2j) == (1+2j)", "True", "False", "None", "...",
      "'abc'", '"abc"', "'it\\'s'", '"it\'s"', "'a\"b'", "'a\\'b\"c'", "''", '""',
      "'''tri\nple'''", '"""x"y"""', "'a' 'b' \"c\"", "('con'\n 'cat')",
      "'\\x41\\x42'", "'\\u00e9'", "'\\U0001F600'", "'\\N{BULLET}'", "'\\N{GREEK SMALL LETTER ALPHA}'",
      "'\\t\\n\\r\\\\'", "'\\a\\b\\f\\v'", "'\\0'", "'\\101'", "'\\7'", "'\\x00'",
      "'\\x7f'", "'\\x80'", "'\\xa0'", "'\\xad'", "'\\u200b'", "'\\u2028'", "'\\u0378'",
      "'\\ud800'", "'\\U0010ffff'", "'é'", "'日本'", "'😀'", "'e\\u0301'",
      "r'\\n'", "R'\\d+'", "r'a\\'b'", "u'x'", "U'x'", "b'abc'", "B'abc'", "b'\\x00\\xff'",
      "br'\\x'", "Rb'\\x'", "bR'x'", "b'\\n\\t\\''", "b'\"'", "b'\\'\"'", "b''",
      "f'x'", "F'x'", "fr'{1}\\n'", "Rf'{1}\\n'", "rF'x'",
      "'\\q'", "'a\\\nb'", "b'\\x7f\\x80'", "bytes_" if False else "'x' * 0",
      "(1)", "((1, 2))", "(1,)", "()", "[]", "{}", "[1, 2, 3]", "[1, [2, [3, []]]]",
      "(1, 'a', None, True, 2.5)", "{'a': 1, 'b': [2]}", "{1: 'x', 2.5: None, (1, 2): []}",
      "{1, 2, 3}", "{3, 1, 2}", "{8, 1}", "{100, 5, 33}", "{-1, -2, 1}", "{1.5, 2, 0.5}",
      "{True, 1, 1.0}", "{1, True}", "{0, False, 0.0}", "{'a': 1, 'a': 2}", "{1: 'a', 1.0: 'b', True: 'c'}",
      "[1, 2,]", "{'k': 'v',}", "(1, 2,)", "[\n1,\n2\n]", "{**{'a': 1}, 'b': 2}",
      "{**{'a': 1}, **{'a': 2}}", "{'a': 0, **{'a': 1}}", "{**{}}", "{**[1]}",
      "set()", "{(1, 2), (1, 2)}", "{x for x in range(30, 0, -3)}", "set(range(20, 0, -1))",
      "{-5, 5, 13, 21}", "{2 ** 62, 1, 2 ** 61}", "{2 ** 64, 7}")


# ------------------------------------------------------------------ operators
NUMS = ["0", "1", "-1", "7", "-7", "3", "10 ** 20", "-(10 ** 20)", "2 ** 64",
        "0.0", "-0.0", "1.5", "-2.5", "0.1", "1e308", "1e-300",
        "True", "False"]
OTHERS = ["'ab'", "''", "[1, 2]", "[]", "(1,)", "()", "None", "{'a': 1}", "{1, 2}",
          "b'x'", "range(3)", "1j"]
ARITH = ["+", "-", "*", "/", "//", "%"]


def operators():
    rnd = random.Random(3)
    for op in ARITH:
        for a in NUMS:
            for b in NUMS:
                if rnd.random() < 0.2 or a == b:
                    R(f"{a} {op} {b}" if not a.startswith("-(") else f"({a}) {op} {b}")
    mixed = NUMS[:4] + ["1.5", "True", "0"] + OTHERS
    for op in ARITH:
        for a in mixed:
            for b in OTHERS:
                if rnd.random() < 0.08:
                    R(f"{a} {op} {b}")
                if rnd.random() < 0.08:
                    R(f"{b} {op} {a}")
    # sequence repetition / concatenation
    for seq in ["'ab'", "[1, 2]", "(1,)", "b'xy'", "''", "[]"]:
        for n in ["0", "1", "3", "-2", "True", "False", "2.0", "10 ** 20 - 10 ** 20"]:
            R(f"{seq} * {n}", f"{n} * {seq}")
        R(f"{seq} + {seq}")
    R("'a' + 'b' + 'c'", "[1] + [2] + [3]", "[1] + (2,)", "(1,) + [2]", "'a' + 1", "1 + 'a'",
      "[[0]] * 3", "'é' * 3", "[1] * (2 ** 64)", "'x' * -(2 ** 64)")
    # floor division and modulo signs
    for a in ["7", "-7", "7.5", "-7.5", "0", "-0.0", "10 ** 20 + 1", "-(10 ** 20 + 1)", "1e300", "True"]:
        for b in ["2", "-2", "2.5", "-2.5", "3", "-3", "0", "0.0", "-0.0", "1e-300", "10 ** 19", "True", "False"]:
            R(f"({a}) // ({b})", f"({a}) % ({b})")
            if rnd.random() < 0.3:
                R(f"({a}) / ({b})")
    # powers (exponent must be a literal 0..64)
    for base in ["2", "-2", "0", "1", "-1", "10", "3", "0.5", "-0.5", "2.0", "-8", "1.1",
                 "True", "False", "1e10", "1e200", "0.0", "-0.0", "7.5", "(1 + 1j)", "'a'", "[1]", "None"]:
        for e in ["0", "1", "2", "3", "17", "53", "64"]:
            R(f"({base}) ** {e}")
    R("2 ** 3 ** 0 if False else 1", "-2 ** 2", "(-2) ** 2", "2 ** 0x10", "2 ** 0o7", "2 ** 1_0",
      "(2 ** 64) ** 64", "((10 ** 64) ** 64) * 10 ** 64 // 10 ** 64", "len(str((10 ** 64) ** 67))",
      "len(str((10 ** 64) ** 68))", "str((10 ** 64) ** 68)[:5]", "int('1' * 4300) % 7",
      "int('1' * 4301)", "(10 ** 64) ** 7 / 1", "float((10 ** 64) ** 5)", "(10 ** 64) ** 5 / (10 ** 64) ** 4",
      "(2 ** 64 + 1) / 2 ** 64", "10 ** 30 / 3", "(2 ** 53 + 1) / 1", "2 ** 1023 * 2.0", "2 ** 64 * 2 ** 64",
      "-(2 ** 63)", "(10 ** 30) // 7", "-(10 ** 30) // 7", "-(10 ** 30) % 7", "(10 ** 30) % -7",
      "(2 ** 100) // (2 ** 50)", "(3 ** 40) % (2 ** 33)", "7 // -(2 ** 70)", "-7 % (2 ** 70)",
      "(10 ** 20) * 1.0", "(10 ** 20) + 0.5", "1e308 * 10", "-1e308 * 10", "1e308 + 1e308 - 1e308",
      "0.0 * -1", "-0.0 + 0.0", "-0.0 - 0.0", "-0.0 * 1", "1 / -1e-320", "float('inf') - float('inf')",
      "float('inf') * 0", "float('inf') // 1", "float('inf') % 2", "5 % float('inf')",
      "-5 % float('inf')", "5 // float('inf')", "-5 // float('inf')", "float('nan') // 1",
      "7.0 // 0.1", "7.0 % 0.1", "-7.0 % 0.1", "1 % 0.3", "0.3 % 0.1", "2 ** 0.5 if False else 1",
      "True + True", "True * 3", "-True", "+True", "True / 2", "False // True", "True - 1.5")
    for op in ["-", "+", "not "]:
        for a in NUMS + OTHERS:
            R(f"{op}{a}" if not a.startswith("-") else f"{op}({a})")
    R("--1", "-+-1", "not not 1", "- - -1.5", "+'a'", "-'a'", "-[1]", "+None", "-None")


# ------------------------------------------------------------------ comparisons
def comparisons():
    vals = ["1", "1.0", "True", "0", "False", "0.0", "-0.0", "2", "10 ** 20", "1e20",
            "2 ** 53 + 1", "2.0 ** 53", "float('nan')", "float('inf')", "'a'", "'b'", "'ab'", "''",
            "[1, 2]", "[1, 3]", "[1]", "(1, 2)", "(1,)", "None", "{1}", "{1, 2}", "{'a': 1}",
            "b'a'", "range(2)", "1j"]
    rnd = random.Random(7)
    ops = ["==", "!=", "<", "<=", ">", ">="]
    for op in ops:
        for a in vals:
            for b in vals:
                if rnd.random() < 0.05 or (a == b and rnd.random() < 0.5):
                    R(f"{a} {op} {b}")
    R("1 < 2 < 3", "1 < 3 > 2", "1 < 2 > 3", "3 > 2 > 1 > 0", "1 == 1.0 == True", "1 < 2 < 'a'",
      "2 < 1 < 'a'", "1 < 'a' < 2", "0 <= 0.0 <= -0.0 < 1e-300", "'a' < 'b' <= 'b' != 'c'",
      "[1, 2] < [1, 2, 0]", "(1, 'a') < (1, 'b')", "(1, 'a') < (1, 2)", "(2, 'a') < (1, 2)",
      "[1, [2]] < [1, [3]]", "{1, 2} < {1, 2, 3}", "{1, 2} <= {1, 2}", "{1, 2} > {3}",
      "{'a': 1} == {'a': 1.0}", "{'a': 1, 'b': 2} == {'b': 2, 'a': 1}", "[1, 2] == (1, 2)",
      "'a' == b'a'", "range(3) == range(0, 3)", "range(0) == range(5, 5)", "range(0, 4, 2) == range(0, 3, 2)",
      "float('nan') != float('nan')", "[float('nan')] == [float('nan')]", "10 ** 30 < 1e30",
      "10 ** 30 == 1e30", "2 ** 1024 > 1e308", "2 ** 1024 > float('inf')", "-(2 ** 1024) < -1e308",
      "0.1 + 0.2 == 0.3", "1 == 1.0000000000000002", "9007199254740993 == 9007199254740992.0",
      "'é' > 'e'", "'Z' < 'a'", "'😀' > '\\uffff'", "'abc' < 'abd'", "'' < 'a'", "None == None",
      "None != 0", "None == False", "(1,) == [1]", "[] == ()", "{} == set()", "1 in [1, 2]",
      "1 not in [1, 2]", "'a' in 'abc'", "'' in 'abc'", "'ab' in 'cab'", "'ac' in 'abc'", "1 in 'abc'",
      "'a' in {'a': 1}", "1 in {'a': 1}", "[1] in [[1]]", "1 in {1}", "[] in {1}", "1 in (1.0,)",
      "True in [1]", "1.0 in range(3)", "2 in range(0, 10, 2)", "3 in range(0, 10, 2)", "-1 in range(5)",
      "b'b' in b'abc'", "98 in b'abc'", "'b' in b'abc'", "256 in b'abc'", "None in [None]",
      "'a' in ['a', 'b']", "'x' not in 'abc'", "[] in [[]]", "{} in [{}]", "(1, 2) in {(1, 2): 0}",
      "[1] in {(1,): 0}", "1 in 5", "None is None", "None is not None", "True is True", "False is not True",
      "[] is []", "[] is not []", "None is False", "[x is x for x in [1, 'a', None]]",
      "1 < 2 == 2 > 1 != 0 is not None in [None]", "1 in [1] in [[1]]", "not 1 == 2", "not 1 < 2",
      "(1 < 2) + (2 < 3)", "[1, 2] != [1, 2]", "{1: 2} != {1: 3}", "1 < float('nan')", "float('inf') > 10 ** 400 if False else 1",
      "'10' < '9'", "[3] > [2, 9]", "() < (0,)", "(1, float('nan')) == (1, float('nan'))",
      "{'a'} == {'a'}", "{'a', 'b'} == {'b', 'a'}", "{1: 'a'}.keys() == {1}", "{1: 'a'}.items() == {(1, 'a')}",
      "{1: 2}.values() == {1: 2}.values()", "1 == 1j", "1j < 2j")


# ------------------------------------------------------------------ truthiness / boolean operators
def identity():
    # `is` between constants: CPython folds constant operations within the
    # folder's limits (ints of 128 bits, strings of 4096 characters, tuples of
    # 256 items), then one compilation shares each constant among its equal
    # (same type, same value, 0.0 apart from -0.0) occurrences
    R("'-3' is '-3'", "'abc' is 'abc'", "'ab' is 'a' + 'b'", "'' is ''", "b'x' is b'x'",
      "(1, 2) is (1, 2)", "() is ()", "(1, (2, 3.0)) is (1, (2, 3.0))", "(1, 2) is (1, 2.0)",
      "(0.0,) is (-0.0,)", "(1, [2]) is (1, [2])", "[1] is [1]", "{} is {}",
      "10 ** 20 is 10 ** 20", "-2 ** 63 is -2 ** 63", "2 ** 64 is 2 ** 64", "2 ** 63 is 2 ** 63",
      "-(2 ** 63) is -(2 ** 63)", "10 ** 20 is 100000000000000000000", "(10 ** 20,) is (10 ** 20,)",
      "1.5 is 1.5", "0.0 is -0.0", "-0.0 is -0.0", "0.5 + 1 is 1.5", "1j is 1j", "2 + 1j is 2 + 1j",
      "1 is True", "1 is 1.0", "True is True", "None is None", "not 1 is False",
      "'a' * 4096 is 'a' * 4096", "'a' * 4097 is 'a' * 4097", "'ab' * 2048 is 'ab' * 2048",
      "'ab' * 2049 is 'ab' * 2049", "b'a' * 4097 is b'a' * 4097", "(1,) * 256 is (1,) * 256",
      "(1,) * 257 is (1,) * 257", "(1, 2) * 128 is (1, 2) * 128", "(1, 2) * 129 is (1, 2) * 129",
      "((1,) * 4,) * 64 is ((1,) * 4,) * 64", "(((1,) * 4,) * 4,) * 64 is (((1,) * 4,) * 4,) * 64",
      "2 ** 62 * 2 ** 62 is 2 ** 62 * 2 ** 62", "2 ** 64 * 2 ** 64 is 2 ** 64 * 2 ** 64",
      "(2 ** 63) * (2 ** 63) * 2 is (2 ** 63) * (2 ** 63) * 2",
      "7 ** 45 is 7 ** 45", "7 ** 46 is 7 ** 46", "3 ** 64 is 3 ** 64", "(-5) ** 40 is (-5) ** 40",
      "'%s' % 'a' is '%s' % 'a'", "10 ** 20 % 7 is 10 ** 20 % 7", "(1, 2)[0] is (1, 2)[0]",
      "'abc'[1] is 'abc'[1]", "(10 ** 20, 1)[0] is 10 ** 20", "'abc'[1:] is 'abc'[1:]",
      "[x is (1, 2) for x in [(1, 2)]]", "[10 ** 20 is 10 ** 20 for i in range(3)]",
      "[(i, 1.5) is (i, 1.5) for i in range(2)]", "[1.5 is x for x in [1.5]]",
      "(lambda: 1) is (lambda: 1)", "len('-3') is len('-3')", "str(10 ** 20) is str(10 ** 20)",
      "2 ** 100 is 2 ** 100")


def booleans():
    vals = ["0", "1", "-1", "0.0", "-0.0", "0.1", "''", "' '", "'0'", "[]", "[0]", "()", "(0,)",
            "{}", "{0: 0}", "set()", "{0}", "None", "True", "False", "range(0)", "range(1)", "b''",
            "b'\\x00'", "0j", "float('nan')", "10 ** 20 - 10 ** 20", "session.events", "session.events_of_type('nope')"]
    for v in vals:
        R(f"not {v}", f"bool({v})", f"{v} and 'yes'", f"{v} or 'no'", f"'yes' if {v} else 'no'")
    R("1 and 2", "0 and 1 / 0", "1 or 1 / 0", "'' or 'x'", "[] or {}", "None or 0", "0 or None",
      "1 and 2 and 3", "1 and 0 and 3", "0 or '' or []", "0 or '' or 'z'", "1 or 2 and 3",
      "(1 or 2) and 3", "0 and 1 or 2", "not 0 and 1", "not (0 and 1)", "[] and 1 / 0",
      "1 / 0 if False else 5", "5 if True else 1 / 0", "'a' if 0 else 'b' if 0 else 'c'",
      "(1 if 1 else 2) + 3", "[x for x in range(5) if x and x % 2]", "all([1, 1 / 1])", "1 / 0 and 0")


# ------------------------------------------------------------------ indexing and slicing
def indexing():
    seqs = ["'abcdef'", "[0, 1, 2, 3, 4, 5]", "(0, 1, 2, 3, 4, 5)", "range(10, 22, 2)", "b'abcdef'",
            "'héllo😀'", "range(10, 0, -3)"]
    idx = ["0", "1", "5", "-1", "-6", "6", "-7", "100", "True", "False", "2 ** 70", "-(2 ** 70)",
           "1.0", "'a'", "None", "[0]"]
    for s in seqs:
        for i in idx:
            R(f"{s}[{i}]")
    bounds = ["", "None", "-8", "-3", "-1", "0", "1", "3", "8", "2 ** 70", "True"]
    steps = ["", "None", "1", "2", "-1", "-2", "3", "0", "-(2 ** 70)", "1.5"]
    rnd = random.Random(11)
    for s in seqs:
        for a in bounds:
            for b in bounds:
                for st in steps:
                    if rnd.random() < 0.03:
                        R(f"{s}[{a}:{b}:{st}]" if st else f"{s}[{a}:{b}]")
        for st in steps:
            R(f"{s}[::{st}]" if st else f"{s}[:]")
    R("'abc'[1:2.0]", "[1, 2, 3]['a':]", "'abc'[::-1][::-1]", "'héllo'[::-1]", "[1, 2, 3][-10 ** 20:10 ** 20]",
      "(1, 2, 3)[:-1]", "{'a': 1}['a']", "{'a': 1}['b']", "{1: 2}[1.0]", "{1: 2}[True]", "{(1, 2): 3}[(1, 2)]",
      "{(1, 2): 3}[1, 2]", "{}[[]]", "{}[{}]", "[1, 2][1, 2]", "'abc'[1:2, 3]", "[[1, 2], [3, 4]][1][0]",
      "'abc'[0][0][0]", "None[0]", "5[0]", "{1, 2}[0]", "session[0]", "range(10)[2:8:3]", "range(10)[::-1]",
      "range(0, 100, 7)[-3:]", "range(5)[10:]", "range(-5, 5)[::2][1]", "len(range(0, 10 ** 20, 3)[5:])",
      "range(10 ** 20)[-1]", "b'abc'[0]", "b'abc'[-1:]", "'😀'[0]", "'e\\u0301'[1]", "[1, 2, 3][:2][-1]",
      "(1, 2, 3)[1:][0]", "'abc'[True:]", "[0, 1, 2][False]", "{'a': [1, {'b': 'c'}]}['a'][1]['b']",
      "{'a': 1}.keys()[0]", "[1, 2, 3][::-(2 ** 64)]", "list(range(10))[8:2:-2]", "'abcdef'[-2:-5:-1]",
      "'abcdef'[5:-100:-1]", "'abcdef'[-100:100:-1]", "[1, 2, 3][3:0:-1]", "(0, 1, 2, 3)[1:-1:2]")


# ------------------------------------------------------------------ comprehensions
def comprehensions():
    R("[x * 2 for x in range(5)]", "[x for x in range(10) if x % 2 if x > 3]",
      "[(x, y) for x in range(3) for y in range(x)]", "[a + b for a, b in [(1, 2), (3, 4)]]",
      "[a + b + c for (a, (b, c)) in [(1, (2, 3)), (4, (5, 6))]]", "[[a, b] for [a, b] in ['xy', 'zw']]",
      "{x: x * x for x in range(4)}", "{x % 3 for x in range(10)}", "[c for c in 'abc']",
      "[x for x in range(3)] and x", "[[y for y in range(x)] for x in range(4)]",
      "[y for x in [[1, 2], [3]] for y in x]", "[x for x in [1, 2] for x in [x * 10, x * 100]]",
      "{x % 2: x for x in range(5)}", "[a for a, b in [(1, 2, 3)]]", "[a for a, b in [1]]",
      "[a for a, b in ['ab', 'c']]", "[x for x in 5]", "[k for k in {'b': 1, 'a': 2}]",
      "[v for k, v in {'b': 1, 'a': 2}.items()]", "{v: k for k, v in {'a': 1, 'b': 2}.items()}",
      "[e.event_type for e in session.events][:5]", "[e.id for e in session.events if e.event_type == 'agent_end']",
      "[x for x in range(3) if session]", "[session for x in range(2)]",
      "[x for x in session.events for y in session.events]", "[(x, y) for x in range(2) for y in range(x, 3) if x != y]",
      "[x for x in range(6) if x % 2 == 0 if x]", "sorted({x % 4 for x in range(100)})", "{(a, b) for a in range(2) for b in range(2)}",
      "[[x for x in range(y)] for y in range(3)][-1]", "{x: [y for y in range(x)] for x in range(3)}",
      "[x + y for x, y in zip([1], [2])]", "[x for x in range(3) if y]", "[x for (x) in [1, 2]]",
      "[x for x, in [(1,), (2,)]]", "[x for x, *y in [(1, 2)]]", "[1 for _ in range(3)]",
      "[(a, b) for a, b in {'a': 1}.items()]", "{k: v for k, v in [('a', 1), ('a', 2)]}",
      "{k: v for k, v in [(1, 'a'), (1.0, 'b'), (True, 'c')]}", "[x for x in []]", "{x for x in []}",
      "{x: 1 for x in []}", "[x for x in range(3)][::-1]", "[x * y for x in [1, 2] if x for y in [3, 4] if y - 3]",
      "len([1 for a in range(20) for b in range(20) for c in range(20)])", "[[1, 2][i] for i in range(2)]",
      "[i for i in range(3) if i in [x for x in range(2)]]", "[x for x in [[]] if not x]",
      "{x: x for x in [[1]]}", "{[1]: 2}", "{[]}", "{x for x in [[1]]}", "[x for x in {1: 2, 3: 4}.values()]",
      "[e.payload.get('tool_name') for e in session.events_of_type('tool_use')][:4]",
      "[x.upper() for x in 'ab']", "[str(i) + c for i in range(2) for c in 'xy']",
      "[(lambda_, 1) for lambda_ in range(2)]", "[x for x in range(3) for y in range(0)]",
      "[y for x in range(3) for y in [x] if y]")


# ------------------------------------------------------------------ f-strings and % formatting
FMT_VALUES = ["42", "-42", "0", "255", "10 ** 20", "True", "3.14159", "-2.5", "1e20", "1234567.891",
              "0.000123", "-0.0", "float('inf')", "float('nan')", "'abc'", "''", "'héllo'", "None", "[1, 'a']"]
FMT_SPECS = ["", "d", "5d", "<5", ">5", "^5", "*^9", "+d", " d", "-d", "+", " ", "#x", "#o", "#b",
             "x", "X", "#X", "o", "b", "c", "n", "05d", "010.3f", ",", "_", ",d", "_x", "_b", "_o",
             ".2f", ".0f", ".3e", ".3E", ".3g", "g", "G", "%", ".1%", "e", "E", "f", "F", "#.0f",
             "#g", "=+8", "0=8", "08.2f", "-08.2f", ".3", ".0", "s", "10s", ".2s", "^10.3s", "r",
             ",.2f", "_.3f", ">+10,.1f", "#08x", "07,", "0>5", "x<7", "🙂^7", ".20g", ".17g", "20",
             "<020", "=10", ".100f", ",.0f", "+.1e", "#.3g", ".0e", ".0%", "010", ",x", "_d", "n"]


def formatting():
    rnd = random.Random(13)
    for v in FMT_VALUES:
        for spec in FMT_SPECS:
            if spec in ("", "s", "d", "f", "x", "g", "e", ">5", "^5", ",", ".2f", "+", "%", "c", "r") or rnd.random() < 0.12:
                R('f"{' + v + (":" + spec if spec else "") + '}"')
    for v in FMT_VALUES:
        R('f"{' + v + '!r}"', 'f"{' + v + '!s}"', 'f"{' + v + '!a}"', 'f"{' + v + '!r:>12}"',
          'f"[{' + v + '}]"', "str(" + v + ")")
    R("f'{1 + 1 = }'", "f'{1+1=}'", "f'{\"x\"=!s}'", "f'{3.14159:{10}.{3}f}'", "f'{\"a\":{\"<\"}{5}}'",
      "f'{{}}'", "f'{{{1}}}'", "f'a{1}b{2}c'", "f''", "f'{\"é\"!a}'", "f'{\"😀\"!a}'", "f'{[\"é\"]!a}'",
      "f'{\"\\n\"!r}'", "f'{10:{\"x\"}}'", "f'{-0.0:+}'", "f'{1e16}'", "f'{0.1 + 0.2}'", "f'{2 ** 64:,}'",
      "f'{-(2 ** 64):_x}'", "f'{12345.6789:,.2f}'", "f'{0.5:.0f} {1.5:.0f} {2.5:.0f}'", "f'{2.675:.2f}'",
      "f'{1e-5}'", "f'{1e-5:f}'", "f'{123456789:e}'", "f'{1.0:g}'", "f'{100000.0:g}'", "f'{1000000.0:g}'",
      "f'{1e-4:g}'", "f'{1e-5:g}'", "f'{123.456:.2g}'", "f'{0.0001234:.2}'", "f'{1234:.2}'",
      "f'{True:d}'", "f'{True:.2f}'", "f'{None:>5}'", "f'{[1]:>5}'", "f'{(1, 2)}'", "f'{ {1: 2} }'",
      "f'{65:c}{0x1F600:c}'", "f'{-1:c}'", "f'{1114112:c}'", "f'{3.0:c}'", "f'{\"a\":c}'",
      "f'{10:#b}'", "f'{-10:#o}'", "f'{255:#_x}'", "f'{1.5:x}'", "f'{1:s}'", "f'{\"a\":d}'",
      "f'{1.5:d}'", "f'{1:,s}'", "f'{\"a\":,}'", "f'{1:=^10}'", "f'{\"a\":=5}'", "f'{1:.2s}'",
      "f'{1:+.0%}'", "f'{float(\"inf\"):08.2f}'", "f'{float(\"nan\"):+}'", "f'{-float(\"nan\")}'",
      "f'{123:0>10}'", "f'{123:0<10}'", "f'{-123:010}'", "f'{-123:<010}'", "f'{1.5:010}'",
      "f'{\"ab\":0>5}'", "f'{\"ab\":05}'", "f'{12:,b}'", "f'{12:,o}'", "f'{1e300 * 10:e}'",
      "f'{1/3:.50f}'", "f'{5e-324:.400f}'[:12]", "f'{2 ** 64:e}'", "f'{10 ** 20:.3g}'", "f'{1.25:.1f} {1.35:.1f}'",
      "f'{session.agent_id}'", "f'{session.event_count:04d}'", "f'{len(session.events)!r:>6}'",
      "f'{\"x\" * 3}{\"y\"}'", "f\"{'nested'}\"", "f'''{1\n+\n1}'''", "f'{1:{\"\"}}'", "f'{\"abc\":{\">\"}{10}}'",
      "f'{3:{\"#\"}{\"x\"}}'", "f'{1:%}'", "f'{-1e-10:.1e}'", "f'{1e22:f}'", "f'{1e23:f}'",
      "f'{0.1:.17f}'", "f'{0.1:.30e}'", "f'{123456789012345678:,}'", "f'{1.5:#.0e}'", "f'{-0.0:.0f}'",
      "f'{-0.4:.0f}'", "f'{0.05:.1f}'", "f'{0.15:.1f}'", "f'{0.25:.1f}'", "f'{9.995:.2f}'",
      "f'{99.5:.0f}'", "f'{1j}'", "f'{1+2j:.1f}'", "f'{b\"a\"}'", "f'{range(3)}'", "f'{\"a\"!r:^9}'")
    R("'%d' % 5", "'%5.2f' % 3.14159", "'%s %r' % ('a', 'b')", "'%x' % 255", "'%#x' % 255", "'%X' % 255",
      "'%#X' % 255", "'%o' % 8", "'%#o' % 8", "'%e' % 12345.678", "'%E' % 0.00012", "'%g' % 1e-10",
      "'%G' % 1e20", "'%g' % 100000", "'%g' % 1000000", "'%c' % 65", "'%c' % 'a'", "'%c' % 'ab'",
      "'%%'  % ()", "'100%%' % ()", "'%(a)s-%(b)d' % {'a': 1, 'b': 2}", "'%(a)s' % {}", "'%-5d|' % 3",
      "'%+d' % 3", "'% d' % 3", "'%05d' % -3", "'%.3s' % 'abcdef'", "'%*d' % (5, 3)", "'%-*d|' % (5, 3)",
      "'%.*f' % (2, 3.14159)", "'%d' % 'a'", "'%d %d' % (1,)", "'%d' % (1, 2)", "'%z' % 1", "'%d' % 3.7",
      "'%d' % -3.7", "'%x' % 3.5", "'%s' % [1, 2]", "'%s' % (1,)", "'%s' % ((1, 2),)", "'%s' % (1, 2)",
      "'%i' % 42", "'%u' % 42", "'%a' % 'é'", "'%r' % 'é'", "'%.2e' % 12345.678", "'%5s|' % 'é'",
      "'%-5s|' % 'é'", "'%s' % None", "'%d' % True", "'%f' % True", "'%s' % True", "'%.0f' % 2.5",
      "'%.0f' % 3.5", "'%.2f' % 2.675", "'%10.4f|' % -1.5", "'%-10.4f|' % 1.5", "'%+.3e' % 0.0",
      "'%#.0f' % 1", "'%#g' % 1.0", "'%g' % 1.5e-5", "'%.3g' % 1234.5", "'%d' % 10 ** 30",
      "'%x' % -(10 ** 30)", "'%f' % 1e300", "'%f' % float('inf')", "'%d' % float('inf')",
      "'%s and %s' % ('a', 'b')", "'%s' % {'a': 1}", "'%(x)s' % {'x': [1]}", "'%(x)d %%' % {'x': 3}",
      "'no args' % ()", "'no args' % 5", "'no args' % []", "'%s' % []", "'%s' % ()", "'%' % 1",
      "'%(a' % {'a': 1}", "'%5%' % ()", "'%c' % 1114112", "'%c' % -1", "'%.1f%%' % 99.95",
      "b'%d' % 5", "b'%s' % b'x'", "b'%s' % 'x'", "'%s' % b'x'", "'%r' % b'x'", "'%d' % 2 ** 64",
      "'%05.1f' % -2.25", "'%.3d' % 5", "'%+05d' % 5", "'% 05d' % 5", "'%#5x' % 10", "'%#05x' % 10",
      "'%ld' % 5", "'%s %s' % ('a',) if False else 1", "'%s' % 1.0", "'%r' % 1e16", "'%s' % 1e16",
      "'%.15g' % 0.1", "'%.17g' % 0.1", "'%d items' % len(session.events)", "5 % 'a'", "[] % 1")
    # a large precision's zeros with grouping, zero fill, padding, '%', '#' and an exponent after them
    R("f'{1.5:.2000f}'[-3:]", "len(f'{1.5:.3000f}')", "f'{-1234.5:0=40,.20f}'", "f'{1234.5:_^50,.25f}'",
      "f'{1.5:.1200e}'[-8:]", "f'{0.5:#.1500g}'[-4:]", "f'{2.5:.1500%}'[-3:]", "('%.1500f' % -0.125)[:8]",
      "'%0100.*x' % (60, 255)", "'%#.*o' % (70, -8)", "'%-80.*d|' % (50, 7)", "('%+.1200e' % 1e300)[-8:]",
      "f'{1e300:,.1200f}'[:20]", "f'{-0.0001:z.1500f}'[-3:]", "f'{7.0:0=1300,.1200f}'[:40]",
      "f'{-7.0:0=1300,.1200f}'[-10:]", "('%01300.1200f' % -7.5)[:12]", "f'{1.5:>1300.1200f}'[:5]")
    # NaN's sign bit is never shown: 'nan' in every form, '+nan' only under the '+' flag;
    # %-formatting's '0' flag zero-fills nan and inf as well
    R("'%g' % (0 * -float('inf'))",
      "'%f' % -float('nan')",
      "'%e' % -float('nan')",
      "'%+f' % -float('nan')",
      "'% f' % -float('nan')",
      "'%r' % -float('nan')",
      "'%s' % -float('nan')",
      "'%10.3f|' % -float('nan')",
      "'%-10f|' % -float('nan')",
      "'%010f' % -float('nan')",
      "repr(-float('nan'))",
      "str(-float('nan'))",
      'f\'{-float("nan")}\'',
      'f\'{-float("nan"):f}\'',
      'f\'{-float("nan"):+}\'',
      'f\'{-float("nan"):+g}\'',
      'f\'{-float("nan"): g}\'',
      'f\'{-float("nan"):z}\'',
      'f\'{-float("nan"):010}\'',
      'f\'{-float("nan"):=10}\'',
      'f\'{-float("nan"):%}\'',
      'f\'{-float("nan"):E}\'',
      'f\'{-float("nan"):,.2f}\'',
      "format(-float('nan'))",
      "format(-float('nan'), 'g')",
      "format(-float('nan'), '+')",
      "format(float('nan'), '+')",
      "format(-float('nan'), '')",
      "format(-float('nan'), '10')",
      "[-float('nan')]",
      "str([-float('nan'), 0 * -float('inf')])",
      "-float('nan')",
      "0 * -float('inf')",
      "complex(-float('nan'), -float('nan'))",
      "repr(complex(-float('nan'), -float('nan')))",
      "complex(1, -float('nan'))",
      "complex(-float('nan'), 1)",
      "format(complex(-float('nan'), -float('nan')), 'f')",
      "format(complex(-float('nan'), -float('nan')), '+f')",
      "format(complex(1, -float('nan')), '')",
      "format(complex(0, -float('nan')), '')",
      "format(complex(0, -float('nan')), 'g')",
      "format(complex(0, -float('nan')), '+g')",
      "'%s' % complex(-float('nan'), -float('nan'))",
      'f\'{complex(-float("nan"), 2)}\'',
      "str(complex(-float('nan'), 0))",
      "-complex(float('nan'), float('nan'))",
      "float('-nan')",
      "str(float('-nan'))",
      "'%.3g' % float('-nan')",
      "'{:g}'.format(float('-nan'))",
      "'{}'.format(float('-nan'))",
      "'{!r}'.format(float('-nan'))",
      "(-float('nan')).hex()",
      "float.hex(-float('nan'))",
      "-float('nan') * 2",
      "round(-float('nan'), 2)",
      "'%#g' % -float('nan')",
      "'%G' % -float('nan')",
      "'%F' % -float('nan')",
      'f\'{-float("nan"):#.3}\'',
      'f\'{-float("nan"):n}\'',
      'f\'{-float("nan"):_^12}\'',
      'f\'{-float("inf"):g}\'',
      'f\'{-float("inf"):+g}\'',
      "'%010f' % float('nan')",
      "'%010f' % float('inf')",
      "'%010f' % -float('inf')",
      "'%+010f' % -float('nan')",
      "format(float('nan'), '010')",
      "format(-float('inf'), '010')",
      "format(complex(-float('nan'), -float('nan')), '010')",
      "format(complex(-float('nan'), -float('nan')), '+')",
      "format(complex(-float('nan'), -float('nan')), ' ')",
      "format(complex(-float('nan'), -float('nan')), '<20')",
      "format(complex(-float('nan'), -float('nan')), '+g')",
      "format(complex(0, -float('nan')), ' ')",
      'f\'{complex(1, -float("nan")):<20}\'',
      "format(complex(-float('nan'), 1), '+f')",
      "'%-010f|' % -float('nan')",
      "'%010e' % -float('inf')",
      'f\'{-float("nan"):<010}\'',
      'f\'{-float("inf"):z010}\'')


# ------------------------------------------------------------------ builtins
def builtins_cases():
    R("abs(-5)", "abs(-2.5)", "abs(True)", "abs(-0.0)", "abs('a')", "abs(-10 ** 30)", "abs(3 + 4j)",
      "abs()", "abs(1, 2)", "abs(x=1)", "abs(None)", "abs(False)", "abs(float('-inf'))",
      "all([])", "all([1, 0])", "all([1, 'a'])", "any([])", "any('abc')", "any(['', 0, None])", "all(5)",
      "all('')", "any([[]])", "any({0: 1})", "all({0: 1})", "all([], [])", "any(iterable=[1])",
      "bool()", "bool(0)", "bool('0')", "bool([0])", "bool(x=1)", "bool(1, 2)", "bool(float('nan'))",
      "dict()", "dict(a=1, b=2)", "dict([('a', 1)])", "dict({'a': 1}, b=2)", "dict([1, 2])",
      "dict([(1, 2, 3)])", "dict(**{'a': 1})", "dict('ab')", "dict(['ab', 'cd'])", "dict({'a': 1}, a=2)",
      "dict([('a', 1)], a=2)", "dict(5)", "dict([[1, 2]])", "dict([], [])", "dict(((1, 2),), x=None)",
      "dict({1: 2}.items())", "dict(dict(a=1))", "dict([('b', 1), ('a', 2)])",
      "float()", "float(1)", "float('1.5')", "float(' 1e3 ')", "float('inf')", "float('-inf')",
      "float('nan')", "float('-nan')", "float('infinity')", "float('-Infinity')", "float('iNF')",
      "float('1_000.5')", "float('abc')", "float([])", "float((10 ** 64) ** 5)", "float('0x10')",
      "float(True)", "float('  -0  ')", "float('1e400')", "float('1e-400')", "float('.5')", "float('5.')",
      "float('')", "float(' ')", "float('1__0')", "float('_1')", "float('١٫٥')", "float('١.٥')",
      "float(x=1)", "float(10 ** 20)", "float(2 ** 53 + 1)", "float('0.1')", "float(None)", "float(1j)",
      "float('1e5')", "float('+1.5')", "float('- 1')", "float(b'1.5')", "float('\\u00a01\\u2003')",
      "int()", "int(3.9)", "int(-3.9)", "int('42')", "int(' -42 ')", "int('1_000')", "int('0x1f', 16)",
      "int('0x1f', 0)", "int('z', 36)", "int('101', base=2)", "int('abc')", "int(float('inf'))",
      "int(float('nan'))", "int('4.5')", "int(True)", "int(1e20)", "int('١٢٣')", "int('٣', 8)", "int(x=5)",
      "int('5', base=10)", "int(5, 10)", "int('9', 8)", "int('1', 37)", "int('1', 1)", "int('0b101', 0)",
      "int('0o17', 0)", "int('017', 0)", "int('0', 0)", "int('00', 0)", "int('_1')", "int('1_')",
      "int('1__0')", "int('+7')", "int(' 7\\n')", "int('')", "int(None)", "int([1])", "int(-0.0)",
      "int(1e300)", "int(2.5e-10)", "int('Ⅻ')", "int('²')", "int(b'12')", "int('12', base=5)",
      "int('1' * 100)", "int('-0')", "int('0x', 16)", "int('ff', 16)", "int('FF', 16)", "int('0XFF', 16)",
      "int(1j)", "int('1e5')", "int(10 ** 20 + 0.5)",
      "len('é')", "len([1])", "len({})", "len(range(10))", "len(5)", "len(session.events)", "len(b'abc')",
      "len('e\\u0301')", "len('👩\\u200d💻')", "len('😀')", "len(range(0, 10, 3))", "len(range(10, 0))",
      "len()", "len('a', 'b')", "len(None)", "len({1: 2, 3: 4})", "len({1, 1, 2})", "len(range(2 ** 64))",
      "len('日本語')", "len('\\N{LATIN SMALL LETTER E WITH ACUTE}')", "len({}.keys())",
      "list()", "list('abc')", "list(range(3))", "list({'a': 1, 'b': 2})", "list(5)", "list((1, 2))",
      "list(b'ab')", "list({'a': 1}.items())", "list([1], [2])", "list(x=1)", "list(range(5, 0, -2))",
      "list(None)", "list('')", "list({3: 1, 1: 2}.values())",
      "max(1, 2)", "max([1, 3, 2])", "max([])", "max([], default=0)", "max('abc')", "max([1, 'a'])",
      "max([3, -4, 2], key=abs)", "max(['aa', 'b'], key=len)", "max(1)", "max(1, 2, default=0)",
      "min(-1, -2.5)", "max(1, 1.0)", "max(1.0, 1)", "min([[1], [0]])", "max({'a': 1, 'b': 2})",
      "max(x=1)", "max((), default=None)", "min([], default='e')", "min('')", "max(1, 2, key=None)",
      "max([1, 2], key=None)", "min([2, 1], key=str)", "max(['b', 'a', 'c'])", "max([True, 2])",
      "min([float('nan'), 1])", "min([1, float('nan')])", "max(2, 3, 1, key=lambda_)", "max([(1, 'b'), (1, 'a')])",
      "min(range(5, 0, -1))", "max([1], [2])", "max([[1], [2]], [[3]])", "min(1, 2, 3, 4, 5, -1)",
      "max('b', 'ab')", "max(['a', 'B'], key=str)", "min([], key=len, default=0)", "max([0.0, -0.0])",
      "max([-0.0, 0.0])", "min(5, key=abs)", "max(1, 'a')",
      "range(5)", "range(1, 10, 2)", "range(10, 0, -3)", "range(0)", "range(1, 2, 0)", "range(1.5)",
      "list(range(-5))", "range(10)[3]", "len(range(0, 10, 3))", "5 in range(10)", "range(3) == range(3)",
      "range(1, 5, 1)", "range(True)", "range(-3, 3)", "list(range(0, -10, -3))", "range()", "range(1, 2, 3, 4)",
      "range(stop=3)", "range(2 ** 64)", "range(0, 2 ** 64, 2 ** 60)[5]", "list(range(3, 3))", "range('a')",
      "range(10)[-1:-3:-1]", "range(None)",
      "round(2.5)", "round(3.5)", "round(-2.5)", "round(0.5)", "round(1.5)", "round(2.675, 2)", "round(2.5, 0)",
      "round(1234.5678, -2)", "round(15, -1)", "round(25, -1)", "round(-0.5)", "round(1e300, 2)",
      "round(float('inf'))", "round(float('nan'))", "round(float('inf'), 2)", "round('a')", "round(5, ndigits=2)",
      "round(0.125, 2)", "round(0.375, 2)", "round(1.0000000000000002, 15)", "round(10 ** 30 + 5, -1)",
      "round(True)", "round(2.5, None)", "round(-0.0)", "round(-0.0, 1)", "round(0.1 + 0.2, 10)",
      "round(1.5, 1)", "round(2.345, 2)", "round(-1.5)", "round(5e-324, 400)", "round(1e22, -22)",
      "round(123.456, -1)", "round(123.456, -5)", "round(123, -5)", "round(-125, -1)", "round(135, -1)",
      "round(4.5)", "round(5.5)", "round(1e16 + 1)", "round(0.5, 1)", "round(2.5, 1.5)", "round(number=1.25, ndigits=1)",
      "round(1.25, 1)", "round(1.35, 1)", "round(2 ** 64 + 0.0)", "round(float('nan'), 1)", "round(1, 2, 3)",
      "round()", "round(2 ** 70, -20)", "round(-(2 ** 70), -20)", "round(1e300)", "round(3.14159, 3)",
      "set()", "set([1, 2, 2])", "sorted(set('aab'))", "set([[]])", "set(range(5))", "set(5)", "set({1: 2})",
      "set((3, 2, 1))", "set([1, 2], [3])", "sorted(set('hello'))", "len(set('hello'))",
      "sorted([3, 1, 2])", "sorted('bca')", "sorted([3, 1, 2], reverse=True)", "sorted([1, 'a'])",
      "sorted({3: 1, 1: 2})", "sorted([(1, 'b'), (1, 'a')])", "sorted([0.5, -1, True])", "sorted([1, 2], reverse=1)",
      "sorted()", "sorted([1], [2])", "sorted(['bb', 'a', 'ccc'], key=len)", "sorted(['bb', 'a', 'cc', 'b'], key=len, reverse=True)",
      "sorted([-3, 2, -1], key=abs)", "sorted(['10', '9', '100'], key=int)", "sorted(['10', '9', '100'])",
      "sorted([[2], [1, 2], []])", "sorted([3, 1], key=None)", "sorted(x=[1])", "sorted(5)",
      "sorted([float('nan'), 1, 0])", "sorted([1, 0, float('nan')])", "sorted(['b', 'A', 'a', 'B'])",
      "sorted(['é', 'e', 'f', 'E'])", "sorted((3, 2), reverse=None)", "sorted([3, 2], reverse='yes')",
      "sorted([1, 2], key=len)", "sorted(range(5), key=str, reverse=True)", "sorted({1, 3, 2})",
      "sorted([Score(0.5), Score(0.1)])", "sorted([None, None])", "sorted([None])", "sorted([True, False, 0, 1])",
      "str()", "str(1)", "str(1.0)", "str(1e16)", "str(None)", "str([1, 'a'])", "str(b'ab')", "str(b'ab', 'ascii')",
      "str(object=5)", "str(b'\\xff', 'utf-8')", "str(b'\\xff', 'utf-8', 'replace')", "str(encoding='x')",
      "str(1, 'x')", "str(True)", "str(range(3))", "str('a', 'b', 'c', 'd')", "str(b'\\xe9', 'latin-1')",
      "str(b'a', errors='strict')", "str(b'a', encoding='nope')", "str(-0.0)", "str(1e-7)", "str(0.1 + 0.2)",
      "str(('a',))", "str({'a': \"b'c\"})", "str(len)", "str(str)", "str(sorted)", "str(Score)",
      "str(1 / 3)", "str(2 ** 64)", "str(1e100)", "str(123456789012345.0)", "str(1234567890123456789.0)",
      "sum([1, 2, 3])", "sum([1.5, 2])", "sum([], 10)", "sum([1], start=5)", "sum(['a'], '')", "sum([[1], [2]], [])",
      "sum([0.1] * 10)", "sum([True, True])", "sum(range(101))", "sum([1e100, 1, -1e100])", "sum([0.1, 0.2, 0.3])",
      "sum()", "sum(5)", "sum([1, 'a'])", "sum([(1,), (2,)], ())", "sum([1, 2], 0.5)", "sum([10 ** 20, 0.5])",
      "sum([], start=[])", "sum(iterable=[1])", "sum([b'a'], b'')", "sum([-0.0])", "sum([-0.0], -0.0)",
      "sum({1: 'a', 2: 'b'})", "sum([1, 2], 3, 4)", "sum([2 ** 64, 2 ** 64])", "sum([1j, 2])",
      "tuple()", "tuple('ab')", "tuple([1])", "tuple(5)", "tuple({'a': 1})", "tuple(range(3))", "tuple((1,))",
      "tuple(x=1)", "tuple([[1]])",
      "enumerate([1])", "zip([1], [2])", "print(1)", "open('x')", "x", "len2", "type(1)", "isinstance(1, int)",
      "repr(1)", "map", "filter", "getattr", "vars()", "globals()", "locals()", "dir()", "chr(65)", "ord('a')",
      "hash(1)", "id(1)", "format(1, 'x')", "iter([1])", "next", "object", "Exception", "ValueError",
      "True()", "None()", "1()", "'a'()", "session()", "len(len)", "str(len) + ''", "[len, str]", "(abs, max)",
      "{'f': sorted}", "int", "float", "dict", "list", "str", "tuple", "set", "range", "bool", "len", "sum",
      "Score", "Metric", "Assertion", "EvalResult", "ConditionResult", "Score == Score", "len == len",
      "len is len", "int('3') + float('1.5')", "max(len('ab'), len('abc'))", "sorted(sorted)",
      "dict(session=1)", "list(session.events_of_type('agent_end'))[0].id", "tuple(session.count('tool_use') for_ in [1])" if False else "tuple([session.count('tool_use')])")


# ------------------------------------------------------------------ methods
STR_RECEIVERS = ["'Hello World'", "''", "'  a b  c  '", "'ß'", "'ǅ'", "'İ'", "'ΑΣ ΟΔΟΣ'", "'x.txt'",
                 "'a,b,,c'", "'١٢٣'", "'½²Ⅻ'", "'abc123'", "'they\\'re bill\\'s'", "'a\\nb\\r\\nc\\x1cd\\u2028e'",
                 "'ﬁ'", "'Straße'", "'HELLO'", "'\\t \\n'", "'e\\u0301'", "'😀x'", "'-42'", "'+7'", "'aaa'"]
BYTES_RECEIVERS = ["b'Hello World'", "b''", "b'  a b  c  '", "b'abc123'", "b'a,b,,c'", "b'\\xc3\\xa9\\xff'",
                   "b'a\\nb\\r\\nc\\x1cd'", "b'-42'", "b'aaa'"]
STR_CALLS = {
    "lower": ["()"], "upper": ["()"], "strip": ["()", "(' a')", "(None)", "('')", "(1)"],
    "lstrip": ["()", "('H ')"], "rstrip": ["()", "('dc ')"],
    "split": ["()", "(',')", "(' ')", "(',', 1)", "(sep=',', maxsplit=1)", "(maxsplit=1)", "('')", "(None, 0)", "('l', -1)"],
    "rsplit": ["()", "(',')", "(maxsplit=1)", "(',', 1)", "('a', 2)"],
    "splitlines": ["()", "(True)", "(keepends=True)", "(1)"],
    "startswith": ["('He')", "(('x', 'He'))", "('l', 2)", "('', 0, 0)", "('o', -1)", "(1)", "(('a', 1))", "('l', 2, 3)"],
    "endswith": ["('ld')", "(('x', 'd'))", "('', 5)", "('o', 0, 5)", "('c')"],
    "replace": ["('l', 'L')", "('l', 'L', 1)", "('', '-')", "('', '-', 2)", "('l', 'L', count=1)", "('l', 'L', -1)", "('a', 'b', 0)"],
    "find": ["('o')", "('o', 5)", "('o', -3)", "('')", "('', 100)", "('zz')", "('l', 1, 3)", "(1)", "('o', None, None)"],
    "rfind": ["('o')", "('o', 0, 5)", "('')", "('zz')", "('l', -100, -1)"],
    "index": ["('o')", "('zz')", "('')", "('l', 3)"],
    "count": ["('l')", "('')", "('l', 3)", "('l', -3, -1)", "('zz')", "()"],
    "join": ["(['x', 'y'])", "('abc')", "([])", "([1, 2])", "(('a',))", "({'k': 1, 'j': 2})", "(5)"],
    "title": ["()"], "capitalize": ["()"], "casefold": ["()"], "swapcase": ["()"],
    "isdigit": ["()"], "isalpha": ["()"], "isalnum": ["()"], "isspace": ["()"], "isnumeric": ["()"],
    "isdecimal": ["()"], "islower": ["()"], "isupper": ["()"], "istitle": ["()"],
    "zfill": ["(5)", "(0)", "(-1)", "('5')", "(15)"],
    "ljust": ["(15)", "(15, '*')", "(2)", "(15, 'ab')", "(15, '😀')"],
    "rjust": ["(15)", "(15, '.')"], "center": ["(16)", "(15, '*')", "(9, 'ab')", "(14)"],
    "partition": ["(' ')", "('o')", "('zz')", "('')"], "rpartition": ["(' ')", "('o')", "('zz')"],
    "removeprefix": ["('He')", "('')", "('zz')"], "removesuffix": ["('ld')", "('txt')", "('.txt')"],
    "encode": ["()", "('utf-8')", "('latin-1')", "('ascii')", "('ascii', 'replace')", "('ascii', errors='ignore')",
               "('ascii', 'xmlcharrefreplace')", "('ascii', 'backslashreplace')", "(encoding='utf-16')",
               "('utf-32-le')", "('nope')", "('rot13')", "('utf-8', 'nope')", "('UTF8')"],
    "get": ["('a')"], "keys": ["()"], "decode": ["()"], "hex": ["()"], "union": ["({1})"],
    "events_of_type": ["('x')"],
}
BYTES_CALLS = {
    "lower": ["()"], "upper": ["()"], "strip": ["()", "(b' a')", "(' a')"], "lstrip": ["()"], "rstrip": ["()"],
    "split": ["()", "(b',')", "(b',', 1)", "(sep=b',')", "(',')"], "rsplit": ["(maxsplit=1)"],
    "splitlines": ["()", "(True)"], "startswith": ["(b'a')", "('a')", "((b'x', b'a'))"], "endswith": ["(b'c')"],
    "replace": ["(b'a', b'X')", "(b'a', b'X', 1)"], "find": ["(b'b')", "(98)", "(b'')"], "rfind": ["(b'a')"],
    "index": ["(b'c')", "(b'zz')"], "count": ["(b'a')", "(97)", "(b'')"], "join": ["([b'x', b'y'])", "(['x'])"],
    "title": ["()"], "capitalize": ["()"], "swapcase": ["()"], "isdigit": ["()"], "isalpha": ["()"],
    "isalnum": ["()"], "isspace": ["()"], "islower": ["()"], "isupper": ["()"], "istitle": ["()"],
    "zfill": ["(6)"], "ljust": ["(10, b'*')"], "rjust": ["(10)"], "center": ["(11, b'-')"],
    "partition": ["(b',')"], "rpartition": ["(b',')"], "removeprefix": ["(b'a')"], "removesuffix": ["(b'c')"],
    "decode": ["()", "('latin-1')", "('utf-8', 'replace')", "(errors='ignore')", "('ascii')", "('utf-8', 'backslashreplace')"],
    "hex": ["()", "(':')", "('-', 2)", "(':', -2)", "('ab')"],
    "casefold": ["()"], "isnumeric": ["()"], "isdecimal": ["()"], "encode": ["()"], "get": ["(1)"],
}


def methods():
    rnd = random.Random(17)
    for recv in STR_RECEIVERS:
        for name, arglists in STR_CALLS.items():
            for args in arglists:
                if recv == "'Hello World'" or (len(arglists) == 1 and rnd.random() < 0.3) or rnd.random() < 0.06:
                    R(f"{recv}.{name}{args}")
    for recv in BYTES_RECEIVERS:
        for name, arglists in BYTES_CALLS.items():
            for args in arglists:
                if recv == "b'abc123'" or rnd.random() < 0.08:
                    R(f"{recv}.{name}{args}")
    for recv in ["[1, 2, 1, 3]", "(1, 2, 1, 3)", "range(0, 10, 2)", "[]", "['a', 1, 'a', 1.0, True]"]:
        R(f"{recv}.count(1)", f"{recv}.index(1)", f"{recv}.index(2)", f"{recv}.index(1, 1)", f"{recv}.index(1, 1, 3)",
          f"{recv}.index(1, -2)", f"{recv}.count()", f"{recv}.index(99)", f"{recv}.lower()", f"{recv}.get(0)",
          f"{recv}.keys()", f"{recv}.union([1])", f"{recv}.join(['a'])")
    d = "{'b': 1, 'a': [2], 3: None}"
    R(f"{d}.get('a')", f"{d}.get('z')", f"{d}.get('z', 0)", f"{d}.get('z', default=0)", f"{d}.get()",
      f"{d}.get(3)", f"{d}.get(3.0, 1)", f"{d}.get([])", f"{d}.keys()", f"{d}.values()", f"{d}.items()",
      f"list({d}.keys())", f"list({d}.items())[0]", f"{d}.count(1)", f"{d}.lower()", f"{d}.index(1)",
      f"{d}.union({{}})", f"len({d}.items())", f"{d}.keys(1)", f"'a' in {d}.keys()", f"1 in {d}.values()",
      f"('b', 1) in {d}.items()", f"{d}.keys().isdisjoint([1])", f"{d}.keys().isdisjoint(['a'])",
      f"{d}.items().isdisjoint([('b', 1)])", f"{d}.values().isdisjoint([])", f"sorted({d}.keys(), key=str)",
      f"{d}.get('a').count(2)", "{}.get(1, 2)", "{}.items()", "{1: 2}.values()", "dict(a=1).get('a', 5)")
    sets = ["{1, 2, 3}", "{3, 4}", "set()", "{8, 1}", "{1.5, 2}"]
    for a in sets:
        for b in ["{2, 3, 5}", "[3, 9]", "range(2)", "set()", "{1: 'x'}", "'ab'", "5"]:
            for m in ["union", "intersection", "difference", "symmetric_difference", "issubset", "issuperset", "isdisjoint"]:
                if a == "{1, 2, 3}" or rnd.random() < 0.2:
                    R(f"{a}.{m}({b})")
    R("{1, 2}.union()", "{1, 2}.union([3], (4,), {5})", "{1, 2}.intersection([2], [2, 3])", "{1, 2}.difference([1], [2])",
      "{1}.symmetric_difference([1], [2])", "{1}.issubset()", "{1}.issubset([1], [2])", "{1}.union(x=[1])",
      "{1, 2}.union({'a'}) == {1, 2, 'a'}", "len({'a', 'b'}.union({'c'}))", "sorted({'a', 'b'}.intersection(['b', 'c']))",
      "{1, 2}.count(1)", "{1, 2}.index(1)", "{1}.get(1)", "{1}.lower()")
    for recv in ["1", "1.5", "None", "True", "[1]", "(1,)", "range(3)", "session", "session.events[0]", "len", "Score(0.5)",
                 "session.events", "{'a'}", "1j", "(2 ** 64)"]:
        for m in ["lower()", "split()", "get('x')", "keys()", "hex()", "count(1)", "union([1])", "decode()",
                  "encode()", "events_of_type('x')", "index(1)"]:
            if rnd.random() < 0.25 or m in ("hex()", "lower()"):
                R(f"{recv}.{m}")
    R("(1.5).hex()", "(-0.0).hex()", "(0.1).hex()", "float('inf').hex()", "(5e-324).hex()", "(1e300).hex()",
      "(255).hex()", "b''.hex()", "'ab'.hex()", "(10).count(1)", "'a'.events()", "session.events()",
      "session.event_count()", "session.count('tool_use')", "session.count(5)", "session.count()",
      "session.count(event_type='tool_use')", "session.events_of_type('tool_result')[0].id",
      "session.events_of_type(t='x')", "session.events_of_type('x', 'y')", "session.events_of_type(5)",
      "session.events[0].payload.get('agent')", "session.events[0].payload.keys()",
      "session.events[0].payload.items()", "session.events[0].payload.values()",
      "'ab'.upper().lower().upper()", "' x '.strip().zfill(4).center(8, '*')", "'a-b'.split('-')[1].upper()",
      "'abc'.encode().decode()", "'é'.encode().hex()", "'é'.encode('utf-16').hex()", "'日本'.encode('utf-8')",
      "'😀'.encode()", "len('😀'.encode())", "'\\ud800'.encode()", "'\\ud800'.encode('utf-8', 'replace')",
      "b'\\xff'.decode()", "b'\\xc3'.decode('utf-8', 'replace')", "b'\\xe9'.decode('latin-1').upper()",
      "'ß'.upper()", "'ß'.lower()", "'ß'.casefold()", "'ß'.title()", "'ß'.capitalize()", "'ß'.swapcase()",
      "'ﬁ'.upper()", "'ﬁ'.title()", "'ﬁ'.casefold()", "'İ'.lower()", "len('İ'.lower())", "'ǅ'.swapcase()",
      "'ǆ'.title()", "'ǅ'.istitle()", "'Σ'.lower()", "'ΑΣ'.lower()", "'ΑΣ Α'.lower()", "'ΑΣΑ'.lower()",
      "'Σ'.casefold()", "'ς'.upper()", "'ŉ'.upper()", "'ǰ'.upper()", "'ΐ'.upper()", "'ẞ'.lower()",
      "'ſ'.upper()", "'ſ'.casefold()", "'µ'.upper()", "'ÿ'.upper()", "'Å'.lower()", "'K'.lower()",
      "'ﬀ'.upper()", "'ﬃ'.title()", "'ᾳ'.upper()", "'ᾳ'.title()", "'ᾼ'.lower()", "'ᾼ'.swapcase()",
      "'i̇'.upper()", "'Ⅻ'.lower()", "'ⓐ'.upper()", "'𐐨'.upper()", "'ǈ'.lower()", "'ǈ'.upper()",
      "'١٢٣'.isdigit()", "'١٢٣'.isdecimal()", "'½'.isnumeric()", "'½'.isdigit()", "'²'.isdigit()",
      "'²'.isdecimal()", "'Ⅻ'.isnumeric()", "'Ⅻ'.isalpha()", "'一'.isnumeric()", "'三'.isnumeric()",
      "'٣'.isnumeric()", "'𝟙'.isdigit()", "'𝟙'.isdecimal()", "'①'.isdigit()", "'①'.isdecimal()",
      "'é'.isalpha()", "'e\\u0301'.isalpha()", "'\\u0301'.isalpha()", "'ǅ'.isupper()", "'ǅ'.islower()",
      "'ª'.islower()", "'ª'.isalpha()", "'ʰ'.islower()", "'\\u00a0'.isspace()", "'\\u200b'.isspace()",
      "'\\x1c\\x1d\\x1e\\x1f\\x85'.isspace()", "'\\u3000'.isspace()", "'Ab Cd'.istitle()", "'AB'.istitle()",
      "'A1b'.istitle()", "'1'.istitle()", "'a1'.islower()", "'1'.islower()", "'A_B'.isupper()",
      "'hello world foo'.title()", "'hello-world_foo bar9baz'.title()", "\"o'neil\".title()", "'ǆemal'.title()",
      "'ǆemal'.capitalize()", "'ß tEST'.capitalize()", "'ΣΑΣ'.capitalize()", "'a\\u0345'.upper()",
      "'\\u1e9e'.casefold()", "'Ǳ'.casefold()", "'K'.casefold()", "'x\\u0307'.title()",
      "'a\\x85b\\x0bc\\x0cd'.splitlines()", "'a\\n\\nb\\n'.splitlines()", "'\\n'.splitlines(True)",
      "''.splitlines()", "'a\\r'.splitlines(True)", "'a b\\u3000c\\x1cd'.split()", "'  '.split()", "''.split(',')",
      "'a,b'.split(',', -1)", "'a,b,c'.rsplit(',', 1)", "'a  b'.rsplit(None, 1)", "'abc'.strip('ac')",
      "'\\u00a0 x \\u2003'.strip()", "'xxaxx'.lstrip('x')", "'é'.center(4)", "'😀'.ljust(3, '-')",
      "'ab'.center(5, '-')", "'abc'.center(6, '-')", "'a'.zfill(3)", "'-'.zfill(3)", "'+'.zfill(3)",
      "'ab'.partition('ab')", "'aXbXc'.rpartition('X')", "'abc'.removeprefix('abc')", "'abcabc'.replace('bc', '')",
      "'aaaa'.replace('aa', 'b')", "'abc'.replace('', '|')", "''.replace('', 'x')", "'aaa'.count('aa')",
      "'aaa'.count('')", "''.count('')", "'abcabc'.find('c', -2)", "'abc'.find('', 3)", "'abc'.find('', 4)",
      "'abc'.rfind('')", "'abc'.index('c', -1)", "'ab'.startswith(())", "'ab'.startswith(('b', 'a'))",
      "'ab'.endswith('b', -1)", "'ab'.startswith('', 3)", "'é😀'.find('😀')", "'日本語'.index('語')",
      "','.join(['a'] * 3)", "''.join(['a', 'é', '😀'])", "'-'.join('abc')", "', '.join(sorted({'b': 1, 'a': 2}))",
      "'x'.join([])", "' '.join([str(x) for x in range(5)])", "'ab'.join(['1', '2', '3'])")


# ------------------------------------------------------------------ source checks
def source_checks():
    for kind in ("raw", "evaluator", "condition"):
        add(kind, "")
        add(kind, "   ")
        add(kind, "\n\t ")
        for s in ["x = 1", "1; 2", "import os", "def f(): pass", "1 +", ")", "if x: y", "a b", '"unterminated',
                  "1\n2", "lambda", "print 1", "$", "0777", "1__0", "f'{x!z}'", "\\", "x: int", "'\\N{NOPE}'",
                  "b'é'", "'\\x4'", "f'{'", "(1,", "[1 2]", "a[]", "1 if 2", "**x", "*x", " 1", "# c",
                  "1 # c", "(1 +\n 2)", "1 +\\\n 2", "f'{}'", "return 1", "yield", "x ==", "1 = 1", "del x",
                  "assert 1", "pass", "`1`", "1 <> 2", "print(1, x=2, 3)", "'a' 'b", "f'{1!r:}'", "0b2", "0o8",
                  "0x", "1e", "1.e5", "1_", "0_7", "09", "1if 1else 2", "[x for x in]", "{1: }", "{**}",
                  "(x for x in [1])", "[x async for x in y]" if False else "(1)(2)", "'\\u12'", "r'\\'", "u'x' b'y'",
                  "f'{x:{y:{z}}}'", "f'{\\'a\\'}'", "f'{#}'", "not", "1 not 2", "1 is not not 2", "a.1"]:
            add(kind, s)
    disallowed = ["lambda: 1", "(lambda x: x)(1)", "(x for x in [1])", "sum(x for x in [1])", "(x := 1)",
                  "[y := 1]", "[*[1]]", "(*[1],)", "print(*[1])", "{*[1]}", "await x", "(yield)", "(yield from x)",
                  "1 | 2", "1 & 2", "1 ^ 2", "1 << 2", "1 >> 2", "~1", "a @ b", "[1] * ~0", "session.events[~0]",
                  "{1} | {2}", "[x for x in [1] if (y := x)]", "max([1], key=lambda v: -v)", "f'{(lambda: 1)()}'",
                  "f'{1 | 2}'", "[1][0:lambda: 1]", "{**{}, 'a': (lambda: 0)}", "(x for x in []) if 0 else 1",
                  "[1, 2, (lambda: 3)]", "not ~1", "-(~1)", "1 if ~1 else 2", "[(yield)]", "~session.event_count",
                  "session.count(*['x'])", "dict(**{'a': 1}) | {}"]
    for s in disallowed:
        for kind in ("raw", "evaluator", "condition"):
            add(kind, s)
    for s in ["2 ** -1", "2 ** 65", "2 ** True", "2 ** 1.5", "2 ** x", "2 ** (1 + 1)", "2 ** 2 ** 2",
              "2 ** 64", "2 ** 0", "2 ** 0x40", "2 ** 0x41", "2 ** 1_0", "2 ** 00", "2 ** 64.0", "2 ** 1j",
              "2 ** '1'", "2 ** None", "2 ** False", "2 ** (64)", "2 ** -0", "2 ** +1", "2 ** len('ab')",
              "[2 ** 65 for x in []]", "0 if 1 else 2 ** 99", "f'{2 ** 70}'", "2.0 ** 0.5", "(2 ** 64) ** 64",
              "10 ** 10 ** 1", "session.event_count ** 2", "2 ** session.event_count", "x ** 2", "1 ** 63 ** 1"]:
        add("raw", s)
        add("condition", s)
    for s in ["x.__class__", "''.__class__", "session._x", "session.events._foo", "session.__dict__",
              "[].__len__()", "(1).__add__(2)", "session.events[0]._payload", "session._", "'a'._lower()",
              "session.events.__class__.__mro__", "x.format", "'a'.format(1)", "'{}'.format(1)",
              "'{}'.format_map({})", "session.to_wire()", "[].append(1)", "(1).real", "str.mro()",
              "session.from_wire", "session.events.pop()", "{}.update(a=1)", "'a'.maketrans('a', 'b')",
              "'a'.expandtabs()", "'a'.translate({})", "[].sort()", "[].copy()", "{}.copy()", "{}.setdefault(1)",
              "{}.pop(1)", "set().add(1)", "'a'.isidentifier()", "'a'.isprintable()", "'a'.isascii()",
              "b''.fromhex('00')", "(1.5).is_integer()", "(1.5).as_integer_ratio()", "(5).bit_length()",
              "(1).to_bytes(1, 'big')", "(1).conjugate()", "1j.imag", "session.events.gi_frame",
              "(x for x in []).gi_frame", "session.count", "'a'.upper", "str(session.events_of_type)",
              "[1].index", "{}.get", "f'{session.count}'", "'%s' % 'a'.lower", "[session.count, 1]",
              "session.events[0].payload.get", "b''.hex", "{1}.union", "'a'.upper if 1 else 0",
              "(session.count)('x')", "session.count.count('x')", "session.events_of_type", "session.event_count",
              "session.events[0].ts", "session.events[0].id", "_x", "__import__", "_", "__builtins__",
              "[_ for _ in [1]]", "[1 for _ in range(3)]", "{_a: 1 for _a in []}", "__name__", "_.x",
              "session._x._y", "x._y.__z", "__import__('os').system", "[x for x in range(1) if __debug__]",
              "f'{_}'", "len(_)", "dict(_=1)", "{'_': 1}['_']", "'__class__'", "session.events[0].payload['_x']",
              "session.events_of_type('_x')", "max([1], key=_)", "x.y", "x.get", "len.__name__",
              "session.started_at.isoformat()", "session.events.count(1)", "session.events.index(1)"]:
        add("raw", s)
        add("condition", s)
    # ordering of the checks (ast.walk is breadth-first; the first violation wins)
    for s in ["_x.__y", "x.__y + _z", "(lambda: 0).__x", "[(lambda: 0), 2 ** -1]", "[2 ** -1, (lambda: 0)]",
              "_a + (lambda: 0)", "(lambda: 0) + _a", "session.format(_x)", "session._f(lambda: 0)",
              "f(lambda: 0)._x", "[x.upper, _y]", "[_y, x.upper]", "[[[_z]], x.fmt]", "[[[2 ** 99]], ~1]",
              "[[~1]], 2 ** 99", "x.upper._y", "x._y.upper", "(x.upper)(), x.upper", "x.lower(x.upper)",
              "x.fmt(x.upper)", "[1, [2, [3, [4, [5, _]]]], lambda: 0]", "[lambda: 0, [[[[[_]]]]]]"]:
        add("raw", s)
    # size limits: evaluator 128 KiB, condition 16 KiB, counted in UTF-8 bytes
    for kind, limit in (("evaluator", 128 * 1024), ("condition", 16 * 1024), ("raw", 128 * 1024)):
        body = "EvalResult(score=Score(1))" if kind == "evaluator" else ("True" if kind == "condition" else "1")
        add(kind, body + " " * (limit - len(body)))
        add(kind, body + " " * (limit - len(body) + 1))
        add(kind, body + "#" + "é" * ((limit - len(body) - 1) // 2))
        add(kind, body + "#" + "é" * ((limit - len(body) - 1) // 2 + 1))
        add(kind, " " * (limit + 10))
    add("condition", "True" + " " * (16 * 1024 + 100))
    add("evaluator", "True" + " " * (16 * 1024 + 100))
    # node ceiling (5000 nodes counted as ast.walk counts them)
    for n in (4997, 4998):  # Expression + List + Load + n constants
        R("[" + ",".join(["1"] * n) + "]")
    for n in (4994, 4995):  # Expression Compare List Load n Eq List Load
        add("condition", "[" + ",".join(["1"] * n) + "] == []")
    for n in (1249, 1250):  # Expression + List + Load + 4 nodes per `1+1`
        R("[" + ",".join(["1+1"] * n) + "]")
    R("[" + ",".join(["x"] * 2498) + "]")  # Name + Load per element
    R("[" + ",".join(["x"] * 2499) + "]")
    R("[" + ",".join(["1"] * 5000) + ", lambda: 0]")
    R("[lambda: 0, " + ",".join(["1"] * 5000) + "]")
    R("[" + ",".join(["1"] * 5000) + ", _x]")
    R("[_x, " + ",".join(["1"] * 5000) + "]")
    R("len([" + ",".join(["'é'"] * 4000) + "])")
    R("sum([" + ",".join(str(i) for i in range(2400)) + "])")
    R("'" + "a" * 10000 + "'[::-1][:5]")
    R("(" * 150 + "1" + ")" * 150)
    R("[" * 60 + "]" * 60)
    R("-" * 200 + "1")
    R("not " * 150 + "1")


# ------------------------------------------------------------------ result types
def results():
    E("EvalResult(score=Score(0.5))", "EvalResult(score=Score(0))", "EvalResult(score=Score(1))",
      "EvalResult(score=Score(1.5))", "EvalResult(score=Score(-0.1))", "EvalResult(score=Score(True))",
      "EvalResult(score=Score('0.5'))", "EvalResult(score=Score(float('nan')))", "EvalResult(score=Score(float('inf')))",
      "EvalResult(score=Score(0.5, True))", "EvalResult(score=Score(0.5, passed=1))", "EvalResult(score=Score(0.5, False, ''))",
      "EvalResult(score=Score(0.5, unit='x' * 64))", "EvalResult(score=Score(0.5, unit='x' * 65))",
      "EvalResult(score=Score(0.5, unit=5))", "EvalResult(score=Score(0.5, unit=0))", "EvalResult(score=Score(0.5, unit=None))",
      "EvalResult(score=Score(0.5, display_value=''))", "EvalResult(score=Score(0.5, display_value='50%'))",
      "EvalResult(score=Score(0.5, display_value='x' * 256))", "EvalResult(score=Score(0.5, display_value='x' * 257))",
      "EvalResult(score=Score(0.5, description='a\\x00b'))", "EvalResult(score=Score(0.5, description='a\\x7fb'))",
      "EvalResult(score=Score(0.5, description='a\\x1bb'))", "EvalResult(score=Score(0.5, description='\\t\\n\\r'))",
      "EvalResult(score=Score(0.5, description='é' * 500))", "EvalResult(score=Score(0.5, description='é' * 501))",
      "EvalResult(score=Score(0.5, description='\\x85'))", "EvalResult(score=Score(0.5, description='\\u2028 ok'))",
      "EvalResult(score=Score(value=0.5))", "EvalResult(score=Score())", "EvalResult(score=Score(0.5, None, 'ratio', None, None, 1))",
      "EvalResult(score=Score(0.5, foo=1))", "EvalResult(score=Score((10 ** 64) ** 5))", "EvalResult(score=Score(1 + 0j))",
      "EvalResult(score=Score(1, unit='pts', display_value='1/1', description='all good'))",
      "EvalResult(score=Score(1 / 3))", "EvalResult(score=Score(10 ** 20 // 10 ** 20))", "EvalResult(score=Score(5e-324))",
      "EvalResult(score=Score(-0.0))", "EvalResult(score=Score(0.1 + 0.2))", "EvalResult(score=Score(None))",
      "EvalResult(score=Score(0.5, passed=None, unit='ratio'))", "EvalResult(score=Score(0.5, description=None))",
      "EvalResult(score=Score(0.5, display_value=5))", "EvalResult(score=Score(0.5, description=b'x'))",
      "EvalResult(metrics={'m': 3})", "EvalResult(metrics={'m': -1e300})", "EvalResult(metrics={'m': float('inf')})",
      "EvalResult(metrics={'m': 10 ** 30})", "EvalResult(metrics={'m': 'x'})", "EvalResult(metrics={'m': None})",
      "EvalResult(metrics={'m': True})", "EvalResult(metrics={'m': Metric(1, 'ms')})",
      "EvalResult(metrics={'m': Metric(1, unit='ms', display_value='1 ms', description='d')})",
      "EvalResult(metrics={'m': Metric(1, unit='')})", "EvalResult(metrics={'m': Metric()})",
      "EvalResult(metrics={'m': Metric(1, 'a' * 65)})", "EvalResult(metrics={'m': Metric('1')})",
      "EvalResult(metrics={'m': Score(0.5)})", "EvalResult(metrics={'m': Metric(float('-inf'))})",
      "EvalResult(metrics={'m': Metric(2 ** 64)})", "EvalResult(metrics={'m': 0.1, 'n': -0.0})",
      "EvalResult(metrics={'Bad': 1})", "EvalResult(metrics={1: 2})", "EvalResult(metrics={'': 1})",
      "EvalResult(metrics={'a-b': 1})", "EvalResult(metrics={'a\\n': 1})", "EvalResult(metrics={'é': 1})",
      "EvalResult(metrics={'a' * 128: 1})", "EvalResult(metrics={'a' * 129: 1})", "EvalResult(metrics={'_a': 1})",
      "EvalResult(metrics={'a1_': 1})", "EvalResult(metrics={'1a': 1})", "EvalResult(metrics={1: 2, 'a': 3})",
      "EvalResult(metrics={'b': 2, 'a': 1, 'c': Metric(3)})", "EvalResult(metrics=[('a', 1)])", "EvalResult(metrics=None)",
      "EvalResult(metrics={})", "EvalResult()", "EvalResult(score=0.5)", "EvalResult(score=None, metrics={'a': 1})",
      "EvalResult(assertions={'ok': True})", "EvalResult(assertions={'ok': 1})", "EvalResult(assertions={'ok': None})",
      "EvalResult(assertions={'ok': Assertion(False, 'desc')})", "EvalResult(assertions={'ok': Assertion(True, '')})",
      "EvalResult(assertions={'ok': Assertion(True, description=5)})", "EvalResult(assertions={'ok': Assertion(1)})",
      "EvalResult(assertions={'ok': Assertion()})", "EvalResult(assertions={'ok': Assertion(True, 'x', 1)})",
      "EvalResult(assertions={'ok': Assertion(passed=False)})", "EvalResult(assertions={'ok': Assertion(True, 'é' * 501)})",
      "EvalResult(assertions={'b': True, 'a': False})", "EvalResult(assertions={'Bad': True})",
      "EvalResult(assertions={'ok': Metric(1)})", "EvalResult(assertions=[True])",
      "EvalResult(score=Score(0.5), metrics={'q': 1})", "EvalResult(score=Score(0.5), assertions={'q': True})",
      "EvalResult(metrics={'q': 1}, assertions={'q': True})", "EvalResult(metrics={'x': 1}, assertions={'x': True})",
      "EvalResult(metrics={'q': 1}, reasoning='why')", "EvalResult(assertions={'q': True}, reasoning='why')",
      "EvalResult(metrics={'a': 1, 'q': 2}, assertions={'b': True}, reasoning='r')",
      "EvalResult(score=Score(0.5), metrics={'m': 1}, assertions={'a': True}, reasoning='r', summary='s', labels=['z', 'a'])",
      "EvalResult(score=Score(0.5), reasoning='')", "EvalResult(score=Score(0.5), reasoning=5)",
      "EvalResult(score=Score(0.5), reasoning='x' * 16384)", "EvalResult(score=Score(0.5), reasoning='x' * 16385)",
      "EvalResult(score=Score(0.5), reasoning='a\\x01')", "EvalResult(score=Score(0.5), summary='')",
      "EvalResult(score=Score(0.5), summary=5)", "EvalResult(score=Score(0.5), summary='x' * 4096)",
      "EvalResult(score=Score(0.5), summary='x' * 4097)", "EvalResult(score=Score(0.5), summary='é' * 2048)",
      "EvalResult(score=Score(0.5), summary='é' * 2049)", "EvalResult(score=Score(0.5), summary='line1\\nline2\\ttab')",
      "EvalResult(score=Score(0.5), summary='bell\\x07')", "EvalResult(score=Score(0.5), summary='日本語 😀')",
      "EvalResult(score=Score(0.5), labels=['b', 'a'])", "EvalResult(score=Score(0.5), labels=('b', 'a', 'B'))",
      "EvalResult(score=Score(0.5), labels=['a', 'a'])", "EvalResult(score=Score(0.5), labels=[str(i) for i in range(20)])",
      "EvalResult(score=Score(0.5), labels=[str(i) for i in range(21)])", "EvalResult(score=Score(0.5), labels=['x' * 64])",
      "EvalResult(score=Score(0.5), labels=['x' * 65])", "EvalResult(score=Score(0.5), labels=['é' * 32])",
      "EvalResult(score=Score(0.5), labels=['é' * 33])", "EvalResult(score=Score(0.5), labels=[''])",
      "EvalResult(score=Score(0.5), labels='abc')", "EvalResult(score=Score(0.5), labels='aa')",
      "EvalResult(score=Score(0.5), labels=5)", "EvalResult(score=Score(0.5), labels=[1])",
      "EvalResult(score=Score(0.5), labels=None)", "EvalResult(score=Score(0.5), labels={'b': 1, 'a': 2})",
      "EvalResult(score=Score(0.5), labels=['a\\x00'])", "EvalResult(score=Score(0.5), labels=['Z', 'a', 'é', '_'])",
      "EvalResult(metrics={('m' + str(i)): i for i in range(25)})", "EvalResult(metrics={('m' + str(i)): i for i in range(26)})",
      "EvalResult(score=Score(1), metrics={('m' + str(i)): i for i in range(24)})",
      "EvalResult(score=Score(1), metrics={('m' + str(i)): i for i in range(25)})",
      "EvalResult(metrics={('m' + str(i)): i for i in range(20)}, assertions={('a' + str(i)): True for i in range(5)})",
      "EvalResult(metrics={('m' + str(i)): i for i in range(20)}, assertions={('a' + str(i)): True for i in range(6)})",
      "EvalResult(metrics={('m' + str(i)): i for i in range(30)}, labels=[1])",
      "EvalResult(metrics={'m10': 1, 'm9': 2, 'm1': 3})", "EvalResult(metrics={'b': Metric(1), 'a': 'bad'})",
      "EvalResult(metrics={'b': 'bad', 'a': Metric(1)})", "EvalResult(metrics={'B': 1, 'a': 'bad'})",
      "EvalResult(metrics={'a': 1}, assertions={'B': True}, score=Score(2))", "EvalResult(Score(0.5))",
      "EvalResult(Score(0.5), {'m': 1}, {'a': True}, 'r', 's', ['l'])", "EvalResult(Score(0.5), {}, {}, None, None, (), 1)",
      "EvalResult(score=Score(0.5), extra=1)", "EvalResult(score=Score(0.5), summary=None, reasoning=None)",
      "EvalResult(score=Score(0.25), metrics={'n': len(session.events)}, summary=f'{session.count(\"tool_use\")} tools')",
      "EvalResult(score=Score(session.count('tool_result') / len(session.events)))",
      "EvalResult(metrics={'errors': len([e for e in session.events_of_type('tool_result') if e.payload.get('status') == 'error'])})",
      "EvalResult(assertions={'ended': session.events[-1].event_type == 'agent_end'})",
      "EvalResult(metrics={'latency': sum([e.payload.get('latency_ms', 0) for e in session.events_of_type('tool_result')])})",
      "EvalResult(score=Score(0.5), labels=[e.event_type for e in session.events][:3])",
      "EvalResult(score=Score(0.5), labels=sorted(set([e.event_type for e in session.events])))",
      "Score(0.5)", "5", "None", "True", "ConditionResult(True)", "[EvalResult(score=Score(0.5))]", "EvalResult",
      "1 / 0", "EvalResult(score=Score(1 / 0))", "undefined_name", "EvalResult(score=Score(0.5)) if True else 1",
      "EvalResult(score=Score(0.5)) and EvalResult(metrics={'m': 1})", "[EvalResult(metrics={'m': 1})][0]",
      "{'r': EvalResult(metrics={'m': 1})}['r']")
    for key in ["quality", "q", "Bad Key", "m", "a", "x" * 200, "é"]:
        E("EvalResult(score=Score(0.75), metrics={'m': 1}, assertions={'a': True}, reasoning='because')", eval_key=key)
        E("EvalResult(metrics={'m': 1, 'quality': 2}, reasoning='because')", eval_key=key)
    R("Score(0.5)", "Score(1)", "Score(0)", "Score(True)", "Score(0.5, True, 'pts', '50%', 'half')", "Metric(3)",
      "Metric(-2.5, 'ms')", "Metric(1, description='x')", "Assertion(True)", "Assertion(False, 'no')", "Assertion(0)",
      "ConditionResult(True)", "ConditionResult(False, 'not_applicable')", "ConditionResult(1)",
      "ConditionResult(False, 'X')", "ConditionResult(False, '')", "ConditionResult(False, 'a' * 128)",
      "ConditionResult(False, 'a' * 129)", "ConditionResult(False, 'a-b')", "ConditionResult(False, 'é')",
      "ConditionResult(False, 5)", "ConditionResult(False, 'a\\n')", "ConditionResult(False, 'a\\x00')",
      "ConditionResult()", "ConditionResult(True, reason_code='x', extra=1)", "ConditionResult(applicable=False)",
      "EvalResult()", "EvalResult(score=Score(0.5), labels=['b', 'a'])", "EvalResult(labels='ba')",
      "EvalResult(metrics={'m': 1}, summary='s')", "EvalResult(score=Score(1)) == EvalResult(score=Score(1.0))",
      "Score(0.5) == Score(1 / 2)", "Score(0.5) != Score(0.5, True)", "Score(0.5) == 0.5", "Metric(1) == Metric(1.0)",
      "[Score(0.5)] == [Score(0.5)]", "{Score(0.5)}", "{Score(0.5): 1}", "{EvalResult()}", "{Metric(1), Metric(1.0)}",
      "Score(0.5) < Score(0.6)", "Score(0.5) in [Score(0.5)]", "bool(Score(0))", "str(Assertion(True))",
      "f'{Metric(2)}'", "repr(ConditionResult(False))" if False else "[ConditionResult(False)]",
      "Score(0.5).value", "EvalResult().score", "Score(0.5).passed", "Metric(1).unit", "Score(0.5).get('value')",
      "len(Score(0.5))", "Score(0.5)[0]", "Score(0.5) + 1", "not Metric(0)", "Assertion(True) and 1",
      "Score(0.5, passed=False, unit='u', display_value='d', description='e') == Score(0.5, False, 'u', 'd', 'e')",
      "Score(1 / 3)", "Metric(10 ** 20)", "Metric(1e-7)", "Score(0.1 + 0.2)", "Metric(-0.0)")
    # conditions
    C("True", "False", "1", "0", "'yes'", "None", "[]", "ConditionResult(True)", "ConditionResult(False)",
      "ConditionResult(False, 'no_tools')", "ConditionResult(True, 'ignored_code')", "ConditionResult(False, 'Bad')",
      "ConditionResult(1)", "ConditionResult(False, reason_code='x_1')", "1 / 0", "session.count('tool_use') > 0",
      "session.count('nope') > 0", "len(session.events) == session.event_count", "bool(session.events)",
      "session.environment == 'production'", "session.agent_id.startswith('support')", "not session.events",
      "ConditionResult(session.count('tool_use') > 100, 'too_few_tools')",
      "ConditionResult(session.count('tool_use') > 1, 'too_few_tools')", "EvalResult(score=Score(1))", "Score(1)",
      "True if session.events else ConditionResult(False, 'empty')", "any([e.event_type == 'agent_end' for e in session.events])",
      "all([e.payload.get('status') == 'ok' for e in session.events_of_type('tool_result')])", "x", "session.nothing" if False else "session.ended_at > session.started_at",
      "1 == 1.0", "'a' < 'b' < 'c'", "[1] == [1]", "not 0", "True and ConditionResult(False, 'and_chain')",
      "0 or False", "ConditionResult(False, 'a' * 129)", "ConditionResult(False, 'abc\\n')", "(True,)",
      "{True}", "True + 0", "session.count('tool_use') % 2 == 1", "10 ** 20 > 1e19", "2 ** 64")


# ------------------------------------------------------------------ session
def session_cases():
    R("session.event_count", "len(session.events)", "session.events[0].id", "session.events[-1].payload",
      "session.events[0].payload['config']['tools']", "session.count('tool_use')",
      "session.events_of_type('tool_result')[0].payload.get('status')",
      "sum([e.payload.get('latency_ms', 0) for e in session.events])", "[e.event_type for e in session.events][:5]",
      "repr(session.events[0])" if False else "session.events[0]", "session.schema_version", "session.agent_id",
      "session.started_at", "session.ended_at", "session.assignment_id", "session.session_id", "session.session_revision_id",
      "session.environment", "session.events[0] == session.events[0]", "session.events[0] == session.events[1]",
      "session.events[0] in session.events", "session.events[0].payload.keys()", "sorted(session.events[0].payload)",
      "session.events[-1].payload['big']", "session.events[-1].payload['big'] + 1", "session.events[-1].payload['tiny']",
      "session.events[-1].payload['huge']", "str(session.events[-1].payload['huge'])", "session.events[-1].payload['zero']",
      "session.events[-1].payload['ratio'] * 3", "session.events[-1].payload['nested']['a'][3]['c']",
      "session.events[-1].payload['nested']['d']", "session.events[-1].payload['unicode']",
      "len(session.events[-1].payload['unicode'])", "session.events[-1].payload['unicode'].upper()",
      "session.events_of_type('nope')", "session.count(5)", "session.events_of_type()", "session.events[100]",
      "session.events['a']", "session.ended_at > session.started_at",
      "max([e.payload.get('latency_ms', 0) for e in session.events_of_type('tool_result')])",
      "min([e.payload.get('latency_ms', 0) for e in session.events_of_type('tool_result')])",
      "sorted([e.payload['latency_ms'] for e in session.events_of_type('tool_result')])[:5]",
      "session.events_of_type('human_input')", "len(repr(session))", "repr(session)[:300]", "str(session.events[5])",
      "session.events[1].payload['text']", "session.events[1].payload['text'].encode()",
      "session.events[0].payload['config']['temperature'] * 2", "session.event_count + 1",
      "[e.payload['call_id'] for e in session.events_of_type('tool_use')][-3:]",
      "{e.payload['tool_name']: e.payload['status'] for e in session.events_of_type('tool_result')}",
      "sorted({e.payload['tool_name'] for e in session.events_of_type('tool_use')})",
      "len({e.payload['tool_name'] for e in session.events_of_type('tool_use')})",
      "[e.payload.get('error', {}).get('code') for e in session.events_of_type('tool_result')]",
      "sum([e.payload['tokens']['input'] for e in session.events_of_type('model_response')])",
      "round(sum([e.payload['cost_usd'] for e in session.events_of_type('model_response')]), 4)",
      "sum([e.payload['cost_usd'] for e in session.events_of_type('model_response')])",
      "[e.payload['output']['score'] for e in session.events_of_type('tool_result') if e.payload['status'] == 'ok']",
      "sum([e.payload['output']['score'] for e in session.events_of_type('tool_result') if e.payload['status'] == 'ok'])",
      "[type_ for type_ in [e.event_type for e in session.events] if type_ != 'tool_use'][:6]",
      "f\"{session.count('tool_result')}/{session.count('tool_use')} results\"",
      "f\"{sum([e.payload['latency_ms'] for e in session.events_of_type('tool_result')]) / session.count('tool_result'):.3f}\"",
      "[e.payload['args']['query'].lower() for e in session.events_of_type('tool_use')][:6]",
      "[e.payload['args']['flags'] for e in session.events_of_type('tool_use')][:6]",
      "[e.ts[11:19] for e in session.events][:4]", "sorted([e.id for e in session.events], reverse=True)[:3]",
      "[e.payload.get('stop_reason') for e in session.events_of_type('model_response')]",
      "session.events[0].payload['config']", "session.events[0].payload['config']['retries'] is None",
      "list(session.events[-1].payload.items())[:3]", "session.events[-1].payload.get('missing', 'dflt')",
      "session.events[2].payload['args']['limit'] // 3", "session.events[-1].payload['neg'] % 5",
      "session.events[-1].payload['neg'] // 5", "-session.events[-1].payload['neg']",
      "session.events[-1].payload['nested']['a'][1] + 0.5", "session.events[-1].payload['big'] * 1.0",
      "session.events[-1].payload['big'] == 9007199254740992.0", "session.events[-1].payload['huge'] * 1e10",
      "session.events[-1].payload['tiny'] / 3", "f\"{session.events[-1].payload['tiny']:.2e}\"",
      "session.events == session.events", "session.events[0:2]", "session.events[::25]",
      "session.events_of_type('agent_start') + session.events_of_type('agent_end')", "session.events * 0",
      "session.events + [1]", "session == session", "len(session.events_of_type('tool_use')) == session.count('tool_use')",
      "session.events[0].payload == session.events[0].payload", "session.events[0].payload['config']['strict'] + 1",
      "[e for e in session.events if e.event_type == 'agent_end'][0].payload['summary']",
      "dict(session.events[-1].payload['nested'])", "list(session.events[-1].payload['nested']['a'][3].values())",
      "any([e.payload.get('error', {}).get('retryable', False) for e in session.events_of_type('tool_result')])",
      "[len(e.payload['output']['text']) for e in session.events_of_type('tool_result') if 'output' in e.payload]",
      "max(session.events_of_type('tool_result'), key=len)" if False else "max([len(e.payload) for e in session.events])",
      "sorted([e.payload.get('latency_ms', 0) for e in session.events_of_type('tool_result')], reverse=True)[0]",
      "{e.event_type: 0 for e in session.events}", "list({e.event_type: 0 for e in session.events})",
      "str(session.events_of_type('agent_end'))", "session.events[0].payload['config']['max_tokens'] ** 2",
      "session.events[-1].id.upper()", "session.events[-1].ts.split('T')", "session.started_at[:10]",
      "[e for e in session.events if e.event_type == 'agent_end']")


# ------------------------------------------------------------------ evaluation order
def evaluation_order():
    R("0.5.partition(1 / 0)", "[].lower(1 / 0)", "(1).hex(1 / 0)", "'a'.upper(1 / 0)", "None.get([][0])",
      "session.events_of_type([][0])", "session.nope_count" if False else "session.count(1 / 0)",
      "{1 / 0: [][0]}", "{[][0]: 1 / 0}", "(1 / 0) + [][0]", "[][0] + (1 / 0)", "1 > 2 > 1 / 0",
      "1 < 2 > 1 / 0", "Score(1 / 0, [][0])", "f'{1 / 0}{[][0]}'", "f'{[][0]}{1 / 0}'", "[][0][1 / 0]",
      "(1 / 0)[[][0]]", "[1][1 / 0:[][0]]", "[1][[][0]:1 / 0]", "sorted([], key=1 / 0, reverse=[][0])",
      "sorted([], reverse=[][0], key=1 / 0)", "[1 / 0 for x in []]", "[1 / 0 for x in [][0]]",
      "1 / 0 if [][0] else 2", "[][0] if 1 / 0 else 2", "(1 / 0) in [][0]", "[][0] in (1 / 0)",
      "{**{}[1], 'a': 1 / 0}", "{'a': 1 / 0, **{}[1]}", "[1 / 0, [][0]]", "([][0], 1 / 0)", "{1 / 0, [][0]}",
      "len(1 / 0, [][0])", "enumerate(1 / 0)", "undefined_fn(1 / 0)", "max([][0], key=1 / 0)",
      "1 / 0 and [][0]", "0 and 1 / 0 or [][0]", "not 1 / 0", "-(1 / 0)", "(1 / 0) ** 2",
      "'%s %s' % (1 / 0, [][0])", "[x for x in [1, 2] if 1 / (x - 1)]", "[1 / (x - 1) for x in [2, 1]]",
      "{x: 1 / 0 for x in [1]}", "{1 / 0: x for x in [1]}", "[y for x in [[]] for y in x[0]]",
      "EvalResult(score=Score(2), metrics={'a': 1 / 0})", "EvalResult(metrics={'a': 1 / 0}, score=Score(2))",
      "Score(0.5, passed=1, unit=5)", "Score(2, passed=1)", "Metric('x', unit=5)", "Assertion(1, description=5)",
      "EvalResult(reasoning='', summary=5)", "EvalResult(summary=5, reasoning='')", "EvalResult(labels=[1], summary='')",
      "ConditionResult(1, 'BAD')", "ConditionResult(True, 'BAD')")
    E("EvalResult(metrics={'b': 'x', 'a': Metric(1), 'A': 1})", "EvalResult(metrics={'a': 1}, assertions={'B': 1})",
      "EvalResult(metrics={'a': 'x'}, assertions={'B': True})", "EvalResult(score=Score(0.5), metrics={'B': 1}, assertions={'q': 1})",
      "EvalResult(metrics={('m' + str(i)): i for i in range(26)}, assertions={'a': 1})",
      "EvalResult(metrics={('m' + str(i)): i for i in range(26)}, assertions={'q': True})",
      "EvalResult(score=Score(0.5), metrics={('m' + str(i)): i for i in range(25)}, assertions={'q': True})")


def write_outputs(root):
    make = make_transcript.build()
    with open(os.path.join(root, "transcript.json"), "w", encoding="utf-8") as f:
        json.dump(make, f, ensure_ascii=False, indent=1)
        f.write("\n")
    lines = [json.dumps(c, ensure_ascii=False) for c in CASES]
    blob = "\n".join(lines) + "\n"
    results = []
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, os.path.join(root, "oracle.py"), "--batch",
                               os.path.join(root, "transcript.json")],
                              input=blob, capture_output=True, text=True, env=env, check=True)
        results.append(proc.stdout.split("\n")[:-1])
    kept_in, kept_out, dropped = [], [], 0
    for i, line in enumerate(lines):
        outs = {r[i] for r in results}
        if len(outs) != 1 or "UnsafeEvaluatorSource" in results[0][i]:
            dropped += 1
            continue
        kept_in.append(line)
        kept_out.append(results[0][i])
    with open(os.path.join(root, "corpus.jsonl"), "w", encoding="utf-8") as f:
        f.write("\n".join(kept_in) + "\n")
    with open(os.path.join(root, "expected.jsonl"), "w", encoding="utf-8") as f:
        f.write("\n".join(kept_out) + "\n")
    return len(kept_in), dropped


def main():
    for section in (literals, operators, comparisons, identity, booleans, indexing, comprehensions, formatting,
                    builtins_cases, methods, source_checks, results, session_cases, evaluation_order):
        section()
    kept, dropped = write_outputs(HERE)
    print(f"corpus: {kept} cases written, {dropped} dropped (hash-order dependent)")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Generates the scale corpus: expressions over production-sized data
(ranges up to 10^7, strings of 10^7-10^8 characters, comprehensions of
10^6-10^7 items, nested lists, dict/set building, sorting 10^6 items, big
ints, word counts over a 25 MiB transcript of text events) and CPython
3.11's outcome for each under the reference sandbox's bounds.

Writes, next to this file:
  scale-corpus.jsonl    {"kind", "source", "session": "none"|"text", "timeout": s}
  scale-expected.jsonl  CPython's outcome line for each, same order

Each case runs in a fresh `python3` with the session built first (as the
reference's runner does), then RLIMIT_AS 512 MiB and RLIMIT_CPU of the
case's timeout: MemoryError, or death at the address-space cap, is the
"memory" limit; running out of CPU or wall time is "timeout". The 25 MiB
transcript is not committed: text_transcript() writes it deterministically
(the test calls it too).

Run: /usr/bin/python3 tests/conformance/gen_scale.py
"""
import json
import os
import random
import resource
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle  # noqa: E402

AS_BYTES = 512 << 20
DEFAULT_TIMEOUT = 30
SHORT_TIMEOUT = 2  # for the few cases CPython cannot finish
TEXT_EVENTS = 30000
VOCAB_SEED = 16


def text_transcript(path):
    """A ~25 MiB transcript of 30,000 text events (a long agent session)."""
    rnd = random.Random(VOCAB_SEED)
    vocab = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(1, 10)))
             for _ in range(5000)] + ["café", "naïve", "данные", "日本語", "😀", "error", "timeout"]
    sentences = [" ".join(rnd.choice(vocab) for _ in range(rnd.randint(20, 205))) for _ in range(500)]
    events = []
    for i in range(TEXT_EVENTS):
        kind = ("human_input", "model_response", "tool_result")[i % 3]
        payload = {"text": sentences[(i * 7919) % len(sentences)], "n": i}
        if i % 3 == 2:
            payload = {"output": sentences[(i * 104729) % len(sentences)], "status": "ok" if i % 5 else "error"}
        sec = i
        events.append({"id": f"e{i:06d}", "ts": f"2026-08-28T{sec // 3600 % 24:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}.000000Z",
                       "event_type": kind, "payload": payload})
    doc = {"schema_version": "2", "assignment_id": "scale", "session_id": "scale", "session_revision_id": "r1",
           "agent_id": "agent", "environment": "test", "started_at": "2026-08-28T00:00:00.000000Z",
           "ended_at": "2026-08-28T08:20:00.000000Z", "event_count": len(events), "events": events}
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, ensure_ascii=False)


CASES = []
EDGES = [
    "'abc'.zfill(-2**63+1)",
    "'abc'.zfill(-2**63)",
    "'abc'.zfill(-2**70)",
    "'abc'.zfill(2**63)",
    "'abc'.ljust(-2**63)",
    "'abc'.rjust(-2**63+1, '*')",
    "'abc'.center(-2**63)",
    "'abc'.center(-2**100)",
    "'abc'.ljust(2**100)",
    "'abc'.find('', 2**63)",
    "'abc'.find('', 2**100)",
    "'abc'.find('', -2**100)",
    "'abc'.rfind('', 2**63)",
    "'abc'.index('', 3, 2**63)",
    "'abc'.count('', 2**63)",
    "'abc'.count('', -2**63, 2**63)",
    "'abc'.startswith('', 2**63)",
    "'abc'.endswith('', -2**63)",
    "'abc'.find('b', -2**63)",
    "'%.*f' % (-2**63, 1.0)",
    "'%.*f' % (2**63, 1.0)",
    "'%.*f' % (-1, 1.0)",
    "'%*d' % (-2**63, 1)",
    "'%*d' % (2**31, 1)",
    "'%.*f' % (2**31, 1.0)",
    "'abc'.expandtabs(-2**63)",
    "'abc'.expandtabs(2**63)",
    "'a\\tb'.expandtabs(-5)",
    "'a,b,c'.split(',', -2**63)",
    "'a,b,c'.split(',', 2**63)",
    "'a,b,c'.rsplit(',', 2**100)",
    "'abc'.replace('b', 'x', -2**63)",
    "'abc'.replace('b', 'x', 2**63)",
    "'abc' * -2**63",
    "'abc' * 2**63",
    '[1] * -2**100',
    "'abc'[2**63:]",
    "'abc'[-2**63:2**63]",
    "'abc'[::2**63]",
    "'abc'[::-2**63]",
    '(1,2,3)[2**63:-2**63:-1]',
    "'abc'.splitlines(2**63)",
    'round(1.5, 2**63)',
    'round(1.5, -2**63)',
    'round(2.5, -2**100)',
    "format(1.0, '.2147483648f')",
    "format(1.0, '9223372036854775808')",
    "'abc'.zfill(True)",
    'range(2**63)[2**62]',
    'len(range(2**62))',
    '2**63 in range(2**64)',
    'range(-2**100, 2**100)[-1]',
    '[1,2,3].index(2, -2**63, 2**63)',
    '(1,2,3).count(2)',
    "'abc'.encode().find(b'', 2**63)",
    "b'abc'.zfill(-2**63)",
    "b'abc'.center(-2**63)",
    "'x'.join([]).zfill(-1)",
    "'abc'.ljust(3, '')",
    "'abc'.ljust(5, 'ab')",
    "'abc'.center(2**31)",
    "'abc'.zfill(-2**64)",
    "'abc'.ljust(-2**64 * 16)",
    "'abc'.rjust(-2**64, 'é')",
    "'abc'.center(2**64)",
    "'a'.ljust(2**62 + 1, '😀')",
    "b'abc'.ljust(2**63 - 33)",
    "b'abc'.ljust(2**63 - 34)",
    "b'abc'.zfill(-2**64)",
    "b'abc'.hex(',', 2**31)",
    "b'abc'.hex(',', -2**31)",
    "b'abc'.hex('', 2**63)",
    "b'abc'.hex(',', 1.5)",
    "b'ab\\r\\ncd\\n'.splitlines(2**31)",
    "b'ab\\r\\ncd\\ref'.splitlines(-2**31)",
    "b'abc'.splitlines(None)",
    "'\\ud800x'.encode('utf-8', 'surrogatepass')",
    "'aé'.encode('utf-8', 'surrogatepass')",
    "'%.*e' % (2**31 - 1, 1.0)",
    "'%#.*E' % (2**31 - 1, 12345.678)",
    "'%.*e' % (2**31 - 2, 1.0)",
    "f'{1.0:.{2**31 - 1}e}'",
    "f'{1+2j:.{2**31 - 1}e}'",
    "f'{1.5:.{2**31}f}'",
    "f'{1.5:.{2**63}f}'",
    "f'{1.5:.{2**63 - 1}f}'",
    "f'{\"x\":.{2**63 - 1}}'",
    "f'{\"x\":{2**63 - 1}}'",
    "f'{1:{2**40}}'",
    "f'{1:.{2**40}}'",
    "len(f'{1.5:.{10**6}f}')",
    "f'{1.5:.{10**6}g}'",
    "f'{12345.678:.{1200}f}'[-1200:-1180]",
    "f'{1.5:.{2**28 + 24}g}'",
    "f'{1.5:.{2**28}g}'",
    "f'{1:0={10**6},}'[:7]",
    "'%.3000000000f' % 1.0",
    "'%.2147483647f' % 1.0",
    "'%99999999999999999999d' % 1",
    "'%9223372036854775807d' % 1",
    "'%.*d' % (2**31 - 3, 1)",
    "'%.*d' % (2**31 - 4, 1)",
    "len('%.*x' % (10**6, 255))",
    "round(6 * (((10**64)**64)**26 * (10**64)**54 * 10**47), -110000) == 10 * (((10**64)**64)**26 * (10**64)**54 * 10**47)",
    "[1, 2, 3].index(2, None)",
    "(1, 2, 3).index(3, 0, None)",
    "[1, 2, 3].index(2, 0, 2**64)",
]


def add(source, session="none", timeout=DEFAULT_TIMEOUT, kind="raw"):
    CASES.append({"kind": kind, "source": source, "session": session, "timeout": timeout})


def build_cases():
    # builtins over ranges
    for k in (5, 6, 7):
        n = f"10**{k}"
        for f in ("sum", "max", "min", "len", "any", "all", "sorted", "list", "tuple", "set"):
            src = {"sorted": f"sorted(range({n}))[-3:]", "list": f"list(range({n}))[-2:]",
                   "tuple": f"tuple(range({n}))[{n} // 2]", "set": f"len(set(range({n})))"}.get(f, f"{f}(range({n}))")
            add(src)
    add("sum(range(-10**7, 10**7, 3))")
    add("max(range(10**6), default=-1)")
    add("min(range(10**7, 0, -1))")
    add("sum(range(0, 10**7, 7)) % 1000003")
    add("len(range(10**18))")
    add("range(10**18)[10**17]")
    add("10**17 + 3 in range(0, 10**18, 7)")
    add("range(-10**12, 10**12, 3)[-1]")
    add("len(range(0, 10**20, 3))")
    add("range(10**30)[-1] % 97")
    add("sum(range(10**12))", timeout=SHORT_TIMEOUT)
    add("max(range(10**12))", timeout=SHORT_TIMEOUT)
    add("len([0 for i in range(10**12)])", timeout=SHORT_TIMEOUT)
    add("any(range(0, 1)) or all(range(1, 10**7))")
    add("sum({i: 1 for i in range(10**6)}.values())")
    # comprehensions
    for k in (6, 7):
        n = f"10**{k}"
        add(f"len([i for i in range({n})])")
        add(f"sum([i * 2 for i in range({n})])")
        add(f"len([i for i in range({n}) if i % 3 == 0])")
        add(f"sum([1 for i in range({n}) if i % 2])")
        add(f"len({{i % 1000 for i in range({n})}})")
        add(f"len({{i % 1000: i for i in range({n})}})")
        add(f"sum([len(str(i)) for i in range({n} // 10)])")
    add("len([j for i in range(1000) for j in range(1000)])")
    add("sum([i * j for i in range(3000) for j in range(1000) if j % 7 == 0])")
    add("len([(i, i) for i in range(10**6)])")
    add("len([[i] for i in range(10**6)])")
    add("len([str(i) for i in range(10**6)])")
    add("len([float(i) for i in range(10**6)])")
    add("sum([x for x in [i % 10 for i in range(10**6)]])")
    add("len([i for i in range(10**8)])")
    add("len([i for i in range(10**7) if i < 0])")
    # nested lists
    add("len([[i] * 10 for i in range(10**5)])")
    add("sum([sum(r) for r in [[j for j in range(100)] for i in range(10**4)]])")
    add("len([[[k for k in range(10)] for j in range(10)] for i in range(10**4)])")
    add("len([list(range(i % 50)) for i in range(10**5)])")
    add("[[0] * 1000 for i in range(1000)][999][999]")
    add("len([[0] * 10**4] * 10**4)")
    add("len([[0] * 10**4 for i in range(10**4)])")
    add("sorted([[i % 7, -i] for i in range(10**5)])[:3]")
    # dicts and sets
    add("len({i: i for i in range(10**6)})")
    add("len({str(i): i for i in range(10**6)})")
    add("sum({i: i * i for i in range(10**6)}.values()) % 1000003")
    add("len(set(range(10**7)))")
    add("len({str(i) for i in range(10**6)})")
    add("len(dict([(i, i) for i in range(10**6)]))")
    add("len(dict({i: 1 for i in range(10**5)}))")
    add("len({i: [i] for i in range(10**6)})")
    add("len({(i, i % 7): i for i in range(10**6)})")
    add("sorted({i % 1000: i for i in range(10**6)}.items())[:2]")
    add("len(set([i % 100 for i in range(10**6)]))")
    add("len({i for i in range(10**6)} | {i for i in range(5 * 10**5, 15 * 10**5)})")
    add("len({i for i in range(10**6)} & {i for i in range(5 * 10**5, 15 * 10**5)})")
    add("len({i for i in range(10**6)} - set(range(10**5)))")
    add("max({str(i): i for i in range(10**6)})")
    add("len({i: i for i in range(10**8)})")
    add("len(set(range(10**8)))")
    # sorting
    add("sorted(range(10**6), reverse=True)[:3]")
    add("sorted([-i for i in range(10**6)])[:3]")
    add("sorted([(i * 7919) % 1000003 for i in range(10**6)])[500000]")
    add("sorted([str(i) for i in range(10**6)])[:3]")
    add("sorted([str(i) for i in range(10**6)], key=len)[-1]")
    add("sorted([float(i % 1000) for i in range(10**6)])[-1]")
    add("sorted([(i % 10, i) for i in range(10**6)])[-1]")
    add("sorted([i % 977 for i in range(10**6)], reverse=True)[:3]")
    add("sorted(set(range(10**6)))[-1]")
    add("sorted({str(i): i for i in range(10**5)}.values())[-1]")
    add("sorted(range(10**7))[-1]")
    add("max(sorted([i ^ 12345 for i in range(10**6)]))")
    # strings of 10^7 - 10^8 characters
    add("len('x' * 10**8)")
    add("len('ab' * 10**7 + 'c' * 10**7)")
    add("len(('ab ' * 10**6).split())")
    add("len(('ab ' * 10**7).split())")
    add("len(' '.join(['word'] * 10**6))")
    add("len(' '.join([str(i) for i in range(10**6)]))")
    add("len(''.join(['x'] * 10**7))")
    add("('x' * 10**8).count('x')")
    add("('x' * 10**8).find('y')")
    add("('ab' * 10**7).replace('a', 'cd').count('c')")
    add("len(('abc' * 10**7).upper())")
    add("('abc' * 10**7)[-5:]")
    add("('abc' * 10**7)[::10**6]")
    add("len(('a\\n' * 10**6).splitlines())")
    add("'y' in 'x' * 10**8")
    add("('x' * 10**7 + 'y').index('y')")
    add("len(('x' * 10**7).center(2 * 10**7))")
    add("len(('x' * 10**7).zfill(3 * 10**7))")
    add("len(('é' * 10**7).encode())")
    add("len('é' * 10**7)")
    add("('é' * 10**7)[5 * 10**6]")
    add("len(('a,b,' * 10**6).split(','))")
    add("len(('a b ' * 10**6).rsplit(' ', 10))")
    add("len(str(list(range(10**6))))")
    add("len(repr(['x' * 10] * 10**6))")
    add("len(f\"{'x' * 10**7}{10**6}\")")
    add("len('%s' % ('x' * 10**7))")
    add("len('{}'.format('y' * 10**7))")
    add("len(('x' * 10**7).strip('x'))")
    add("sorted(set('the quick brown fox ' * 10**6))[:3]")
    add("len(list('abc' * 10**6))")
    add("sum([1 for c in 'abc' * 10**6 if c == 'a'])")
    add("('ab' * 10**7).startswith('ab' * 10**6)")
    add("len(('a\\r\\nb\\u2028c\\x85' * 10**6).splitlines(True))")
    add("len(('é,ü,' * 10**6).split(','))")
    add("len(('a, b, ' * 10**6).split(', '))")
    add("[len(x) for x in ('ab,' * 10**6).rsplit(',', 3)]")
    add("len(('ab' * 10**7).lower())")
    add("('ab' * 10**7).rfind('ba', 0, 10**6)")
    add("len(('é' * 10**6 + 'x').encode('utf-8'))")
    add("len(('x' * 10**7).encode('ascii').decode())")
    add("len('%s|%5s' % ('x' * 10**7, 'é' * 10**6))")
    add("len(('x' * 10**7).rjust(2 * 10**7, 'é'))")
    add("len(('x' * 10**7).ljust(2 * 10**7))")
    add("len(('x' * 10**7).center(2**62, 'é'))")
    add("len(('ab' * 10**7).replace('ab', 'x' * 11))")
    add("sum([len(str(-i)) for i in range(10**6)])")
    add("len(''.join([str(i) for i in range(10**6)]))")
    add("len('é'.join(['ab'] * 10**6))")
    add("sum([1 for s in ['aé😀' * 10**5] for i in range(0, len(s), 7) if s[i] == s[-i-1]])")
    add("len([s[i] for s in ['é' * 10**6] for i in range(len(s))])")
    add("sum([len(s[i:i + 3]) for s in ['日本' * 10**5] for i in range(0, len(s), 5)])")
    add("('aé' * 10**6).find('a', 10**6) + ('aé' * 10**6).count('é', 5 * 10**5)")
    add("[(f'{s}' is s, ('%s' % s) is s, s.split(',')[0] is s, s.splitlines(True)[0] is s) for s in ['x' * 10**7]]")
    add("len(f\"{'x' * 10**7}{'é' * 10**6}|{10**6:>12}\")")
    add("('日本é😀' * 10**6).count('😀') + ('aé' * 10**6).count('é', 5 * 10**5, -3)")
    add("len('x' * 10**9)")
    add("len('x' * 2**62)")
    add("len(('x' * 10**8) * 10)")
    add("len(' '.join(['x' * 10**7] * 100))")
    # big ints
    add("(2 ** 10**7) % 1000007")
    add("(3 ** 10**6) % 10**9")
    add("(2 ** 14000) % 10**9")
    add("(2 ** 10**8) % 999983")
    add("((1 << 10**7) - 1) % 65537")
    add("(10**5000 // 7**2000) % 1000")
    add("(7 ** 5**7) % 1000003")
    add("(2 ** 64 - 1) * (2 ** 64 + 1)")
    add("sum([2**i for i in range(10**4)]) % 1000")
    add("len(str(2 ** 14000))")
    add("(-3) ** 10**6 % 1000")
    add("2 ** 10**12", timeout=SHORT_TIMEOUT)
    add("2 ** 2**40")
    add("(10 ** 10**6) // (10 ** (10**6 - 3))")
    add("divmod(10**10000, 3**5000)[1] % 1000")
    add("abs(-(2 ** 10**6)) % 10")
    add("2 ** 10**6 % (10**9 + 7)")
    add("int('9' * 4300) % 1000")
    add("int('9' * 4301)")
    add("float(2 ** 1023) * 2")
    add("float(2 ** 1024)")
    add("(2 ** 1000 // 3) % 1000")
    # collections at the budget
    add("len([0] * 10**7)")
    add("len([0] * 10**8)")
    add("len([0] * 10**9)")
    add("len((0,) * 10**7)")
    add("len([None] * 10**7 + [None] * 10**7)")
    add("len(list(range(10**7)) * 6)")
    add("len(tuple(range(10**7)))")
    add("len(list(range(10**8)))")
    add("[0] * 2**62")
    add("len([[]] * 10**7)")
    # argument edges: 0, negative, huge, past sys.maxsize
    for src in EDGES:
        add(src)
    # round(int, ndigits < 0) computes 10**-ndigits whatever the int is
    add("round(15, -2**63)", timeout=SHORT_TIMEOUT)
    add("round(0, -10**12)", timeout=SHORT_TIMEOUT)
    add("round(15, -10**5)")
    add("(round(25, -1), round(-25, -1), round(35, -1), round(True, -1), round(15, -2))")
    add("round((10**64) ** 64 * 7 + 5 * (10**64) ** 63 * 10**63, -4096) // (10**64) ** 64")
    add("round((10**64) ** 64 * 7 + 5 * (10**64) ** 63 * 10**63 + 1, -4096) // (10**64) ** 64")
    add("round(((10**64) ** 64) ** 64 * 3 + ((10**64) ** 64) ** 32, -150000) == ((10**64) ** 64) ** 64 * 3")
    # products of 870,000-bit ints in a loop: the collector runs during GMP's multiplications
    add("sum([((((10**64) ** 64) ** 64 + i) * (((10**64) ** 64) ** 64 - i)) % 1000003 for i in range(300)])")
    # word counts and aggregations over the 25 MiB transcript
    T = "text"
    add("len(session.events)", T)
    add("sum([len(e.payload.get('text', '').split()) for e in session.events])", T)
    add("len(' '.join([e.payload.get('text', '') for e in session.events]).split())", T)
    add("sum([len(e.payload.get('text', '')) for e in session.events])", T)
    add("len({w for e in session.events for w in e.payload.get('text', '').split()})", T)
    add("sorted({w: 1 for e in session.events for w in e.payload.get('text', '').split()})[:5]", T)
    add("max([len(e.payload.get('output', '')) for e in session.events])", T)
    add("sum([e.payload.get('text', '').count('error') for e in session.events])", T)
    add("len([e for e in session.events if 'timeout' in e.payload.get('text', '')])", T)
    add("session.count('tool_result')", T)
    add("len(session.events_of_type('human_input'))", T)
    add("sum([1 for e in session.events if e.payload.get('status') == 'error'])", T)
    add("len(''.join([e.payload.get('output', '') for e in session.events]))", T)
    add("sorted([len(e.payload.get('text', '')) for e in session.events])[-3:]", T)
    add("sum([len(w) for e in session.events for w in e.payload.get('text', '').split()])", T)
    add("len(set(' '.join([e.payload.get('text', '') for e in session.events]).split()))", T)
    add("sum([e.payload.get('n', 0) for e in session.events])", T)
    add("len([e.id for e in session.events if e.event_type == 'model_response'])", T)
    add("' '.join([e.payload.get('text', '') for e in session.events]).count(' ')", T)
    add("len(' '.join([e.payload.get('text', '') for e in session.events]).upper())", T)
    add("sorted([(len(e.payload.get('text', '')), e.id) for e in session.events])[-1]", T)
    add("len([w for w in ' '.join([e.payload.get('text', '') for e in session.events]).split() if len(w) > 8])", T)
    add("max([e.payload.get('text', '') for e in session.events])[:20]", T)
    add("len(str([e.payload for e in session.events]))", T)
    add("len(' '.join([e.payload.get('text', '') for e in session.events]) * 3)", T)
    add("len(' '.join([e.payload.get('text', '') for e in session.events]) * 40)", T)
    add("EvalResult(score=Score(min(1.0, sum([len(e.payload.get('text', '').split()) for e in session.events]) / 10**7)), "
        "metrics={'words': Metric(len(' '.join([e.payload.get('text', '') for e in session.events]).split()))})",
        T, kind="evaluator")
    add("sum([len(e.payload.get('text', '').split()) for e in session.events]) > 10**6", T, kind="condition")
    add("len({0: w for e in session.events for k in range(10**5) for w in e.payload.get('text', '').split()})", T,
        timeout=SHORT_TIMEOUT)


def one():
    """Child mode: one case from stdin, under the reference's bounds."""
    case = json.loads(sys.stdin.read())
    session = None
    if case.get("transcript"):
        with open(case["transcript"], encoding="utf-8") as fh:
            session = oracle.session_from_wire(json.load(fh))
    resource.setrlimit(resource.RLIMIT_AS, (AS_BYTES, AS_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (case["timeout"], case["timeout"] + 1))
    try:
        out = oracle.outcome(case["kind"], case["source"], "q", session)
    except MemoryError:
        out = {"ok": False, "stage": "runtime", "error_type": "MemoryError"}
    if out.get("stage") == "runtime" and out.get("error_type") == "MemoryError":
        out = {"ok": False, "stage": "limit", "error_type": "memory"}
    sys.stdout.write(oracle.outcome_line(out))


def cpython_outcome(case, transcript_path):
    job = dict(case, transcript=transcript_path if case["session"] == "text" else None)
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--one"], input=json.dumps(job),
                              capture_output=True, text=True, timeout=case["timeout"] + 60)
    except subprocess.TimeoutExpired:
        return {"ok": False, "stage": "limit", "error_type": "timeout"}
    if proc.returncode == 0 and proc.stdout:
        return json.loads(proc.stdout)
    if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return {"ok": False, "stage": "limit", "error_type": "timeout"}
    return {"ok": False, "stage": "limit", "error_type": "memory"}  # died at the address-space cap


def main():
    import tempfile
    build_cases()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "text.json")
        text_transcript(path)
        out = []
        for i, case in enumerate(CASES):
            out.append(cpython_outcome(case, path))
            print(f"{i + 1}/{len(CASES)} {case['source'][:70]!r} -> {json.dumps(out[-1])[:90]}", file=sys.stderr)
    with open(os.path.join(HERE, "scale-corpus.jsonl"), "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(c, ensure_ascii=False) + "\n" for c in CASES)
    with open(os.path.join(HERE, "scale-expected.jsonl"), "w", encoding="utf-8") as fh:
        fh.writelines(oracle.outcome_line(o) + "\n" for o in out)


if __name__ == "__main__":
    if sys.argv[1:] == ["--one"]:
        one()
    else:
        main()

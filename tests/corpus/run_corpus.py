#!/usr/bin/env python3
"""The Python-semantics corpus: ordinary Python mixed with dyntrace tensors, plain vs jit.

Every case (tests/corpus/cases_*.py) runs in a process of its own, so a crash fails that case and
not the run. In it, the function runs under plain CPython (an unmarked copy: dt.jit marks the code
object it is given) and under `dt.jit` with the eager and then the cpu backend, on equal inputs,
for each of its calls (jitlib.run_differential): results, exceptions (type and message), printed
output and the inputs afterwards must match, tensors bit for bit (both backends promise plain
eager's results element for element). The summary gives each case's outcome (pass, mismatch,
crash, known failure) and whether its frame compiled whole (no graph break, no fallback) on each
backend, and whether it compiles with `fullgraph=True`, counted over all cases and over those not
marked `must_break` (corpus.py says which cases may be marked). The exit status is 1 if any case
mismatched, crashed, a known failure passed, or a `must_break` case compiled with `fullgraph=True`.

    python3 tests/corpus/run_corpus.py --module-dir dist/python3.11     # every case, 2 workers
    python3 tests/corpus/run_corpus.py -k dict -k match                  # names containing either
    python3 tests/corpus/run_corpus.py --case merge_configs              # one case, here, verbose
"""
import argparse
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
PY_TESTS = os.path.join(HERE, "..", "python")
BACKENDS = ("eager", "cpu")


def setup_path(module_dir):
    for path in (module_dir, PY_TESTS, HERE):
        if path and path not in sys.path:
            sys.path.insert(0, path)


# ---------------------------------------------------------------------------------------------
# One case, in this process.

def check_backend(c, backend):
    """Plain vs jit on one backend: the outcome and whether the frame compiled whole."""
    import dyntrace as dt
    from jitlib import jitted_copy, run_differential
    dt.reset()
    jfn = jitted_copy(c.fn, backend=backend)
    error = None
    try:
        run_differential(c.fn, jfn, c.factory, c.calls, seed_base=zlib.crc32(c.name.encode()) % 997,
                         exact=True)
    except AssertionError:
        error = traceback.format_exc(limit=-3)
    s = dt.stats()
    return {"ok": error is None, "error": error,
            "whole": s["graph_breaks"] == 0 and s["fallbacks"] == 0 and s["frames_traced"] >= 1,
            "graph_breaks": s["graph_breaks"], "fallbacks": s["fallbacks"],
            "reasons": sorted(set(s["break_reasons"]) | set(s["fallback_reasons"]))[:4]}


def check_fullgraph(c):
    """Whether every call compiles whole under dt.jit(fullgraph=True) on the eager backend: no
    call raises dyntrace's fullgraph error, and nothing broke (code that raises is run by CPython,
    which raises its own error: not counted as compiled). Returns (ok, why not or None)."""
    import dyntrace as dt
    from jitlib import as_call, capture, jitted_copy
    dt.reset()
    jfn = jitted_copy(c.fn, backend="eager", fullgraph=True)
    seed_base = zlib.crc32(c.name.encode()) % 997
    for i in range(c.calls):
        dt.manual_seed(seed_base + 1000 * i)
        _, exc, _ = capture(jfn, as_call(c.factory(i)))
        if isinstance(exc, RuntimeError) and "fullgraph=True" in str(exc):
            return False, str(exc).splitlines()[0]
    s = dt.stats()
    if s["graph_breaks"] or s["fallbacks"]:
        return False, "CPython ran it: %s" % "; ".join(sorted(set(s["break_reasons"])))[:300]
    return True, None


def run_case_here(name, result_file):
    from corpus import find
    c = find(name)
    result = {"name": name, "backends": {}}
    for backend in BACKENDS:
        result["backends"][backend] = check_backend(c, backend)
    result["fullgraph"], result["fullgraph_error"] = check_fullgraph(c)
    if result_file:
        with open(result_file, "w") as f:
            json.dump(result, f)
    else:
        if c.must_break:
            print("%s must break: %s" % (name, c.must_break))
        for backend, r in result["backends"].items():
            print("%s on %s: %s, %s" % (name, backend, "ok" if r["ok"] else "MISMATCH",
                                        "whole" if r["whole"] else "breaks %r" % r["reasons"]))
            if r["error"]:
                print(r["error"])
        print("%s with fullgraph=True: %s" % (name, "compiles" if result["fullgraph"] else
                                              result["fullgraph_error"]))
    return 0 if all(r["ok"] for r in result["backends"].values()) else 1


# ---------------------------------------------------------------------------------------------
# The driver: every case in a child process.

def run_case_in_child(python, module_dir, name, timeout):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([module_dir, PY_TESTS, HERE, env.get("PYTHONPATH", "")])
    env.pop("DYNTRACE_STRESS", None)
    env.pop("DYNTRACE_LOGS", None)
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = [python, os.path.abspath(__file__), "--case", name, "--result-file", out,
               "--module-dir", module_dir]
        try:
            proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True,
                                  timeout=timeout, errors="replace")
        except subprocess.TimeoutExpired:
            return {"name": name, "crash": "timed out after %ds" % timeout, "seconds": timeout}
        seconds = time.monotonic() - start
        if not os.path.exists(out):
            how = ("killed by %s" % signal.Signals(-proc.returncode).name if proc.returncode < 0
                   else "exit status %d" % proc.returncode)
            return {"name": name, "seconds": seconds, "crash": "%s; output ends:\n%s" % (
                how, (proc.stdout + proc.stderr)[-2000:])}
        with open(out) as f:
            result = json.load(f)
    result["seconds"] = seconds
    return result


def outcome(result):
    """pass | mismatch | crash | known failure | unexpected pass | unexpected whole."""
    if "crash" in result:
        status = "crash"
    elif all(r["ok"] for r in result["backends"].values()):
        status = "pass"
    else:
        status = "mismatch"
    if result["name"] in CASE_XFAIL:
        return "unexpected pass" if status == "pass" else "known failure"
    if status == "pass" and result["name"] in CASE_MUST_BREAK and result.get("fullgraph"):
        return "unexpected whole"
    return status


# Filled by the driver (a crashed child reports nothing): name -> reason.
CASE_XFAIL = {}
CASE_MUST_BREAK = {}


def describe(result, status):
    lines = []
    if "crash" in result:
        lines.append(result["crash"])
    for backend, r in result.get("backends", {}).items():
        if r["error"]:
            lines.append("[%s] %s" % (backend, r["error"].strip()))
    if status in ("known failure", "unexpected pass"):
        lines.insert(0, "known failure: " + CASE_XFAIL[result["name"]])
    if status == "unexpected whole":
        lines.insert(0, "marked must_break (%s) but compiles with fullgraph=True: remove the mark"
                     % CASE_MUST_BREAK[result["name"]])
    return ["      " + line for text in lines for line in text.splitlines()][:40]


def whole_mark(result):
    marks = []
    for backend in BACKENDS:
        r = result.get("backends", {}).get(backend)
        marks.append("-" if r is None else "whole" if r["whole"] else
                     "b%d/f%d" % (r["graph_breaks"], r["fallbacks"]))
    return " ".join("%s=%s" % (b, m) for b, m in zip(BACKENDS, marks))


def run_all(args):
    from corpus import load_all
    cases = load_all()
    names = [n for n in cases if not args.k or any(k in n for k in args.k)]
    CASE_XFAIL.update({n: c.xfail for n, c in cases.items() if c.xfail})
    CASE_MUST_BREAK.update({n: c.must_break for n, c in cases.items() if c.must_break})
    version = sys.version.split()[0]
    print("CPython %s: %d corpus cases, plain vs dt.jit on %s, %d workers" % (
        version, len(names), "/".join(BACKENDS), args.jobs), flush=True)
    start = time.monotonic()
    counts, whole, bad = {}, {b: 0 for b in BACKENDS}, []
    fullgraph = {"all": 0, "unmarked": 0}
    not_whole = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        jobs = [pool.submit(run_case_in_child, args.python, args.module_dir, n, args.timeout)
                for n in names]
        for job in concurrent.futures.as_completed(jobs):
            result = job.result()
            status = outcome(result)
            counts[status] = counts.get(status, 0) + 1
            for backend in BACKENDS:
                whole[backend] += result.get("backends", {}).get(backend, {}).get("whole", False)
            fullgraph["all"] += bool(result.get("fullgraph", False))
            if result["name"] not in CASE_MUST_BREAK:
                fullgraph["unmarked"] += bool(result.get("fullgraph", False))
            if not result.get("fullgraph", False):
                not_whole.append((result["name"], result.get("fullgraph_error") or "no result"))
            print("%-16s %-34s %-26s %5.1fs" % (status.upper() if status != "pass" else "pass",
                                                result["name"], whole_mark(result),
                                                result["seconds"]), flush=True)
            if status != "pass":
                bad.append((status, result["name"]))
                for line in describe(result, status):
                    print(line, flush=True)
    print_summary(names, counts, whole, fullgraph, bad, time.monotonic() - start)
    if args.why_not_whole:
        for title, marked in (("not marked must_break", False), ("marked must_break", True)):
            print("Why each case %s does not compile with fullgraph=True:" % title)
            for name, why in sorted(not_whole):
                if (name in CASE_MUST_BREAK) == marked:
                    print("  %-34s %s%s" % (name, "[%s] " % CASE_MUST_BREAK[name] if marked
                                           else "", why))
    return 1 if any(s != "known failure" for s, _ in bad) else 0


def print_summary(names, counts, whole, fullgraph, bad, seconds):
    print("=" * 72)
    print("%d cases in %.0fs: %s" % (len(names), seconds, ", ".join(
        "%d %s" % (counts.get(k, 0), k) for k in ("pass", "mismatch", "crash", "known failure",
                                                    "unexpected pass", "unexpected whole"))))
    print("compiled whole (0 graph breaks, 0 fallbacks): %s" % ", ".join(
        "%s %d/%d" % (b, whole[b], len(names)) for b in BACKENDS))
    marked = sum(n in CASE_MUST_BREAK for n in names)
    print("compile with fullgraph=True (eager): %d/%d; over the %d cases not marked must_break: "
          "%d/%d (%.1f%%)" % (fullgraph["all"], len(names), len(names) - marked,
                              fullgraph["unmarked"], len(names) - marked,
                              100.0 * fullgraph["unmarked"] / max(1, len(names) - marked)))
    for status in ("mismatch", "crash", "unexpected pass", "unexpected whole", "known failure"):
        failed = sorted(n for s, n in bad if s == status)
        if failed:
            print("%s: %s" % (status.upper(), " ".join(failed)))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--module-dir", default=os.path.join(HERE, "..", "..", "bazel-bin"),
                        help="where dyntrace.so is, or its path (default: this checkout's bazel-bin)")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=180, help="seconds per case")
    parser.add_argument("-k", action="append", help="only cases whose name contains this")
    parser.add_argument("--case", help="run this one case in this process and print details")
    parser.add_argument("--why-not-whole", action="store_true",
                        help="after the summary, list each case that does not compile with "
                             "fullgraph=True and the reason")
    parser.add_argument("--result-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.module_dir = os.path.abspath(args.module_dir)
    if os.path.isfile(args.module_dir):
        args.module_dir = os.path.dirname(args.module_dir)
    setup_path(args.module_dir)
    if args.case:
        return run_case_here(args.case, args.result_file)
    return run_all(args)


if __name__ == "__main__":
    sys.exit(main())

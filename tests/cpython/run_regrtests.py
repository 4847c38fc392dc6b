#!/usr/bin/env python3
"""CPython's own regression tests under dyntrace's stress mode, compared with a plain run.

Each module of CPython's `test` package runs twice in fresh subprocesses of the same
interpreter: once plain (dyntrace imported, hook off) and once in stress mode (every frame of
every module traced, the standard library included). Every test's outcome (pass, fail, error,
skip, expected failure, unexpected success) must be the same in both runs; a crash, a hang or a
different outcome is a mismatch and makes the script exit with status 1. Each module's line is
followed by its coverage in stress mode (frames run by dyntrace over the frames it could run, skips
by reason, generator and coroutine frames apart), and the run ends with the total.

    python3 tests/cpython/run_regrtests.py                 # the full list (MODULES)
    python3 tests/cpython/run_regrtests.py --quick         # the subset CI runs (QUICK)
    python3 tests/cpython/run_regrtests.py test_grammar test_with   # chosen modules
    --module-dir DIR   where dyntrace.so is (default: bazel-bin next to this checkout)
    --command [PATH]   run the stressed side as `PATH --stress` (the dyntrace command; default
                       DIR/dyntrace, as in dist/pythonX.Y) rather than enable(stress=True)
                       in-process
    --jobs N           modules run side by side (default 1)
    --min-coverage F   fail when the total stress coverage is below F (default 0.8)

On Debian, CPython 3.11's test package is the `libpython3.11-testsuite` package.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

# The language core: grammar, scopes and closures, generators and coroutines, exceptions, classes
# and descriptors, comprehensions, unpacking, with/contextlib, functools/itertools, the builtin
# containers, string formatting, pattern matching, numbers and operators.
MODULES = [
    "test_grammar", "test_scope", "test_funcattrs", "test_keywordonlyarg",
    "test_positional_only_arg", "test_extcall", "test_decorators", "test_global",
    "test_named_expressions", "test_opcodes", "test_generators", "test_genexps",
    "test_generator_stop", "test_yield_from", "test_coroutines", "test_exceptions",
    "test_raise", "test_baseexception", "test_exception_variations", "test_exception_group",
    "test_except_star", "test_class", "test_descr", "test_descrtut", "test_property",
    "test_super", "test_abc", "test_isinstance", "test_listcomps", "test_setcomps",
    "test_dictcomps", "test_unpack", "test_unpack_ex", "test_with", "test_contextlib",
    "test_functools", "test_itertools", "test_dict", "test_dictviews", "test_list",
    "test_tuple", "test_set", "test_userdict", "test_userlist", "test_collections",
    "test_deque", "test_defaultdict", "test_ordered_dict", "test_string", "test_fstring",
    "test_format", "test_string_literals", "test_patma", "test_bool", "test_int",
    "test_float", "test_augassign", "test_binop", "test_compare", "test_richcmp",
    "test_contains", "test_iter", "test_enumerate", "test_range", "test_slice", "test_sort",
    "test_operator", "test_pow", "test_unary", "test_types", "test_enum", "test_dataclasses",
    "test_copy", "test_heapq", "test_bisect", "test_textwrap", "test_print",
]

# What CI runs: small modules that still cover scopes, generators, exceptions, classes,
# comprehensions, unpacking, with, pattern matching and formatting.
QUICK = [
    "test_scope", "test_generators", "test_raise", "test_class", "test_with", "test_unpack_ex",
    "test_patma", "test_format", "test_bisect", "test_augassign",
]

# Tests that measure their own running time and skip themselves when it is too short. Stress mode
# may change the time (not the result): test_int's str-to-int test times int('8' * 133700), which
# the trace folds ahead of time because its argument is a constant, so it finds the conversion
# "too fast to measure" and skips. Its int-to-str twin skips under 1/64 s too, and on a loaded
# machine either run can land on either side. A pass/skip difference here is reported, not counted.
TIMING_DEPENDENT = {
    "test.test_int.IntSubclassStrDigitLimitsTests.test_denial_of_service_prevented_str_to_int",
    "test.test_int.IntStrDigitLimitsTests.test_denial_of_service_prevented_str_to_int",
    "test.test_int.IntSubclassStrDigitLimitsTests.test_denial_of_service_prevented_int_to_str",
    "test.test_int.IntStrDigitLimitsTests.test_denial_of_service_prevented_int_to_str",
}

# Runs inside each subprocess: loads test.<module>, runs it with a result object that records
# every test's outcome, and writes them as JSON to the file named by argv[2].
CHILD = r"""
import json, sys, unittest
module, out_path, how = sys.argv[1], sys.argv[2], sys.argv[3]
stress = how != "plain"
import dyntrace
if how == "stress":
    dyntrace.enable(stress=True)
elif how == "command" and not dyntrace._stress_mode():  # `dyntrace --stress` enabled it
    raise SystemExit("dyntrace --stress did not turn stress mode on")

class Recorder(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.outcomes = {}
    def _put(self, test, outcome):
        self.outcomes[test.id()] = outcome
    def addSuccess(self, test): self._put(test, "pass")
    def addFailure(self, test, err): self._put(test, "fail"); super().addFailure(test, err)
    def addError(self, test, err): self._put(test, "error"); super().addError(test, err)
    def addSkip(self, test, reason): self._put(test, "skip")
    def addExpectedFailure(self, test, err): self._put(test, "xfail")
    def addUnexpectedSuccess(self, test): self._put(test, "xpass")
    def addSubTest(self, test, subtest, err):
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._put(subtest, "fail" if failed else "error")
        super().addSubTest(test, subtest, err)

recorder = Recorder()
try:
    suite = unittest.defaultTestLoader.loadTestsFromName("test." + module)
    suite.run(recorder)
except BaseException as e:  # an error outside any test (import, module fixtures) is an outcome too
    recorder.outcomes["<module>"] = "error: " + type(e).__name__
if stress:
    dyntrace.disable()
details = [f"{t.id()}\n{text}" for t, text in recorder.failures + recorder.errors]
stats = dyntrace.stats()
frames = {k: stats[k] for k in ("frames_seen", "frames_whole_in_cpython", "frames_skipped",
                                 "frames_skipped_by", "frames_generator")}
with open(out_path, "w") as f:
    json.dump({"outcomes": recorder.outcomes, "details": details[:20], "frames": frames}, f)
"""


def run_module(python, module_dir, module, how, timeout, command=None):
    """Runs one module's tests in a subprocess; `how` is "plain", "stress" (enable(stress=True)
    in-process) or "command" (the program run by `command --stress`)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = module_dir + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("DYNTRACE_STRESS", None)
    env.pop("DYNTRACE_LOGS", None)
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "outcomes.json")
        if how == "command":
            child = os.path.join(tmp, "regrtest_child.py")
            with open(child, "w") as f:
                f.write(CHILD)
            argv = [command, "--stress", child]
        else:
            argv = [python, "-c", CHILD]
        start = time.monotonic()
        try:
            proc = subprocess.run(argv + [module, out_path, how],
                                  cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout,
                                  errors="replace")
        except subprocess.TimeoutExpired:
            return {"crash": f"timed out after {timeout}s", "seconds": timeout}
        seconds = time.monotonic() - start
        if not os.path.exists(out_path):
            return {"crash": f"exit status {proc.returncode}; stderr ends:\n{proc.stderr[-3000:]}",
                    "seconds": seconds}
        with open(out_path) as f:
            result = json.load(f)
        result["seconds"] = seconds
        return result


def add_frames(total, frames):
    """Adds one stressed run's frame counts to `total` (the same keys, reasons summed)."""
    for key, value in frames.items():
        if isinstance(value, dict):
            for reason, n in value.items():
                total.setdefault(key, {})[reason] = total.get(key, {}).get(reason, 0) + n
        else:
            total[key] = total.get(key, 0) + value


def coverage_line(frames):
    """Coverage: frames run by dyntrace over the frames it could run; skips by reason, generator
    and coroutine frames apart (dyntrace does not run them)."""
    seen, skipped = frames.get("frames_seen", 0), frames.get("frames_skipped", 0)
    if seen + skipped == 0:
        return "coverage n/a (no frames)"
    reasons = ", ".join(f"{r} {n}" for r, n in frames.get("frames_skipped_by", {}).items() if n)
    whole = frames.get("frames_whole_in_cpython", 0)
    return (f"coverage {seen / (seen + skipped):.3f}: {seen} frames run ({whole} handed to CPython at "
            f"entry), {skipped} skipped"
            f"{f' ({reasons})' if reasons else ''}; {frames.get('frames_generator', 0)} generator/coroutine frames")


def compare(module, plain, stressed):
    """Lines describing every difference between the plain and the stressed run."""
    problems = []
    for run, name in ((plain, "plain"), (stressed, "stress")):
        if "crash" in run:
            problems.append(f"{module} ({name} run): {run['crash']}")
    if problems:
        return problems
    a, b = plain["outcomes"], stressed["outcomes"]
    if "<module>" in a or not a:
        # Not importable (Debian's 3.11 needs libpython3.11-testsuite) or empty: nothing compared.
        return [f"{module}: the plain run ran no tests ({a.get('<module>', 'empty')})"]
    for test in sorted(set(a) | set(b)):
        if test in TIMING_DEPENDENT and {a.get(test), b.get(test)} <= {"pass", "skip"}:
            if a.get(test) != b.get(test):
                print(f"    note: {test}: plain {a.get(test)}, stress {b.get(test)} (timing-dependent)")
            continue
        if a.get(test) != b.get(test):
            problems.append(f"{test}: plain {a.get(test, 'missing')}, stress {b.get(test, 'missing')}")
    if problems:
        problems.extend("  " + d.replace("\n", "\n  ") for d in stressed.get("details", [])[:3])
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*")
    parser.add_argument("--quick", action="store_true", help="the CI subset")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--module-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bazel-bin"))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--command", nargs="?", const="", default=None, metavar="PATH",
                        help="stressed runs go through `PATH --stress` (default: the dyntrace command in --module-dir)")
    parser.add_argument("--min-coverage", type=float, default=0.8,
                        help="fail when the stressed runs' total coverage is lower (default 0.8)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per module and run")
    args = parser.parse_args()
    modules = args.modules or (QUICK if args.quick else MODULES)
    module_dir = os.path.abspath(args.module_dir)
    command = None
    if args.command is not None:
        command = os.path.abspath(args.command or os.path.join(module_dir, "dyntrace"))
    version = subprocess.run([args.python, "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True).stdout.strip()
    stressed = "enable(stress=True)" if command is None else f"`{command} --stress`"
    print(f"CPython {version}: {len(modules)} test modules, plain vs {stressed}", flush=True)

    def both(module):
        return (run_module(args.python, module_dir, module, "plain", args.timeout),
                run_module(args.python, module_dir, module, "stress" if command is None else "command",
                           args.timeout, command))

    failed = []
    totals = {"tests": 0, "plain_s": 0.0, "stress_s": 0.0}
    frames = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for module, (plain, stressed) in zip(modules, pool.map(both, modules)):
            problems = compare(module, plain, stressed)
            counts = {}
            for outcome in plain.get("outcomes", {}).values():
                counts[outcome] = counts.get(outcome, 0) + 1
            summary = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
            totals["tests"] += len(plain.get("outcomes", {}))
            totals["plain_s"] += plain["seconds"]
            totals["stress_s"] += stressed["seconds"]
            status = "MISMATCH" if problems else "same"
            print(f"{module:32} {status:8} {summary}  ({plain['seconds']:.1f}s plain, "
                  f"{stressed['seconds']:.1f}s stress)", flush=True)
            if "frames" in stressed:
                add_frames(frames, stressed["frames"])
                print("    " + coverage_line(stressed["frames"]), flush=True)
            for p in problems[:12]:
                print("    " + p, flush=True)
            if problems:
                failed.append(module)
    print(f"{len(modules) - len(failed)}/{len(modules)} modules identical, {totals['tests']} tests; "
          f"{totals['plain_s']:.0f}s plain, {totals['stress_s']:.0f}s stress")
    print("all modules: " + coverage_line(frames))
    seen, skipped = frames.get("frames_seen", 0), frames.get("frames_skipped", 0)
    low = seen + skipped > 0 and seen / (seen + skipped) < args.min_coverage
    if low:
        print(f"coverage below --min-coverage {args.min_coverage}")
    if failed:
        print("mismatches: " + " ".join(failed))
    return 1 if failed or low else 0


if __name__ == "__main__":
    sys.exit(main())

"""Runs dyntrace's Python end-to-end tests.

    python3 tests/python/runner.py tests/python/test_x.py ...

Imports each file, runs every module-level `test_*` function (no arguments) in definition
order, prints `PASS name` or `FAIL name` plus the traceback, and ends with `N passed, M failed`;
exits 1 if any failed. `collect(path)` is the entry point for other harnesses.
"""
import importlib.util
import os
import sys
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
import testlib  # noqa: E402 - found through the path set just above


def collect(path):
    """Imports the test file at `path` and returns [(name, fn)] for its test_* functions, in
    definition order (`name` is the function's name). Raises whatever the import raises."""
    path = os.path.abspath(path)
    directory = os.path.dirname(path)
    for d in (directory, _HERE):
        if d not in sys.path:
            sys.path.insert(0, d)
    module_name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    tests = []
    for name, fn in list(vars(module).items()):
        if name.startswith("test_") and callable(fn):
            tests.append((name, fn))
    return tests


def run(paths, out=sys.stdout):
    passed = failed = pending = 0
    for path in paths:
        try:
            tests = collect(path)
        except Exception:  # noqa: BLE001 - an import failure is a failed test
            failed += 1
            out.write("FAIL %s (import)\n%s\n" % (path, traceback.format_exc()))
            continue
        module_name = os.path.splitext(os.path.basename(path))[0]
        for name, fn in tests:
            name = "%s::%s" % (module_name, name)
            pending_reason = getattr(fn, "pending", None)
            try:
                fn()
            except testlib.SkipTest as e:
                pending += 1
                out.write("SKIP %s: %s\n" % (name, e))
            except Exception:  # noqa: BLE001
                if pending_reason:
                    pending += 1
                    out.write("PENDING %s: %s\n" % (name, pending_reason))
                else:
                    failed += 1
                    out.write("FAIL %s\n%s\n" % (name, traceback.format_exc()))
            else:
                if pending_reason:
                    failed += 1
                    out.write("FAIL %s: marked pending (%s) but passes; remove the mark\n"
                              % (name, pending_reason))
                else:
                    passed += 1
                    out.write("PASS %s\n" % name)
            out.flush()
    out.write("%d passed, %d failed, %d skipped\n" % (passed, failed, pending))
    return passed, failed


def main(argv):
    if not argv:
        sys.stderr.write("usage: runner.py tests/python/test_*.py ...\n")
        return 2
    _, failed = run(argv)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

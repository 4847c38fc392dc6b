"""Per-call overhead of the frame evaluator, measured side by side in one run.

1. One call of a jit'd function on one-element tensors (guard check + dispatch + graph run),
   against the same function run eagerly and against a plain Python function that does nothing.
2. The hook's cost on code without tensor work: recursive fib inside dyntrace.tracing() against
   the same without the hook (goal: under 10% once the code has been seen and skipped).

Run: PYTHONPATH=dist/python3.11 python3 bench/jit_overhead.py   (or bazel-bin after a build)
"""
import time

import dyntrace as dt


def best_per_call(fn, args, calls=20000, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def body(x, y):
    return (x * y + 1.0).relu()


def nothing(x, y):
    return None


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def timed(fn):
    best = float("inf")
    for _ in range(25):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    # Measured first, before anything installs the eval-frame hook.
    n = 22
    plain = timed(lambda: fib(n))

    x, y = dt.randn(1), dt.randn(1)
    compiled = dt.jit(lambda x, y: (x * y + 1.0).relu())
    compiled(x, y)  # trace once
    t_jit = best_per_call(compiled, (x, y))
    t_eager = best_per_call(body, (x, y))
    t_nothing = best_per_call(nothing, (x, y))
    print("per-call time on one-element tensors (3 ops)")
    print(f"  jit'd function      {t_jit * 1e6:8.2f} us")
    print(f"  eager (no hook)     {t_eager * 1e6:8.2f} us   jit/eager = {t_jit / t_eager:.2f}x")
    print(f"  empty Python call   {t_nothing * 1e6:8.2f} us   jit/empty = {t_jit / t_nothing:.2f}x")

    with dt.tracing():
        fib(5)  # first sighting: traced once, found to have no tensor work, skipped from now on
        hooked = timed(lambda: fib(n))
    print(f"fib({n}) before any hook  {plain * 1e3:8.2f} ms")
    print(f"fib({n}) inside tracing() {hooked * 1e3:8.2f} ms   overhead = {(hooked / plain - 1) * 100:+.1f}%")
    print("  (most of it is CPython's: with any PEP 523 hook installed it stops inlining Python-to-"
          "Python calls; dyntrace removes its hook when no tracing()/enable()/jit needs it)")
    print("stats:", {k: v for k, v in dt.stats().items() if not k.endswith("reasons")})


if __name__ == "__main__":
    main()

"""Per-call overhead of the frame evaluator, measured side by side in one run.

1. One call of a compiled function on one-element tensors (guard check + dispatch + graph run),
   against the same function run eagerly and against a plain Python function that does nothing.
2. The hook's cost on call-heavy code without tensor work (recursive fib), measured round-robin:
   - plain, while a compiled function exists but is not running: the hook is not installed, so
     this must be within noise (2%) of the same code with no compiled function alive;
   - inside tracing(): against a hook that only calls CPython's evaluator (the floor any PEP 523
     hook pays, since CPython stops inlining Python-to-Python calls while one is installed);
     goal: within 10% of that floor.

Run: PYTHONPATH=dist/python3.11 python3 bench/jit_overhead.py   (or bazel-bin after a build)
"""
import gc
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


def timed(fn, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def hook_rows(n=22, rounds=6):
    """Best times of fib(n) per setting, the settings taking turns so load hits them alike."""
    compiled = None

    def no_compiled():
        nonlocal compiled
        compiled = None
        gc.collect()
        return timed(lambda: fib(n))

    def compiled_idle():
        nonlocal compiled
        compiled = dt.jit(lambda x: x + 1)
        compiled(dt.ones(1))
        assert not dt._hook_installed()
        return timed(lambda: fib(n))

    def null_hook():
        dt._null_hook(True)
        try:
            return timed(lambda: fib(n))
        finally:
            dt._null_hook(False)

    def tracing():
        with dt.tracing():
            return timed(lambda: fib(n))

    settings = {"no compiled function": no_compiled, "compiled function idle": compiled_idle,
                "null hook": null_hook, "inside tracing()": tracing}
    with dt.tracing():
        fib(5)  # first sighting: traced once, found to have no tensor work, skipped from now on
    best = {name: float("inf") for name in settings}
    for _ in range(rounds):
        for name, run in settings.items():
            best[name] = min(best[name], run())
    return best


def scaled_rows(x, n):
    return x.reshape(n, -1) * 2.0 + n


def rows(x):
    return scaled_rows(x, x.shape[0])


def main():
    x, y = dt.randn(1), dt.randn(1)
    t_eager = best_per_call(body, (x, y))
    t_nothing = best_per_call(nothing, (x, y))
    print("per-call time on one-element tensors (3 ops)")
    for backend in ("cpu", "eager"):
        compiled = dt.jit(lambda x, y: (x * y + 1.0).relu(), backend=backend)
        compiled(x, y)  # trace once
        t_jit = best_per_call(compiled, (x, y))
        print(f"  compiled ({backend:5s})    {t_jit * 1e6:8.2f} us   compiled/eager = {t_jit / t_eager:.2f}x")
    print(f"  eager (no hook)     {t_eager * 1e6:8.2f} us")
    print(f"  empty Python call   {t_nothing * 1e6:8.2f} us   compiled (eager)/empty = {t_jit / t_nothing:.2f}x")
    rows_x = dt.randn(8, 3)
    static, dynamic = dt.jit(rows, dynamic=False), dt.jit(rows, dynamic=True)
    static(rows_x), dynamic(rows_x)
    t_static, t_dynamic = best_per_call(static, (rows_x,)), best_per_call(dynamic, (rows_x,))
    print("a size read by Python, cpu backend (reshape by it, add it)")
    print(f"  static size         {t_static * 1e6:8.2f} us")
    print(f"  dynamic size        {t_dynamic * 1e6:8.2f} us   dynamic/static = {t_dynamic / t_static:.2f}x"
          "   (goal within 10%)")
    del compiled

    n = 22
    best = hook_rows(n)
    base, idle = best["no compiled function"], best["compiled function idle"]
    floor, traced = best["null hook"], best["inside tracing()"]
    print(f"fib({n}), best of round-robin runs")
    print(f"  no compiled function       {base * 1e3:8.2f} ms")
    print(f"  compiled function idle     {idle * 1e3:8.2f} ms   vs none: {(idle / base - 1) * 100:+.1f}%  (goal within 2%)")
    print(f"  null hook (CPython's only) {floor * 1e3:8.2f} ms   vs none: {(floor / base - 1) * 100:+.1f}%  (CPython's cost)")
    print(f"  inside tracing()           {traced * 1e3:8.2f} ms   vs null hook: {(traced / floor - 1) * 100:+.1f}%  (goal within 10%)")
    print("stats:", {k: v for k, v in dt.stats().items() if not k.endswith("reasons") and not k.endswith("counts")})


if __name__ == "__main__":
    main()

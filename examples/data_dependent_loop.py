"""A data-dependent loop: power iteration that stops when the estimate has converged.

Whether the loop goes on depends on tensor values (`if change < tol`), which no graph can know in
advance. dyntrace compiles the loop body into segments around that branch, evaluates the
condition on the real value, and keeps running compiled code on either side; the graph breaks it
makes are listed by `--log breaks` and `--stats`. The dominant eigenvalue is checked against the
same iteration in plain Python.

    dyntrace --log breaks --stats examples/data_dependent_loop.py
"""
import math

import dyntrace as dt


@dt.jit
def dominant_eigenvalue(a, v, tol, max_steps):
    for step in range(max_steps):
        w = a @ v
        w = w / (w * w).sum().sqrt()
        change = (w - v).abs().amax()
        v = w
        if change < tol:  # a branch on a tensor's value
            break
    return (v * (a @ v)).sum(), step + 1


def reference(a, v, tol, max_steps):
    for step in range(max_steps):
        w = [sum(a[i][k] * v[k] for k in range(len(v))) for i in range(len(v))]
        norm = math.sqrt(sum(x * x for x in w))
        w = [x / norm for x in w]
        change = max(abs(x - y) for x, y in zip(w, v))
        v = w
        if change < tol:
            break
    av = [sum(a[i][k] * v[k] for k in range(len(v))) for i in range(len(v))]
    return sum(x * y for x, y in zip(v, av)), step + 1


def main():
    dt.manual_seed(4)
    n = 12
    results = []
    for trial in range(3):
        m = dt.randn(n, n, dtype=dt.float64)
        a = m @ m.T + 0.5 * trial  # symmetric: a real dominant eigenvalue
        v = dt.ones(n, dtype=dt.float64) / math.sqrt(n)
        value, steps = dominant_eigenvalue(a, v, 1e-9, 500)
        want_value, want_steps = reference(a.tolist(), v.tolist(), 1e-9, 500)
        results.append((value.item(), steps, want_value, want_steps))

    worst = max(abs(got - want) / abs(want) for got, _, want, _ in results)
    for got, steps, want, want_steps in results:
        print(f"data_dependent_loop: eigenvalue {got:.6f} after {steps} steps "
              f"(plain Python: {want:.6f} after {want_steps})")
    stats = dt.stats()
    print(f"  largest relative difference: {worst:.2e}; graph breaks: {stats['graph_breaks']}, "
          f"graphs captured: {stats['graphs']}")
    assert all(steps == want_steps for _, steps, _, want_steps in results), results
    assert worst < 1e-9, worst
    print("data_dependent_loop OK")


if __name__ == "__main__":
    main()

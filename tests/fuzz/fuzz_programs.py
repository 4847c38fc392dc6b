#!/usr/bin/env python3
"""Differential fuzzer: random tensor programs under plain CPython and dyntrace's backends.

Each program is a Python function generated from a seed: straight-line tensor arithmetic,
pointwise ops, reductions, softmax, matmul, views and indexing, branches on constants and on
tensor values (`if x.sum() > 0`), for and while loops, calls of helper functions, print() and
.item() graph breaks, and operations that raise. It is run on the same inputs by plain CPython
(the reference: an unmarked function, no hook) and by `dt.jit(fn, backend=B)` for each backend,
twice per backend (a trace, then a cached run on fresh inputs of another size). Results must
agree within a tolerance, exceptions by type, printed text exactly; any other difference, or a
crash of the process, is a mismatch.

    python3 tests/fuzz/fuzz_programs.py --count 10000                 # the full run
    python3 tests/fuzz/fuzz_programs.py --count 300 --seed 1          # the CI sample
    python3 tests/fuzz/fuzz_programs.py --backends eager,cpu --count 10000
    python3 tests/fuzz/fuzz_programs.py --show 1234                   # print program 1234

A failing program is printed with its seed, so `--show SEED` reproduces it.
"""
import argparse
import contextlib
import io
import math
import random
import sys
import textwrap
import traceback

import dyntrace as dt

UNARY = ["dt.exp({})", "dt.tanh({})", "dt.relu({})", "dt.sigmoid({})", "({}).abs()", "-({})",
         "dt.sin({})", "({}) * 0.5", "dt.clamp({}, -2.0, 2.0)", "dt.sqrt(dt.abs({}) + 1.0)"]
BINARY = ["({a}) + ({b})", "({a}) - ({b})", "({a}) * ({b})", "({a}) / (dt.abs({b}) + 1.0)",
          "dt.maximum({a}, {b})", "dt.minimum({a}, {b})", "dt.where(({a}) > ({b}), {a}, {b})"]
# Reductions keep the [R, C] shape class the program works in (keepdim, or broadcast back).
REDUCE = ["({}).sum(dim=1, keepdim=True)", "({}).mean(dim=0, keepdim=True)",
          "({}).amax(dim=1, keepdim=True)", "dt.softmax({}, dim=-1)", "dt.softmax({}, dim=0)",
          "({}).sum() * 0.1 + ({}) * 0"]
VIEWS = ["({}).T.T", "({}).contiguous()", "({}).reshape({R}, {C})", "({})[:, :]",
         "dt.cat([({})[:1], ({})[1:]], dim=0)"]
SCALARS = ["0.5", "2.0", "-1.5", "3", "k"]

HELPERS = '''
def helper_scale(t, s):
    return t * s + 1.0

def helper_branchy(t):
    if t.mean() > 0:
        return t - 1.0
    return t + 1.0

def helper_prints(t):
    print("helper", t.shape)
    return t * 2.0
'''


class Generator:
    """Builds one program's source from a seeded random.Random."""

    def __init__(self, rng):
        self.rng = rng
        self.names = ["x", "y"]
        self.lines = []
        self.fresh = 0

    def var(self):
        return self.rng.choice(self.names)

    def expr(self, depth=0):
        r = self.rng.random()
        if depth >= 2 or r < 0.25:
            v = self.var()
            return v if self.rng.random() < 0.7 else f"({v} * {self.rng.choice(SCALARS)})"
        if r < 0.45:
            return self.rng.choice(UNARY).format(self.expr(depth + 1))
        if r < 0.7:
            return self.rng.choice(BINARY).format(a=self.expr(depth + 1), b=self.expr(depth + 1))
        if r < 0.8:
            template = self.rng.choice(REDUCE)
            inner = self.expr(depth + 1)
            return template.format(inner, inner)
        if r < 0.9:
            template = self.rng.choice(VIEWS)
            inner = self.var()
            return template.format(inner, inner, R="R", C="C")
        # matmul keeps [R, C]: [R, C] @ [C, C]
        return f"(({self.expr(depth + 1)}) @ w)"

    def assign(self, indent):
        name = self.rng.choice(self.names + [f"t{self.fresh}"])
        if name not in self.names:
            self.fresh += 1
        line = f"{name} = {self.expr()}"
        self.names.append(name) if name not in self.names else None
        self.lines.append(indent + line)

    def statement(self, indent, depth):
        r = self.rng.random()
        if depth >= 2 or r < 0.45:
            self.assign(indent)
        elif r < 0.53:
            self.lines.append(indent + f"if {self.rng.choice(['k > 1', 'k == 0', 'True', 'R > 4'])}:")
            self.block(indent + "    ", depth + 1)
            self.lines.append(indent + "else:")
            self.block(indent + "    ", depth + 1)
        elif r < 0.63:
            cond = self.rng.choice([f"({self.var()}).sum() > 0", f"({self.var()}).mean() < 0.1",
                                    f"({self.var()}).amax() > 1.0"])
            self.lines.append(indent + f"if {cond}:")
            self.block(indent + "    ", depth + 1)
            if self.rng.random() < 0.6:
                self.lines.append(indent + "else:")
                self.block(indent + "    ", depth + 1)
        elif r < 0.7:
            self.lines.append(indent + f"for i in range({self.rng.randint(1, 3)}):")
            self.block(indent + "    ", depth + 1)
        elif r < 0.75:
            v = self.var()
            self.lines.append(indent + "n = 0")
            self.lines.append(indent + f"while ({v}).abs().amax() > 0.5 and n < 4:")
            self.lines.append(indent + f"    {v} = {v} * 0.5")
            self.lines.append(indent + "    n += 1")
        elif r < 0.82:
            helper = self.rng.choice(["helper_scale({v}, 0.5)", "helper_branchy({v})",
                                      "helper_prints({v})"])
            self.lines.append(indent + f"{self.var()} = " + helper.format(v=self.var()))
        elif r < 0.88:
            self.lines.append(indent + f"print('value', round(({self.var()}).sum().item(), 2) if False else ({self.var()}).shape)")
        elif r < 0.92:
            self.lines.append(indent + f"acc = acc + ({self.var()}).sum().item()")
        elif r < 0.96:
            self.lines.append(indent + f"{self.var()}[0] = {self.rng.choice(['0.0', '1.5'])}")
        else:
            # Things that raise: a shape mismatch, a bad dim, an out-of-range index.
            self.lines.append(indent + self.rng.choice([
                "if k == 3:\n" + indent + "    z = x @ x",
                "if k == 3:\n" + indent + "    z = x.sum(dim=5)",
                "if k == 3:\n" + indent + "    z = x[R + 10]",
            ]))

    def block(self, indent, depth):
        for _ in range(self.rng.randint(1, 3)):
            self.statement(indent, depth)

    def program(self):
        self.lines = ["def program(x, y, w, k, R, C):", "    acc = 0.0"]
        for _ in range(self.rng.randint(2, 7)):
            self.statement("    ", 0)
        ret = self.rng.choice(["x", "y", "x + y", self.var()])
        self.lines.append(f"    return {ret}, acc")
        return "\n".join(self.lines) + "\n"


def source_of(seed):
    return Generator(random.Random(seed)).program()


def make_function(source):
    namespace = {"dt": dt}
    exec(compile(HELPERS, "<fuzz helpers>", "exec"), namespace)
    exec(compile(source, "<fuzz program>", "exec"), namespace)
    return namespace["program"]


def inputs(seed, call):
    """Inputs for one call; every call of a program uses another row count."""
    rng = random.Random(seed * 7919 + call)
    R = rng.choice([3, 5, 6, 8])
    C = 4
    dt.manual_seed(seed * 31 + call)
    k = rng.choice([0, 1, 2, 3])
    return (dt.randn(R, C), dt.randn(R, C), dt.randn(C, C) * 0.5, k, R, C)


def run(fn, args):
    out = io.StringIO()
    result = error = None
    with contextlib.redirect_stdout(out):
        try:
            result = fn(*args)
        except Exception as e:  # noqa: BLE001 - the exception type is part of the outcome
            error = e
    return result, error, out.getvalue()


def flatten(value):
    if isinstance(value, tuple):
        return [v for item in value for v in flatten(item)]
    if dt.is_tensor(value):
        return [("tensor", tuple(value.shape), str(value.dtype), value.tolist())]
    return [value]


def close(a, b, tol):
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if math.isinf(a) or math.isinf(b):
            return a == b
        return abs(a - b) <= tol * (1.0 + abs(b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return close(float(a), float(b), tol)
    return a == b


def same_outcome(actual, expected, tol=1e-4):
    """None when the outcomes agree, else what differs."""
    (r1, e1, o1), (r2, e2, o2) = actual, expected
    if (e1 is None) != (e2 is None) or (e1 is not None and type(e1) is not type(e2)):
        return f"exception {type(e1).__name__ if e1 else None} vs {type(e2).__name__ if e2 else None}: {e1!r} / {e2!r}"
    if o1 != o2:
        return f"printed {o1!r} vs {o2!r}"
    if e1 is None:
        f1, f2 = flatten(r1), flatten(r2)
        if len(f1) != len(f2):
            return f"result arity {len(f1)} vs {len(f2)}"
        for a, b in zip(f1, f2):
            if isinstance(a, tuple) and isinstance(b, tuple):
                if a[:3] != b[:3]:
                    return f"tensor {a[:3]} vs {b[:3]}"
                if not close(a[3], b[3], tol):
                    return f"tensor values differ: {a[3]} vs {b[3]}"
            elif not close(a, b, tol):
                return f"value {a!r} vs {b!r}"
    return None


def check_program(seed, backends):
    """None, or a description of the first mismatch."""
    source = source_of(seed)
    plain = make_function(source)
    for backend in backends:
        compiled = dt.jit(make_function(source), backend=backend)
        for call in range(2):
            args = inputs(seed, call)
            clones = tuple(a.clone() if dt.is_tensor(a) else a for a in args)
            expected = run(plain, clones)
            actual = run(compiled, args)
            diff = same_outcome(actual, expected)
            if diff is None:
                # In-place writes to inputs must match too.
                for a, b in zip(args, clones):
                    if dt.is_tensor(a) and not close(a.tolist(), b.tolist(), 1e-4):
                        diff = "inputs after the call differ"
            if diff is not None:
                return f"backend {backend}, call {call}: {diff}"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1, help="first program's seed")
    parser.add_argument("--backends", default="eager", help="comma-separated dt.jit backends")
    parser.add_argument("--show", type=int, help="print the program of this seed and exit")
    parser.add_argument("--max-failures", type=int, default=10)
    args = parser.parse_args()
    if args.show is not None:
        print(source_of(args.show))
        return 0
    backends = [b for b in args.backends.split(",") if b]
    failures = 0
    for seed in range(args.seed, args.seed + args.count):
        try:
            diff = check_program(seed, backends)
        except Exception:  # noqa: BLE001 - the harness itself failing is a finding too
            diff = "harness error:\n" + traceback.format_exc()
        if diff is not None:
            failures += 1
            print(f"MISMATCH seed {seed}: {diff}\n{textwrap.indent(source_of(seed), '    ')}", flush=True)
            if failures >= args.max_failures:
                break
        dt.reset()
        if (seed - args.seed + 1) % 500 == 0:
            print(f"... {seed - args.seed + 1} programs, {failures} mismatches", flush=True)
    ran = seed - args.seed + 1
    print(f"{ran} programs on backends {','.join(backends)}: {failures} mismatches", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

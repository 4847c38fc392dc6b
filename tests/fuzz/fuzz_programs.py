#!/usr/bin/env python3
"""Differential fuzzer: random tensor programs under plain CPython and dyntrace's backends.

Each seed gives one program and the code that builds its inputs:

- tensors of every dtype (bool, int32, int64, float16, float32, float64) mixed under PyTorch's
  promotion rules, of rank 0 to 4, with size-1 and zero-size dims, built contiguous, transposed,
  permuted, step-sliced, offset or expanded (stride 0); inputs that alias (`f(x, x)`,
  `f(x, x[1:])`, `f(x, x[..., :1])`);
- pointwise ops, casts, reductions over one, several or all dims, softmax / norms, matmul, views
  that come back to the program's shape, cat/stack round trips; in-place ops (`+=`, `add_`,
  `mul_`, slice and index setitem) on inputs and through views;
- ordinary Python around them: branches on constants and on tensor values, for/while loops,
  closures (with nonlocal), lambdas, `*args`/`**kwargs`, list/dict/set comprehensions, dict,
  str and set work, try/except inside loops, generators and generator expressions, print(),
  `.item()`, and code that raises.

Each program runs on the same inputs (built afresh for every run, aliasing included) by plain
CPython (an unmarked function, no hook: the reference) and by `dt.jit(fn, backend=B)`, three
calls per backend: a trace, a call with other sizes and another `k`, then the first inputs again.
Compared, all exactly (tolerance 0, see EXACT below): the result (nested tuples/lists/dicts,
tensors by dtype, shape and every element: NaN equals NaN, -0.0 differs from 0.0), which
returned tensor is which input object, the inputs after the call (in-place writes), printed
text, and exceptions by type and message.

Programs run in worker processes; a worker that dies (a crash) or exceeds --timeout (a hang) is
reported with its seed and program and replaced, and the run goes on.

    python3 tests/fuzz/fuzz_programs.py --count 10000 --seed 1 --backends eager
    nice -n 10 python3 tests/fuzz/fuzz_programs.py --count 10000 --seed 1 --backends cpu
    python3 tests/fuzz/fuzz_programs.py --show 1234                   # print program 1234
    python3 tests/fuzz/fuzz_programs.py --seed 1234 --count 1 --jobs 0  # rerun it in-process

Progress lines give the next seed, so a run stopped early resumes with --seed.
"""
import argparse
import contextlib
import io
import json
import math
import os
import random
import select
import subprocess
import sys
import textwrap
import time
import traceback

import dyntrace as dt

# Results must be identical, element for element. The eager backend runs the very op
# implementations plain CPython runs. The cpu backend pastes the eager loops' scalar math into its
# kernels and rounds float16 after every op as eager does; float sums and products accumulate in
# float64 in both, so the 16-lane order of compiled reductions can differ from eager's by one
# float64 rounding per term (n * 2**-53 relative), which changes a float32/float16 result only
# when it lies within that distance of a rounding boundary: about n * 2**-29 of the time for
# float32, i.e. never in practice for the few-element rows generated here. float64 reductions
# and the ops built on them (mean, var, std, softmax, norms, logsumexp) are the exception: their
# order shows in the last bits, so the generator keeps float64 out of reductions whose row has
# 16 elements or more (sizes stay below 8, so only multi-dim reductions and matmul can reach
# 16) -- see FLOAT64_REDUCTION_CAP.
EXACT = 0.0
FLOAT64_REDUCTION_CAP = 15

DTYPES = ["bool", "int32", "int64", "float16", "float32", "float64"]
CATEGORY = {"bool": 0, "int32": 1, "int64": 1, "float16": 2, "float32": 2, "float64": 2}
WIDTH = {"bool": 1, "int32": 4, "int64": 8, "float16": 2, "float32": 4, "float64": 8}
MAX_SIZE = 7  # per dim; rows of a multi-dim reduction can reach 49 or more

HELPERS = '''
def helper_scale(t, s):
    return t * s + 1

def helper_branchy(t):
    if t.sum() > 0:
        return t - 1
    return t + 1

def helper_prints(t):
    print("helper", tuple(t.shape), t.dtype)
    return t * 2

def helper_mix(*ts, scale=1, **kw):
    out = ts[0]
    for t in ts[1:]:
        out = out + t
    return out * scale + kw.get("shift", 0)

def helper_gen(t, n):
    for i in range(n):
        yield t * (i + 1)

def helper_raises(t, k):
    if k == 2:
        raise KeyError(f"k={k}")
    return t
'''


# ---------------------------------------------------------------------------------------------
# Shapes and dtypes as the generator tracks them.
#
# A program has a rank R and dims named d0..d{R-1} (sizes drawn per call). A value's shape is a
# tuple of entries, right-aligned with the program's dims: a dim name, or None for a literal 1.
# Two shapes broadcast when every aligned pair is equal or holds a None, so values built from the
# lattice combine freely; x[1:] adds a dim of its own ("e0"), compatible only with itself.


def broadcast(a, b):
    """The broadcast shape, or None when the generator cannot prove they broadcast."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        p = a[-i] if i <= len(a) else None
        q = b[-i] if i <= len(b) else None
        if p is not None and q is not None and p != q:
            return None
        out.append(p if p is not None else q)
    return tuple(reversed(out))


def fits_into(src, dst):
    """Whether src broadcasts to exactly dst (an in-place write's rule)."""
    return len(src) <= len(dst) and broadcast(src, dst) == tuple(dst)


def promote(a, b):
    """PyTorch's result dtype of two tensors (a, b: (dtype, rank)); rank 0 has lower priority."""
    (da, ra), (db, rb) = a, b
    if (ra == 0) != (rb == 0):
        hi, lo = (da, db) if ra else (db, da)
        return lo if CATEGORY[lo] > CATEGORY[hi] else hi
    if CATEGORY[da] != CATEGORY[db]:
        return da if CATEGORY[da] > CATEGORY[db] else db
    return da if WIDTH[da] >= WIDTH[db] else db


def scalar_promote(d, scalar):
    """Result dtype of tensor dtype d with a Python scalar of type 'int' or 'float'."""
    if scalar == "float" and CATEGORY[d] < 2:
        return "float32"
    if scalar == "int" and d == "bool":
        return "int64"
    return d


def floating(d):
    return "float32" if CATEGORY[d] < 2 else d


class Value:
    """A named tensor of the generated program: its shape entries and dtype."""

    def __init__(self, name, shape, dtype):
        self.name, self.shape, self.dtype = name, tuple(shape), dtype

    @property
    def rank(self):
        return len(self.shape)


class Expr(Value):
    """A tensor expression's source, shape and dtype."""

    def __init__(self, code, shape, dtype):
        super().__init__(code, shape, dtype)
        self.code = code


UNARY_ANY = ["dt.exp({})", "dt.tanh({})", "dt.sigmoid({})", "dt.sin({})", "dt.sqrt(dt.abs({}) + 1)",
             "dt.log1p(dt.abs({}))", "dt.erf({})", "dt.gelu({})", "dt.silu({})", "dt.sign({})",
             "dt.logical_not({})", "dt.reciprocal({})"]
UNARY_NUMERIC = ["-({})", "({}).abs()", "dt.relu({})", "dt.floor({})", "dt.round({})", "dt.square({})",
                 "dt.clamp({}, -2, 2)", "dt.clamp({}, min=0.5)", "({}) ** 2"]
BINARY = ["({a}) + ({b})", "({a}) - ({b})", "({a}) * ({b})", "({a}) / ({b})", "dt.maximum({a}, {b})",
          "dt.minimum({a}, {b})", "dt.where(({a}) > ({b}), {a}, {b})", "dt.atan2({a}, {b})",
          "({a}) // ({b})", "({a}) % ({b})"]
COMPARE = ["({a}) > ({b})", "({a}) <= ({b})", "({a}) == ({b})", "({a}) != ({b})",
           "dt.logical_and({a}, {b})", "dt.logical_xor({a}, {b})"]
SCALARS = [("0.5", "float"), ("2", "int"), ("-1.5", "float"), ("3", "int"), ("k", "int"),
           ("True", "int"), ("1e-3", "float")]
SCALAR_CODES = {code for code, _ in SCALARS}
CAST_SPELLING = {"float16": "({}).half()", "float32": "({}).float()", "float64": "({}).double()",
                 "int32": "({}).int()", "int64": "({}).long()", "bool": "({}).bool()"}


class Generator:
    """Builds one program's source (and its inputs' source) from a seeded random.Random."""

    def __init__(self, rng):
        self.rng = rng
        self.lines = []
        self.fresh = 0
        self.rank = rng.choice([0, 1, 1, 2, 2, 2, 3, 3, 4])
        self.dims = tuple(f"d{i}" for i in range(self.rank))
        self.palette = self.choose_palette()
        self.scope = {}  # name -> Value, the names every path defines

    # -- inputs -----------------------------------------------------------------------------

    def choose_palette(self):
        r = self.rng.random()
        if r < 0.35:
            return ["float32"]
        if r < 0.55:
            return ["float32", self.rng.choice(["float16", "float64"])]
        if r < 0.75:
            return ["float32", self.rng.choice(["int32", "int64", "bool"])]
        return self.rng.sample(DTYPES, self.rng.randint(2, 4))

    def input_shape(self):
        rank = self.rank if self.rng.random() < 0.7 else self.rng.randint(0, self.rank)
        dims = self.dims[self.rank - rank:]
        return tuple(None if self.rng.random() < 0.15 else d for d in dims)

    def size_of(self, entry):
        return "1" if entry is None else f"S[{entry[1:]}]"

    def builder(self, shape, dtype):
        """Source building a tensor of this shape and dtype in some layout."""
        sizes = [self.size_of(e) for e in shape]
        n = len(sizes)
        layouts = ["contiguous"] * 3
        if n >= 2:
            layouts += ["transposed", "transposed"]
        if n >= 3:
            layouts.append("permuted")
        if n >= 1:
            layouts += ["step", "offset"]
        if any(e is not None for e in shape):
            layouts.append("expanded")
        layout = self.rng.choice(layouts)
        base, view = list(sizes), ""
        if layout == "transposed":
            a, b = sorted(self.rng.sample(range(n), 2))
            base[a], base[b] = base[b], base[a]
            view = f".transpose({a}, {b})"
        elif layout == "permuted":
            perm = list(range(n))
            while perm == sorted(perm):
                self.rng.shuffle(perm)
            inverse = [perm.index(i) for i in range(n)]
            base = [sizes[p] for p in perm]
            view = f".permute({', '.join(map(str, inverse))})"
        elif layout in ("step", "offset"):
            d = self.rng.randrange(n)
            base[d] = f"2 * {sizes[d]}" if layout == "step" else f"{sizes[d]} + 1"
            index = ", ".join([":"] * d + ["::2" if layout == "step" else "1:"])
            view = f"[{index}]"
        elif layout == "expanded":
            d = self.rng.choice([i for i, e in enumerate(shape) if e is not None])
            base[d] = "1"
            view = f".expand({', '.join(sizes)})"
        make = {"bool": "(dt.randn({}) > 0.3)", "int32": "(dt.randn({}) * 4).int()",
                "int64": "(dt.randn({}) * 4).long()", "float16": "dt.randn({}).half()",
                "float32": "dt.randn({})", "float64": "dt.randn({}, dtype=dt.float64)"}[dtype]
        return make.format(", ".join(base) if base else "()") + view, layout

    def make_inputs(self):
        """The parameters x, y, z (y or z may alias x), w (a [d_last, d_last] matrix) and k."""
        lines = ["def make_args(S, k):"]
        x = Value("x", self.input_shape(), self.rng.choice(self.palette))
        code, _ = self.builder(x.shape, x.dtype)
        lines.append(f"    x = {code}")
        params = [x]
        for name in ("y", "z"):
            r = self.rng.random()
            if r < 0.12:
                lines.append(f"    {name} = x")
                params.append(Value(name, x.shape, x.dtype))
            elif r < 0.22 and x.rank >= 1 and x.shape[0] is not None:
                lines.append(f"    {name} = x[1:]")
                params.append(Value(name, ("e0",) + x.shape[1:], x.dtype))
            elif r < 0.3 and x.rank >= 1 and x.shape[-1] is not None:
                lines.append(f"    {name} = x[..., :1]")
                params.append(Value(name, x.shape[:-1] + (None,), x.dtype))
            else:
                v = Value(name, self.input_shape(), self.rng.choice(self.palette))
                code, _ = self.builder(v.shape, v.dtype)
                lines.append(f"    {name} = {code}")
                params.append(v)
        last = self.size_of(self.dims[-1]) if self.rank else "2"
        wdtype = self.rng.choice([d for d in self.palette if CATEGORY[d] == 2] or ["float32"])
        w_make = "dt.randn({0}, {0}, dtype=dt.{1}) * 0.5".format(last, wdtype)
        lines.append(f"    w = {w_make}")
        lines.append("    return x, y, z, w, k")
        self.w = Value("w", (self.dims[-1], self.dims[-1]) if self.rank else (None, None), wdtype)
        for v in params:
            self.scope[v.name] = v
        return "\n".join(lines) + "\n"

    # -- tensor expressions -----------------------------------------------------------------

    def pick(self, pred=lambda v: True):
        choices = [v for v in self.scope.values() if pred(v)]
        return self.rng.choice(choices) if choices else None

    def leaf(self):
        v = self.pick()
        if self.rng.random() < 0.85:
            return Expr(v.name, v.shape, v.dtype)
        target = self.rng.choice(self.palette)
        return Expr(CAST_SPELLING[target].format(v.name), v.shape, target)

    def expr(self, depth=0):
        r = self.rng.random()
        if depth >= 2 or r < 0.22:
            return self.leaf()
        if r < 0.38:
            return self.unary(self.expr(depth + 1))
        if r < 0.58:
            return self.binary(depth)
        if r < 0.72:
            return self.reduction(self.expr(depth + 1))
        if r < 0.82:
            return self.view(self.expr(depth + 1))
        if r < 0.88:
            return self.composite(self.expr(depth + 1))
        if r < 0.94:
            return self.matmul(self.expr(depth + 1))
        return self.scalar_op(self.expr(depth + 1))

    def unary(self, e):
        if CATEGORY[e.dtype] == 0 or self.rng.random() < 0.5:
            template = self.rng.choice(UNARY_ANY)
            if "logical_not" in template:
                return Expr(template.format(e.code), e.shape, "bool")
            if "sign" in template:
                return Expr(template.format(e.code), e.shape, e.dtype)
            return Expr(template.format(e.code), e.shape, floating(e.dtype))
        template = self.rng.choice(UNARY_NUMERIC)
        dtype = e.dtype
        if "clamp" in template and "0.5" in template:
            dtype = scalar_promote(dtype, "float")
        return Expr(template.format(e.code), e.shape, dtype)

    def binary(self, depth):
        a = self.expr(depth + 1)
        b = self.expr(depth + 1)
        shape = broadcast(a.shape, b.shape)
        if shape is None and self.rng.random() < 0.9:
            b = self.reduction(b, full=True)  # a 0-d tensor broadcasts with anything
            shape = a.shape
        if shape is None:
            shape = a.shape  # a ShapeError at run time (or a broadcast the sizes allow)
        if self.rng.random() < 0.2:
            return Expr(self.rng.choice(COMPARE).format(a=a.code, b=b.code), shape, "bool")
        template = self.rng.choice(BINARY)
        dtype = promote((a.dtype, a.rank), (b.dtype, b.rank))
        if " / " in template or "atan2" in template:
            dtype = floating(dtype)
        if ("//" in template or "%" in template) and CATEGORY[dtype] < 2 and self.rng.random() < 0.8:
            b = Expr(f"(dt.abs({b.code}) + 1)", b.shape, b.dtype)  # mostly no division by zero
        if CATEGORY[dtype] == 0 and template.startswith("({a}) -"):
            template = "({a}) + ({b})"  # bool - bool is a TypeError every time
        return Expr(template.format(a=a.code, b=b.code), shape, dtype)

    def reduce_dims(self, e, full):
        if e.rank == 0 or full:
            return None
        count = self.rng.randint(1, e.rank)
        return sorted(self.rng.sample(range(e.rank), count))

    def reduction(self, e, full=False):
        """A reduction whose result stays on the lattice: keepdim, leading dims, or everything."""
        dims = self.reduce_dims(e, full or self.rng.random() < 0.2)
        ops = ["sum", "amax", "amin", "prod", "any", "all"]
        if CATEGORY[e.dtype] == 2:
            ops += ["mean", "mean", "var", "std", "logsumexp", "sum"]
        op = self.rng.choice(ops)
        if e.dtype == "float64" and self.reduced_elements(e, dims) > FLOAT64_REDUCTION_CAP:
            op = self.rng.choice(["amax", "amin", "any", "all"])
        if op in ("any", "all"):
            dtype = "bool"
        elif op in ("sum", "prod") and CATEGORY[e.dtype] < 2:
            dtype = "int64"
        else:
            dtype = e.dtype
        if dims is None:
            arg = "" if op != "logsumexp" else f"dim={list(range(e.rank))}"
            call = f"dt.logsumexp({e.code}, {arg})" if op == "logsumexp" else f"({e.code}).{op}()"
            return Expr(call, (), dtype)
        leading = dims == list(range(len(dims)))
        keepdim = not leading or self.rng.random() < 0.5
        spelled = dims[0] if len(dims) == 1 and self.rng.random() < 0.5 else tuple(
            d - e.rank if self.rng.random() < 0.3 else d for d in dims)
        if op == "logsumexp":
            call = f"dt.logsumexp({e.code}, dim={spelled!r}, keepdim={keepdim})"
        else:
            call = f"({e.code}).{op}(dim={spelled!r}, keepdim={keepdim})"
        shape = [None if i in dims else s for i, s in enumerate(e.shape)] if keepdim else e.shape[len(dims):]
        return Expr(call, shape, dtype)

    def reduced_elements(self, e, dims):
        """An upper bound on the elements of one reduced row."""
        dims = range(e.rank) if dims is None else dims
        return math.prod(MAX_SIZE if e.shape[d] is not None else 1 for d in dims)

    def view(self, e):
        """Views and copies that come back to e's shape, or land on the lattice."""
        options = ["({}).contiguous()", "({}).clone()", "({}).reshape(({}).shape)", "({})[...]",
                   "({}).unsqueeze(0).squeeze(0)", "({})[None][0]"]
        if e.rank >= 1:
            options += ["({}).flatten().reshape(({}).shape)", "dt.cat([({})[..., :1], ({})[..., 1:]], dim=-1)",
                        "dt.stack([({}), ({}) * 2], dim=0).amax(0)", "({})[..., ::2].sum()"]
        if e.rank >= 2:
            options += ["({}).transpose(0, -1).contiguous().transpose(0, -1)", "({}).mT.mT",
                        "({}).permute(*reversed(range(({}).ndim))).permute(*reversed(range(({}).ndim)))"]
        template = self.rng.choice(options)
        code = template.replace("{}", e.code)
        shape, dtype = e.shape, e.dtype
        if "::2].sum()" in template:
            shape = ()
            dtype = "int64" if CATEGORY[dtype] < 2 else dtype
            if e.dtype == "float64":  # a float64 sum of many elements: see EXACT
                code = f"({e.code})[..., ::2].amax()" if e.rank else code
                dtype = e.dtype
        if e.rank >= 1 and e.shape[0] is not None and self.rng.random() < 0.15:
            code, shape = f"({code})[:1]", (None,) + shape[1:]
        return Expr(code, shape, dtype)

    def composite(self, e):
        if CATEGORY[e.dtype] < 2 or e.rank == 0:
            return Expr(f"dt.where({e.code} > 0, 1.5, -0.5)", e.shape, "float32")
        dim = self.rng.randrange(-e.rank, e.rank)
        last = f"(({e.code}).shape[-1],)"
        template = self.rng.choice([f"dt.softmax({e.code}, dim={dim})", f"dt.log_softmax({e.code}, dim={dim})",
                                    f"dt.layer_norm({e.code}, {last})", f"dt.rms_norm({e.code}, {last})"])
        return Expr(template, e.shape, e.dtype)

    def matmul(self, e):
        """e @ w keeps e's shape when e's last dim is the program's last dim."""
        if e.rank == 0 or e.shape[-1] is None or self.rank == 0 or e.shape[-1] != self.dims[-1]:
            return e
        if self.rng.random() < 0.5:
            return Expr(f"(({e.code}) @ w.to(({e.code}).dtype))", e.shape, e.dtype)
        return Expr(f"dt.matmul({e.code}, w)", e.shape, promote((e.dtype, e.rank), (self.w.dtype, 2)))

    def scalar_op(self, e):
        value, kind = self.rng.choice(SCALARS)
        op = self.rng.choice(["+", "*", "-"])
        if CATEGORY[e.dtype] == 0 and op == "-":
            op = "+"
        return Expr(f"(({e.code}) {op} {value})", e.shape, scalar_promote(e.dtype, kind))

    # -- statements -------------------------------------------------------------------------

    def name(self):
        self.fresh += 1
        return f"t{self.fresh}"

    def label(self):
        self.fresh += 1
        return str(self.fresh)

    def emit(self, indent, text):
        self.lines.extend(indent + line for line in textwrap.dedent(text).strip("\n").split("\n"))

    def bind(self, indent, e, nested, fresh=False):
        """Assigns e to a name: in nested blocks only to names of the same type, or a new one."""
        same = [v.name for v in self.scope.values() if v.shape == e.shape and v.dtype == e.dtype]
        if nested:
            candidates = same
        else:
            candidates = list(self.scope)
        if fresh or not candidates or self.rng.random() < 0.4:
            target = self.name()
        else:
            target = self.rng.choice(candidates)
        self.emit(indent, f"{target} = {e.code}")
        self.scope[target] = Value(target, e.shape, e.dtype)
        return target

    def fitting_expr(self, shape):
        """An expression that broadcasts to exactly `shape` (for in-place writes)."""
        for _ in range(6):
            e = self.expr(1)
            if fits_into(e.shape, shape):
                return e
        value, kind = self.rng.choice(SCALARS)
        return Expr(value, (), {"int": "int64", "float": "float32"}[kind])

    def castable(self, e, dtype):
        """e as an in-place write into dtype: cast where the write would raise PyTorch's TypeError
        (float into integers, anything but bool into bool), except in a tenth of the writes."""
        needs_cast = CATEGORY[e.dtype] > CATEGORY[dtype] or (dtype == "bool" and e.dtype != "bool")
        if not needs_cast or self.rng.random() < 0.1:
            return e.code
        if e.code in SCALAR_CODES:
            return "True" if dtype == "bool" else "2"
        return CAST_SPELLING[dtype].format(e.code)

    def inplace(self, indent):
        v = self.pick()
        kinds = ["+=", "*=", "add_", "mul_", "setitem_all"]
        if v.dtype != "bool":
            kinds += ["-=", "sub_"]
        if v.rank >= 1:
            kinds += ["setitem_first", "setitem_head", "setitem_step", "view_step", "aug_slice", "select_"]
        if v.rank >= 2:
            kinds += ["view_mT"]
        kind = self.rng.choice(kinds)
        target = v.shape
        if kind in ("setitem_first", "select_"):
            target = v.shape[1:]
        elif kind == "setitem_head":
            target = (None,) + v.shape[1:]
        elif kind in ("setitem_step", "view_step"):
            target = v.shape[:-1] + ("half",)
        elif kind == "aug_slice":
            target = ("tail",) + v.shape[1:]
        elif kind == "view_mT":
            target = v.shape[:-2] + (v.shape[-1], v.shape[-2])
        e = self.fitting_expr(target)
        code = self.castable(e, v.dtype)
        text = {"+=": f"{v.name} += {code}", "-=": f"{v.name} -= {code}", "*=": f"{v.name} *= {code}",
                "add_": f"{v.name}.add_({code})", "mul_": f"{v.name}.mul_({code})",
                "sub_": f"{v.name}.sub_({code})", "setitem_all": f"{v.name}[...] = {code}",
                "setitem_first": f"{v.name}[0] = {code}", "setitem_head": f"{v.name}[:1] = {code}",
                "setitem_step": f"{v.name}[..., ::2] = {code}",
                "view_step": f"{v.name}[..., ::2].mul_({code})",
                "aug_slice": f"{v.name}[1:] += {code}", "select_": f"{v.name}[0].add_({code})",
                "view_mT": f"view = {v.name}.mT\nview.mul_({code})"}[kind]
        self.emit(indent, text)

    def condition(self):
        v = self.pick()
        conds = [f"({v.name}).sum() > 0", f"(({v.name}) > 0.5).any()", f"({v.name}).float().mean() < 0.1",
                 f"bool(({v.name}).double().abs().sum() > 2)"]
        if v.rank == 0:
            conds.append(f"{v.name}")
        return self.rng.choice(conds)

    def constant_condition(self):
        v = self.pick()
        conds = ["k > 1", "k == 0", "True", f"{v.name}.ndim == {v.rank}", f"{v.name}.dtype == dt.float32",
                 f"{v.name}.is_contiguous()", f"{v.name}.numel() > 4"]
        if v.rank >= 1:
            conds += [f"{v.name}.shape[0] > 3", f"len({v.name}) == 2"]
        return self.rng.choice(conds)

    def branch(self, indent, depth, tensor_condition):
        cond = self.condition() if tensor_condition else self.constant_condition()
        self.emit(indent, f"if {cond}:")
        self.block(indent + "    ", depth + 1)
        if self.rng.random() < 0.7:
            self.emit(indent, "else:")
            self.block(indent + "    ", depth + 1)

    def loop(self, indent, depth):
        r = self.rng.random()
        v = self.pick()
        if r < 0.5:
            self.emit(indent, f"for i in range({self.rng.randint(1, 3)}):")
            self.block(indent + "    ", depth + 1)
        elif r < 0.75:
            u = self.pick(lambda o: broadcast(o.shape, v.shape) is not None)
            t = self.name()
            self.emit(indent, f"for {t} in ({v.name}, {u.name}):")
            self.emit(indent + "    ", f"acc = acc + float(({t}).float().sum())")
        else:
            t = self.name()
            if v.rank == 0:
                v = self.pick(lambda o: o.rank >= 1) or v
            if v.rank == 0:
                return self.emit(indent, "acc = acc + 1")
            self.emit(indent, f"""
                for {t} in {v.name}:
                    acc = acc + ({t}).double().sum().item()
                    log.append(tuple({t}.shape))""")

    def while_loop(self, indent):
        v = self.pick()
        t, n = self.name(), self.name()
        self.emit(indent, f"""
            {t} = ({v.name}) * 1.0
            {n} = 0
            while ({t}).abs().sum() > 1 and {n} < 3:
                {t} = {t} * 0.5
                {n} += 1
            log.append({n})""")
        self.scope[t] = Value(t, v.shape, floating(v.dtype))

    def helper(self, indent, nested):
        v = self.pick()
        r = self.rng.random()
        if r < 0.3:
            self.bind(indent, Expr(f"helper_scale({v.name}, 0.5)", v.shape, scalar_promote(v.dtype, "float")), nested)
        elif r < 0.55:
            dtype = "int64" if v.dtype == "bool" else v.dtype
            self.bind(indent, Expr(f"helper_branchy({v.name})", v.shape, dtype), nested)
        elif r < 0.8:
            dtype = "int64" if v.dtype == "bool" else v.dtype
            self.bind(indent, Expr(f"helper_prints({v.name})", v.shape, dtype), nested)
        else:
            self.bind(indent, Expr(f"helper_raises({v.name}, k)", v.shape, v.dtype), nested)

    def closure(self, indent, nested):
        v = self.pick()
        n = self.label()
        if self.rng.random() < 0.5:
            saved = self.scope
            self.scope = dict(saved)
            self.scope["t"] = Value("t", v.shape, v.dtype)
            body = self.expr(1)
            self.scope = saved
            self.emit(indent, f"""
                scale{n} = 0.5 + k
                def inner{n}(t):
                    return ({body.code}) * scale{n}""")
            shape = broadcast(body.shape, v.shape) or body.shape
            self.bind(indent, Expr(f"inner{n}({v.name})", shape, scalar_promote(body.dtype, "float")), nested)
        else:
            self.emit(indent, f"""
                count{n} = 0
                def bump{n}(t):
                    nonlocal count{n}
                    count{n} += 1
                    return t + count{n}""")
            dtype = scalar_promote(v.dtype, "int")
            self.bind(indent, Expr(f"bump{n}(bump{n}({v.name}))", v.shape, dtype), nested)
            self.emit(indent, f"log.append(count{n})")

    def lambdas(self, indent, nested):
        v = self.pick()
        n = self.label()
        self.emit(indent, f"f{n} = lambda t, s=2: dt.relu(t * s) + s")
        dtype = "int64" if v.dtype == "bool" else v.dtype
        self.bind(indent, Expr(f"f{n}({v.name}, s=k) - f{n}({v.name})", v.shape, dtype), nested)
        self.emit(indent, f'log.append(sorted(["bb", "a", "ccc", str(k)], key=lambda q: (-len(q), q))[k % 3])')

    def args_kwargs(self, indent, nested):
        v = self.pick()
        u = self.pick(lambda o: broadcast(o.shape, v.shape) is not None)
        n = self.label()
        dtype = promote((v.dtype, v.rank), (u.dtype, u.rank))
        if self.rng.random() < 0.5:
            self.emit(indent, f'opts{n} = {{"scale": 0.5, "shift": k}}')
            call = f"helper_mix(*[{v.name}, {u.name}], **opts{n})"
            dtype = scalar_promote(dtype, "float")
        else:
            call = f"helper_mix({v.name}, {u.name}, scale=2, extra='unused')"
            dtype = scalar_promote(dtype, "int")
        self.bind(indent, Expr(call, broadcast(v.shape, u.shape), dtype), nested)

    def comprehension(self, indent, nested):
        v = self.pick()
        u = self.pick(lambda o: o.shape == v.shape and o.dtype == v.dtype)
        n = self.label()
        self.emit(indent, f"""
            parts{n} = [t * (i + 1) for i, t in enumerate(({v.name}, {u.name}))]
            table{n} = {{name: t.float().sum() for name, t in zip(("p", "q"), parts{n})}}
            log.append(sorted(table{n}))
            log.append({{len(s) for s in ("a", "bb", "cc", str(k))}})""")
        dtype = "int64" if v.dtype == "bool" else v.dtype
        self.bind(indent, Expr(f"parts{n}[0] + parts{n}[-1]", v.shape, dtype), nested)
        self.bind(indent, Expr(f'table{n}["q"] * 0.5', (), "float32"), nested)

    def strings(self, indent, nested):
        v = self.pick()
        n = self.label()
        mode = self.rng.choice(["add", "mul"])
        self.emit(indent, f"""
            cfg{n} = {{"mode": "{mode}", "k": k}}
            cfg{n}.update(extra=len(log))
            key{n} = f"{{cfg{n}['mode']}}-{{cfg{n}['k']}}-{{tuple({v.name}.shape)}}"
            tags{n} = {{"a", "b"}} | {{str(k)}}
            log.append(key{n}.upper())
            log.append(",".join(sorted(tags{n} - {{"b"}})))
            log.append(len(tags{n} & {{"a", "3"}}))""")
        e = Expr(f"({v.name} + 1) if key{n}.startswith('add') else ({v.name} * 2)", v.shape,
                 "int64" if v.dtype == "bool" else v.dtype)
        self.bind(indent, e, nested)

    def try_loop(self, indent):
        v = self.pick()
        t, i = self.name(), self.name()
        if self.rng.random() < 0.5:
            self.emit(indent, f"""
                {t} = ({v.name}) * 1.0
                for {i} in range(3):
                    try:
                        if {i} == k:
                            raise ValueError(f"step {{{i}}}")
                        {t} = {t} * 0.5 + {i}
                    except ValueError as e:
                        log.append(str(e))""")
            self.scope[t] = Value(t, v.shape, floating(v.dtype))
            return
        bad = self.rng.choice([f"({v.name}).sum(dim=7)", f"({v.name})[100]", f"helper_raises({v.name}, k)",
                               f"({v.name}).reshape(-1, 7, 13)", f"({v.name}) @ ({v.name})",
                               f"dt.cat([{v.name}, ({v.name})[None]])"])
        self.emit(indent, f"""
            for {i} in range(2):
                try:
                    {t} = {bad}
                    log.append(tuple({t}.shape))
                except (RuntimeError, IndexError, KeyError, ValueError, TypeError) as e:
                    log.append(f"{{type(e).__name__}}: {{e}}")""")

    def generators(self, indent, nested):
        v = self.pick()
        u = self.pick(lambda o: broadcast(o.shape, v.shape) is not None)
        dtype = "int64" if v.dtype == "bool" else v.dtype
        r = self.rng.random()
        if r < 0.4:
            self.bind(indent, Expr(f"sum(helper_gen({v.name}, 2), {v.name})", v.shape, dtype), nested)
        elif r < 0.7:
            s = "int64" if CATEGORY[v.dtype] < 2 and CATEGORY[u.dtype] < 2 else "float64"
            self.bind(indent, Expr(f"sum(t.double().sum() for t in ({v.name}, {u.name}))", (), s if s == "float64" else "float64"), nested)
        else:
            n = self.label()
            self.emit(indent, f"""
                def gen{n}():
                    yield {v.name}
                    yield {v.name} * 2
                items{n} = list(gen{n}())
                log.append(len(items{n}))""")
            self.bind(indent, Expr(f"items{n}[-1]", v.shape, dtype), nested)

    def prints(self, indent):
        v = self.pick()
        self.emit(indent, self.rng.choice([f'print("value", tuple({v.name}.shape), {v.name}.dtype)',
                                           f"print({v.name})", f'print(f"{{({v.name}).double().sum().item():.4f}}")']))

    def items(self, indent):
        v = self.pick()
        self.emit(indent, self.rng.choice([f"acc = acc + ({v.name}).double().sum().item()",
                                           f"acc = acc + int(({v.name}).long().sum())",
                                           f"acc = acc + float(({v.name}).float().amax())"]))

    def raising(self, indent):
        v = self.pick()
        bad = self.rng.choice([f"({v.name}).sum(dim=5)", f"({v.name})[100]", f"({v.name}) @ w @ w.mT[:1]",
                               f"({v.name}).reshape(3, -1, 11)", f"dt.softmax({v.name}.int(), dim=0)"])
        self.emit(indent, f"""
            if k == 3:
                bad = {bad}""")

    def statement(self, indent, depth):
        nested = depth > 0
        r = self.rng.random()
        if depth >= 2 or r < 0.28:
            return self.bind(indent, self.expr(), nested)
        # (upper bound of r, statement kind); a kind draws from the rng only once chosen.
        kinds = [
            (0.40, lambda: self.inplace(indent)),
            (0.45, lambda: self.branch(indent, depth, tensor_condition=False)),
            (0.52, lambda: self.branch(indent, depth, tensor_condition=True)),
            (0.57, lambda: self.loop(indent, depth)),
            (0.59, lambda: self.while_loop(indent)),
            (0.63, lambda: self.helper(indent, nested)),
            (0.67, lambda: self.closure(indent, nested)),
            (0.70, lambda: self.lambdas(indent, nested)),
            (0.73, lambda: self.args_kwargs(indent, nested)),
            (0.77, lambda: self.comprehension(indent, nested)),
            (0.80, lambda: self.strings(indent, nested)),
            (0.84, lambda: self.try_loop(indent)),
            (0.87, lambda: self.generators(indent, nested)),
            (0.90, lambda: self.prints(indent)),
            (0.94, lambda: self.items(indent)),
            (0.97 if nested else 2.0, lambda: self.raising(indent)),
        ]
        for bound, make in kinds:
            if r < bound:
                return make()
        names = ", ".join(sorted(self.scope))
        self.emit(indent, f"return ({names}), acc, log")

    def block(self, indent, depth):
        saved = dict(self.scope)
        for _ in range(self.rng.randint(1, 3)):
            self.statement(indent, depth)
        self.scope = saved  # names first bound inside the block are not defined on every path

    def program(self):
        inputs = self.make_inputs()
        self.lines = ["def program(x, y, z, w, k):", "    acc = 0.0", "    log = []"]
        for _ in range(self.rng.randint(2, 7)):
            self.statement("    ", 0)
        names = ", ".join(sorted(self.scope))
        self.lines.append(f"    return ({names}), acc, log")
        return inputs + "\n" + "\n".join(self.lines) + "\n"


def source_of(seed):
    return Generator(random.Random(seed)).program()


def make_functions(source):
    namespace = {"dt": dt}
    exec(compile(HELPERS, "<fuzz helpers>", "exec"), namespace)
    exec(compile(source, "<fuzz program>", "exec"), namespace)
    return namespace["make_args"], namespace["program"]


def call_inputs(seed, call):
    """The sizes and k of one call: call 1 draws other sizes and k, call 2 repeats call 0."""
    rng = random.Random(seed * 7919 + call % 2)
    sizes = [rng.choice([0, 1, 1, 2, 3, 4, 5, 6, 7]) if rng.random() < 0.25 else rng.randint(2, MAX_SIZE)
             for _ in range(4)]
    return sizes, rng.choice([0, 1, 2, 3])


def build_args(make_args, seed, call):
    sizes, k = call_inputs(seed, call)
    dt.manual_seed(seed * 31 + call % 2)
    return make_args(sizes, k)


# ---------------------------------------------------------------------------------------------
# Running and comparing one program.


def run(fn, args):
    out = io.StringIO()
    result = error = None
    with contextlib.redirect_stdout(out):
        try:
            result = fn(*args)
        except Exception as e:  # noqa: BLE001 - the exception is part of the outcome
            error = e
    return result, error, out.getvalue()


def flatten(value, args):
    """A comparable form: tensors as (which input object it is, dtype, shape, elements)."""
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, [flatten(v, args) for v in value])
    if isinstance(value, dict):
        return ("dict", [(k, flatten(v, args)) for k, v in value.items()])
    if isinstance(value, (set, frozenset)):
        return ("set", sorted(value, key=repr))
    if dt.is_tensor(value):
        same = [i for i, a in enumerate(args) if a is value]
        return ("tensor", same, str(value.dtype), tuple(value.shape), value.tolist())
    if isinstance(value, float):
        return ("float", value)
    return (type(value).__name__, value)


def identical(a, b):
    """Exact equality of flattened outcomes: NaN equals NaN, 0.0 and -0.0 differ."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def first_difference(a, b, path="result"):
    """Where two flattened outcomes first differ, for the report."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if not identical(x, y):
                return first_difference(x, y, f"{path}[{i}]")
    text_a, text_b = repr(a), repr(b)
    return f"{path}: {text_a[:400]} vs {text_b[:400]} (expected)"


def describe_error(e):
    return None if e is None else (type(e).__name__, str(e))


def compare(actual, expected, args_actual, args_expected):
    """None when two runs agree, else what differs."""
    (r1, e1, o1), (r2, e2, o2) = actual, expected
    if describe_error(e1) != describe_error(e2):
        return f"exception {describe_error(e1)} vs {describe_error(e2)} (expected)"
    if o1 != o2:
        return f"printed {o1!r} vs {o2!r} (expected)"
    f1, f2 = flatten(r1, args_actual), flatten(r2, args_expected)
    if not identical(f1, f2):
        return first_difference(f1, f2)
    i1, i2 = flatten(args_actual, ()), flatten(args_expected, ())
    if not identical(i1, i2):
        return "inputs after the call: " + first_difference(i1, i2, "args")
    return None


def check_program(seed, backends):
    """None, or a description of the first mismatch."""
    source = source_of(seed)
    make_args, plain = make_functions(source)
    for backend in backends:
        _, fn = make_functions(source)
        compiled = dt.jit(fn, backend=backend)
        for call in range(3):
            args_expected = build_args(make_args, seed, call)
            expected = run(plain, args_expected)
            args_actual = build_args(make_args, seed, call)
            actual = run(compiled, args_actual)
            diff = compare(actual, expected, args_actual, args_expected)
            if diff is not None:
                return f"backend {backend}, call {call}: {diff}"
    return None


def check_seed(seed, backends):
    try:
        return check_program(seed, backends)
    except Exception:  # noqa: BLE001 - the harness itself failing is a finding too
        return "harness error:\n" + traceback.format_exc()
    finally:
        dt.reset()


# ---------------------------------------------------------------------------------------------
# Worker processes: a program that crashes or hangs its process is reported, not fatal.


def worker_main(backends):
    """Reads seeds from stdin, answers one JSON line per seed on the original stdout."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever else writes to fd 1 (a C-level print) goes to stderr
    sys.stdout = sys.__stdout__ = os.fdopen(1, "w")
    for line in sys.stdin:
        seed = int(line)
        diff = check_seed(seed, backends)
        answers.write(json.dumps({"seed": seed, "diff": diff}) + "\n")
        answers.flush()
    return 0


class Worker:
    def __init__(self, args):
        env = dict(os.environ)
        if args.module_dir:
            env["PYTHONPATH"] = os.path.abspath(args.module_dir) + os.pathsep + env.get("PYTHONPATH", "")
        self.stderr_path = f"/tmp/fuzz_worker_{os.getpid()}_{id(self)}.err"
        self.stderr = open(self.stderr_path, "w+")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", "--backends", args.backends],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env, text=True)
        self.seed = None
        self.started = None

    def send(self, seed):
        self.seed, self.started = seed, time.monotonic()
        self.proc.stdin.write(f"{seed}\n")
        self.proc.stdin.flush()

    def stderr_tail(self):
        self.stderr.flush()
        with open(self.stderr_path) as f:
            return f.read()[-2000:]

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()  # our own child, by its handle
        self.proc.wait()
        self.stderr.close()
        os.unlink(self.stderr_path)


def report(seed, diff):
    print(f"MISMATCH seed {seed}: {diff}\n{textwrap.indent(source_of(seed), '    ')}", flush=True)


def run_workers(args, seeds):
    """Runs seeds over args.jobs workers; returns (programs done, mismatches)."""
    pending = list(reversed(seeds))
    workers = [Worker(args) for _ in range(args.jobs)]
    done = failures = 0
    while workers:
        for w in list(workers):
            if w.seed is None:
                if pending:
                    w.send(pending.pop())
                else:
                    w.close()
                    workers.remove(w)
        if not workers:
            break
        ready, _, _ = select.select([w.proc.stdout for w in workers], [], [], 5.0)
        for w in list(workers):
            diff = None
            if w.proc.stdout in ready:
                line = w.proc.stdout.readline()
                if line:
                    answer = json.loads(line)
                    diff, w.seed = answer["diff"], None
                    done += 1
                else:
                    diff = f"crash: worker exited with {w.proc.wait()}\n{w.stderr_tail()}"
            elif time.monotonic() - w.started > args.timeout:
                diff = f"hang: no answer after {args.timeout} s\n{w.stderr_tail()}"
            else:
                continue
            if diff is not None:
                failures += 1
                report(answer["seed"] if w.seed is None else w.seed, diff)
            if w.seed is not None:  # the worker died or hung: replace it
                done += 1
                w.close()
                workers[workers.index(w)] = Worker(args)
            if done % 100 == 0:
                print(f"... {done} programs, {failures} mismatches; next unstarted seed "
                      f"{pending[-1] if pending else 'none'}", flush=True)
        if failures >= args.max_failures:
            for w in workers:
                w.close()
            break
    return done, failures


def run_in_process(args, seeds):
    done = failures = 0
    for seed in seeds:
        diff = check_seed(seed, args.backends.split(","))
        done += 1
        if diff is not None:
            failures += 1
            report(seed, diff)
            if failures >= args.max_failures:
                break
        if done % 100 == 0:
            print(f"... {done} programs, {failures} mismatches; next seed {seed + 1}", flush=True)
    return done, failures


def default_module_dir():
    path = getattr(dt, "__file__", None)
    return os.path.dirname(os.path.abspath(path)) if path else None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", "--start", dest="seed", type=int, default=1, help="first program's seed")
    parser.add_argument("--backends", default="eager", help="comma-separated dt.jit backends")
    parser.add_argument("--show", type=int, help="print the program of this seed and exit")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (0: run in this process)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one program may take")
    parser.add_argument("--module-dir", default=default_module_dir(), help="where dyntrace.so is, for workers")
    parser.add_argument("--max-failures", type=int, default=20)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker_main(args.backends.split(","))
    if args.show is not None:
        print(source_of(args.show))
        return 0
    start = time.monotonic()
    seeds = list(range(args.seed, args.seed + args.count))
    done, failures = (run_workers if args.jobs else run_in_process)(args, seeds)
    print(f"{done} programs (seeds {args.seed}..{args.seed + done - 1}) on backends {args.backends}: "
          f"{failures} mismatches/crashes, {time.monotonic() - start:.0f} s", flush=True)
    return 1 if failures or done < len(seeds) else 0


if __name__ == "__main__":
    sys.exit(main())

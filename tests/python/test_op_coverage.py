"""Issue 19's quality bar: every op of the registry (`dt._op_names()`) has an eager CPU test, an
eager CUDA test on the stand-in driver, a traced test and a compiled (cpu backend) test, and a row
in the README's API section.

How a test is found. The test files are read as syntax trees, not run: there is no per-op
record of what ran (dt.stats() counts only CUDA ops that went through host mirrors, capped at 64
names), and running every test module again here to collect one would double the suite's time
and tie this test to the order files run in. So each op gets its spellings, the ways Python
code reaches it:
- from the registry's own bindings: every op-function object bound on `dyntrace`, `Tensor`,
  `dyntrace.nn.functional` and `dyntrace.linalg` names its op (`__name__`, with a trailing `_` for
  the in-place form), so `dt.sum`, `x.sum`, `x.add_`, `F.relu` and `dt.linalg.norm` are found
  without a table; a name in a table of strings (`UNARY = {"exp": ...}` then `getattr(dt, name)`)
  counts in modules that look ops up by name;
- from OPERATORS below: the operator slots of Tensor (`+` is add, `x[i]` is _getitem ...), which
  the registry does not know;
- from INTERNAL below: ops users never call by name, reached through public spellings
  (`_im2col` through conv2d, `_silu_backward` through silu and a backward pass).
A spelling counts in a test_* function (or a module-level loop that makes test functions into
globals()) when it is in the function, in a module-level function or class it calls, or in a
module-level table it reads. Attributes of numpy, math and the like
(`np.sum`) do not count. Operators are weak evidence (`1 + 2` is `+` too); every op that has an
operator also has a name, and tests name it. The reading is as coarse as a test function: a
spelling in a compiled test's input maker counts for that test. Overloads (`split.sizes`,
`randint.low`) share their op's Python name, so one spelling covers them all. A test that lists
the registry (`dt._op_names()`) checks tables of names, not ops, so its spellings do not count.

What kind of test a test_* function is follows from what it reaches (through the helper modules
too: cpulib.check compiles with the cpu backend):
- eager CPU: it never reaches dt.jit, dt.tracing, dt.enable or dt.explain;
- traced: it does;
- compiled cpu: it reaches a jit call with backend="cpu", or with a variable backend= where
  "cpu" is among the strings it reaches (`for backend in ("eager", "cpu")`);
- eager CUDA: it runs a script on the stand-in driver (run_with_fake_driver or a child with
  DYNTRACE_LIBCUDA); the script's own text, read as Python, is the test, and each of its
  top-level statements that does not reach dt.jit counts as eager.

README: the op's names (or, for INTERNAL ops, the public names that reach them) among the code
spans (`...`) of the section "## The tensor API", up to the next level-2 heading.

Each category's exemptions are small and say why; an exemption naming no registry op fails."""
import ast
import os
import re
import textwrap

import dyntrace as dt

_HERE = os.path.dirname(os.path.abspath(__file__))
_README = os.path.join(_HERE, "..", "..", "README.md")
HELPER_MODULES = ("testlib", "jitlib", "cpulib", "breaklib")
# Reference libraries: their attributes (np.sum, math.exp) are not dyntrace ops.
REFERENCE_MODULES = {"np", "_np", "numpy", "math", "cmath", "torch", "random", "operator", "os", "sys",
                     "re", "json", "itertools", "functools", "struct", "textwrap", "subprocess", "glob"}
TRACE_ENTRIES = {"jit", "tracing", "enable", "explain"}
# A test that reads these checks tables of op names against the registry (like this file).
REGISTRY_LISTS = {"_op_names", "_autograd_ops"}

# Tensor's operator slots (interpreter/py_tensor.cc) and the op each one calls. "[]" is a
# subscript read and "[]=" a subscript write; "abs()" the builtin.
OPERATORS = {
    "add": ["+"], "sub": ["-"], "mul": ["*"], "div": ["/"], "floor_divide": ["//"], "remainder": ["%"],
    "pow": ["**"], "matmul": ["@"], "logical_and": ["&"], "logical_or": ["|"], "logical_xor": ["^"],
    "neg": ["unary -"], "logical_not": ["~"], "abs": ["abs()"],
    "lt": ["<"], "le": ["<="], "eq": ["=="], "ne": ["!="], "gt": [">"], "ge": [">="],
}
_BINARY_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
                   ast.Mod: "%", ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|",
                   ast.BitXor: "^"}
_COMPARE_SYMBOLS = {ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!=", ast.Gt: ">", ast.GtE: ">="}

# Ops with no Python name of their own: the public spellings that run them. Each entry is a
# list of alternatives; an alternative is a tuple of spellings that must all be in one test.
# "readme" lists the names the README documents them by.
INTERNAL = {
    # Tensor.__getitem__ / __setitem__ with ints, slices, None and ...; with index tensors, lists
    # or masks they run _index / _index_put (a copy, as PyTorch).
    "_getitem": {"code": [("[]",)], "readme": ["__getitem__"]},
    "_setitem": {"code": [("[]=",)], "readme": ["__setitem__"]},
    "_index": {"code": [("[]",)], "readme": ["__getitem__"]},
    "_index_put": {"code": [("[]=",)], "readme": ["__setitem__"]},
    # Tensor.to(dtype) and the cast methods while autograd follows the tensor.
    "_to": {"code": [(n,) for n in ("to", "float", "double", "half", "int", "long", "bool", "byte", "char",
                                   "short", "bfloat16")],
            "readme": ["byte", "char", "short", "bfloat16"]},
    "_to_device": {"code": [("cuda",), ("cpu",), ("to",)], "readme": ["cuda"]},
    # A tensor that traced code reads from a global or closure: a graph constant.
    "_tensor_constant": {"code": [("jit",)], "readme": []},
    # gelu's two element functions (approximate="none" / "tanh").
    "_gelu_erf": {"code": [("gelu",)], "readme": ["gelu"]},
    "_gelu_tanh": {"code": [("gelu",)], "readme": ["gelu"]},
    # Convolutions unfold their input into columns, then one GEMM per image.
    "_im2col": {"code": [("conv1d",), ("conv2d",)], "readme": ["conv1d", "conv2d"]},
    # Their backward adds the columns' gradient back onto the input (and pools' backward).
    "_col2im": {"code": [("conv1d", "backward"), ("conv2d", "backward"), ("conv2d", "grad")], "readme": ["conv1d", "conv2d"]},
    # scaled_dot_product_attention without dropout calls it; compiled CUDA graphs also make it
    # from attention written out op by op (jit/attention_pattern.h).
    "_fused_attention": {"code": [("scaled_dot_product_attention",)], "readme": ["scaled_dot_product_attention"]},
    # batch_norm with training=True updates running_mean / running_var through it.
    "_batch_norm_update_stats": {"code": [("batch_norm",)], "readme": ["batch_norm"]},
    # The optimizers' step() runs one multi-tensor update per param group.
    "_fused_adam_": {"code": [("Adam",), ("AdamW",)], "readme": []},
    "_fused_sgd_": {"code": [("SGD",)], "readme": []},
    # Backward nodes autograd records for these activations' gradients.
    "_gelu_erf_backward": {"code": [("gelu", "backward"), ("gelu", "grad")], "readme": []},
    "_silu_backward": {"code": [("silu", "backward"), ("silu", "grad")], "readme": []},
    "_sigmoid_backward": {"code": [("sigmoid", "backward"), ("sigmoid", "grad")], "readme": []},
    "_tanh_backward": {"code": [("tanh", "backward"), ("tanh", "grad")], "readme": []},
}

# ---- exemptions: each a registry op, each with its reason ------------------------------------

EXEMPT = {
    "eager_cpu": {
        # Exists only inside traced graphs.
        "_tensor_constant": "a graph constant; eager code never makes one",
    },
    "eager_cuda": {
        "_tensor_constant": "a graph constant; eager code never makes one",
    },
    "traced": {},
    "compiled_cpu": {
        # A device move: the cpu backend compiles no graph that leaves the CPU (`.to` in a
        # compiled test is a dtype cast).
        "_to_device": "the cpu backend's graphs stay on the CPU",
    },
    "readme": {
        "_tensor_constant": "a graph constant, not an API",
        "_gelu_erf_backward": "autograd's node, documented as gelu's gradient",
        "_silu_backward": "autograd's node, documented as silu's gradient",
        "_sigmoid_backward": "autograd's node, documented as sigmoid's gradient",
        "_tanh_backward": "autograd's node, documented as tanh's gradient",
        "_fused_adam_": "optimizer internals; README's Training section documents dyntrace.optim",
        "_fused_sgd_": "optimizer internals; README's Training section documents dyntrace.optim",
    },
}


# ---- spellings ---------------------------------------------------------------------------------

def _op_function_names():
    """Each op function's `__name__` (the op's Python name, its registry name up to the
    overload's '.', with a trailing '_' for the in-place form) -> the attribute names bound to it
    on dyntrace, Tensor, dyntrace.nn.functional and dyntrace.linalg."""
    op_type = type(dt.add)
    names = {}
    for namespace in (dt, dt.Tensor, dt.nn.functional, dt.linalg):
        for attr, value in vars(namespace).items():
            if type(value) is op_type:
                names.setdefault(value.__name__, set()).add(attr)
    return names


def spellings():
    """op name -> {"code": [alternatives], "readme": [names]}."""
    bound = _op_function_names()
    out = {}
    for op in dt._op_names():
        python_name = op.split(".")[0]
        if op in INTERNAL:
            out[op] = {"code": list(INTERNAL[op]["code"]), "readme": list(INTERNAL[op]["readme"])}
            continue
        attrs = sorted(bound.get(python_name, set()) | bound.get(python_name + "_", set()))
        assert attrs, "op %s is bound under no name; add it to INTERNAL with the spellings that reach it" % op
        code = [(a,) for a in attrs] + [(s,) for s in OPERATORS.get(python_name, ())]
        out[op] = {"code": code, "readme": attrs}
    return out


# ---- reading test files ------------------------------------------------------------------------

class Module:
    """One Python file: its top-level functions and classes, tables, and dyntrace imports."""

    def __init__(self, name, source):
        self.name = name
        self.tree = ast.parse(source)
        self.defs = {}       # top-level def / class name -> node
        self.tables = {}     # top-level assigned name -> value node
        self.imported = {}   # name -> (module, original name), for `from m import n`
        self.dyntrace_names = set()
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                self.defs[node.name] = node
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.tables[target.id] = node.value
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    self.imported[alias.asname or alias.name] = (node.module, alias.name)
                    if node.module.split(".")[0] == "dyntrace":
                        self.dyntrace_names.add(alias.asname or alias.name)
        self.looks_up_by_name = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and
                                    n.func.id == "getattr" and len(n.args) >= 2 and
                                    not isinstance(n.args[1], ast.Constant) for n in ast.walk(self.tree))


def _is_trace_entry(node):
    """dt.jit, dt.tracing ... called or used as a decorator."""
    return isinstance(node, ast.Attribute) and node.attr in TRACE_ENTRIES and isinstance(node.value, ast.Name) \
        and node.value.id in ("dt", "dyntrace", "_dt")


def _names_cpu_backend(call):
    return any(k.arg == "backend" and isinstance(k.value, ast.Constant) and k.value.value == "cpu"
               for k in call.keywords)


def _backend_variable(call):
    return any(k.arg == "backend" and not isinstance(k.value, ast.Constant) for k in call.keywords)


def _cpu_in_defaults(fn):
    """A helper whose `backend`/`backends` parameter defaults to include "cpu"
    (jitlib.check_compiled)."""
    if not isinstance(fn, ast.FunctionDef):
        return False
    params = fn.args.args[len(fn.args.args) - len(fn.args.defaults):]
    for p, d in zip(params, fn.args.defaults):
        if p.arg in ("backend", "backends") and any(isinstance(c, ast.Constant) and c.value == "cpu"
                                                  for c in ast.walk(d)):
            return True
    return False


class Reach:
    """What the code reachable from one function (or script) spells and runs."""

    def __init__(self):
        self.spelled = set()
        self.traces = False
        self.cpu_backend = False
        self.fake_driver = False
        self.registers_tests = False  # stores test functions into globals()
        self.backend_variable = False  # a jit call's backend= is a variable ...
        self.names_cpu = False         # ... and "cpu" is among the strings it may hold
        self.scripts = []   # string constants reached (candidate stand-in-driver scripts)


class Reader:
    """Follows calls from a test function through its module and the helper modules."""

    def __init__(self, modules):
        self.modules = modules
        self._helper_memo = {}

    def helper_reach(self, module_name, def_name):
        """Whether a helper module's function reaches a trace entry / the cpu backend / the
        stand-in driver (its spellings are the harness's, not a test's)."""
        key = (module_name, def_name)
        if key not in self._helper_memo:
            self._helper_memo[key] = Reach()  # a cycle adds nothing
            module = self.modules.get(module_name)
            if module is not None and def_name in module.defs:
                self._helper_memo[key] = self.reach(module, [module.defs[def_name]], harness=True)
        return self._helper_memo[key]

    def reach(self, module, roots, harness=False):
        r = Reach()
        seen_defs, seen_tables = set(), set()
        pending = list(roots)
        while pending:
            node = pending.pop()
            if isinstance(node, ast.FunctionDef) and _cpu_in_defaults(node):
                r.cpu_backend = True
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    if n.id in module.defs and n.id not in seen_defs:
                        seen_defs.add(n.id)
                        pending.append(module.defs[n.id])
                    elif n.id in module.tables and n.id not in seen_tables:
                        seen_tables.add(n.id)
                        pending.append(module.tables[n.id])
                    elif n.id in module.imported:
                        source, original = module.imported[n.id]
                        if source in HELPER_MODULES:
                            sub = self.helper_reach(source, original)
                            r.traces |= sub.traces
                            r.cpu_backend |= sub.cpu_backend
                            r.fake_driver |= sub.fake_driver
                    if n.id in ("fake_driver", "run_with_fake_driver", "run_compiled_with_fake_driver"):
                        r.fake_driver = True
                elif _is_trace_entry(n):
                    r.traces = True
                elif isinstance(n, ast.Call):
                    # dt.jit(f, backend="cpu"), or a helper that passes its options on to it.
                    r.cpu_backend |= _names_cpu_backend(n)
                    r.backend_variable |= _backend_variable(n)
                elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and \
                        isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name) and \
                        n.value.func.id == "globals":
                    r.registers_tests = True
                elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                    r.names_cpu |= n.value == "cpu"
                    if "DYNTRACE_LIBCUDA" == n.value:
                        r.fake_driver = True
                    if "\n" in n.value:
                        r.scripts.append(n.value)
                if not harness:
                    self._spell(module, n, r.spelled)
        # `for backend in ("eager", "cpu"): dt.jit(f, backend=backend)`
        r.cpu_backend |= r.backend_variable and r.names_cpu
        return r

    @staticmethod
    def _spell(module, n, out):
        if isinstance(n, ast.Attribute):
            base = n.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if not (isinstance(base, ast.Name) and base.id in REFERENCE_MODULES):
                out.add(n.attr)
        elif isinstance(n, ast.Name) and n.id in module.dyntrace_names:
            out.add(n.id)
        elif isinstance(n, (ast.BinOp, ast.AugAssign)):
            out.add(_BINARY_SYMBOLS.get(type(n.op), ""))
        elif isinstance(n, ast.UnaryOp):
            out.add({ast.USub: "unary -", ast.Invert: "~"}.get(type(n.op), ""))
        elif isinstance(n, ast.Compare):
            out.update(_COMPARE_SYMBOLS.get(type(op), "") for op in n.ops)
        elif isinstance(n, ast.Subscript):
            out.add("[]" if isinstance(n.ctx, ast.Load) else "[]=")
            if isinstance(n.ctx, ast.Store):
                out.add("[]")  # `x[i] += v` reads, then writes
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "abs":
            out.add("abs()")
        elif isinstance(n, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and module.looks_up_by_name:
            items = n.keys if isinstance(n, ast.Dict) else n.elts
            out.update(e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str))


def _script_module(text):
    """A stand-in-driver script's text as a Module, or None when it is not Python."""
    try:
        return Module("<script>", textwrap.dedent(text))
    except SyntaxError:
        return None


def _test_roots(reader, module):
    """(name, Reach) for each test_* function, and for each top-level statement that makes
    test functions and stores them into globals() (`for name in UNARY: globals()[...] = ...`)."""
    for def_name, node in module.defs.items():
        if def_name.startswith("test_"):
            yield "%s::%s" % (module.name, def_name), reader.reach(module, [node])
    for statement in module.tree.body:
        if not isinstance(statement, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            r = reader.reach(module, [statement])
            if r.registers_tests:
                yield "%s::<tests made at line %d>" % (module.name, statement.lineno), r


def collect_tests():
    """{"eager_cpu" | "traced" | "compiled_cpu" | "eager_cuda": {test name: spellings}}."""
    modules = {}
    for name in HELPER_MODULES:
        with open(os.path.join(_HERE, name + ".py")) as f:
            modules[name] = Module(name, f.read())
    reader = Reader(modules)
    found = {"eager_cpu": {}, "traced": {}, "compiled_cpu": {}, "eager_cuda": {}}

    def note(kind, spelled, where):
        found[kind].setdefault(where, set()).update(spelled)

    this_file = os.path.basename(__file__)
    for file in sorted(os.listdir(_HERE)):
        if not (file.startswith("test_") and file.endswith(".py")) or file == this_file:
            continue
        with open(os.path.join(_HERE, file)) as f:
            module = Module(file[:-3], f.read())
        for where, r in _test_roots(reader, module):
            if REGISTRY_LISTS & r.spelled:
                r.spelled = set()  # a check over the registry's names, not a test of the ops
            note("traced" if r.traces else "eager_cpu", r.spelled, where)
            if r.traces and r.cpu_backend:
                note("compiled_cpu", r.spelled, where)
            if r.fake_driver:
                for text in r.scripts:
                    script = _script_module(text)
                    if script is None:
                        continue
                    # Statement by statement: a script may run some ops eagerly and compile
                    # others. Functions it defines count where a statement calls them.
                    for statement in script.tree.body:
                        if isinstance(statement, (ast.FunctionDef, ast.ClassDef)):
                            continue
                        s = reader.reach(script, [statement])
                        if not s.traces:
                            note("eager_cuda", s.spelled, where + " (stand-in driver script)")
    return found


def readme_api_names():
    """Identifiers inside the code spans of README's "## The tensor API" section."""
    with open(_README) as f:
        text = f.read()
    start = text.index("\n## The tensor API\n")
    end = text.index("\n## ", start + 1)
    section = text[start:end]
    section = re.sub(r"```.*?```", lambda m: "`%s`" % m.group(0).strip("`"), section, flags=re.S)
    names = set()
    for span in re.findall(r"`([^`]+)`", section):
        names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span))
    return names


def _covered(alternatives, tests):
    """Whether one test holds every spelling of some alternative."""
    return any(all(s in spelled for s in alt) for spelled in tests.values() for alt in alternatives)


def missing_by_category():
    ops = spellings()
    found = collect_tests()
    readme = readme_api_names()
    missing = {}
    for kind, tests in found.items():
        missing[kind] = sorted(op for op, sp in ops.items()
                               if op not in EXEMPT[kind] and not _covered(sp["code"], tests))
    missing["readme"] = sorted(op for op, sp in ops.items()
                               if op not in EXEMPT["readme"] and not any(n in readme for n in sp["readme"]))
    return missing


def test_exemptions_name_registry_ops():
    names = set(dt._op_names())
    stale = {kind: sorted(set(ops) - names) for kind, ops in EXEMPT.items() if set(ops) - names}
    assert not stale, "exemptions for ops the registry no longer has: %s" % stale
    stale_internal = sorted(set(INTERNAL) - names)
    assert not stale_internal, "INTERNAL spellings for ops the registry no longer has: %s" % stale_internal
    stale_operators = sorted(set(OPERATORS) - {n.split(".")[0] for n in names})
    assert not stale_operators, "OPERATORS for ops the registry no longer has: %s" % stale_operators


def test_every_op_has_eager_cuda_traced_compiled_tests_and_a_readme_row():
    missing = missing_by_category()
    gaps = {kind: ops for kind, ops in missing.items() if ops}
    assert not gaps, "ops without coverage, by category: %s" % gaps


def test_the_reader_tells_test_kinds_apart():
    # The rules above on a small module: a test that only runs ops eagerly, one that traces with
    # the cpu backend through a helper, and one that runs a script on the stand-in driver.
    source = textwrap.dedent('''
        import dyntrace as dt
        from cpulib import check

        TABLE = {"cumsum": 1}

        def helper(x):
            return x.sort() + x[0]

        def test_eager():
            x = dt.randn(3)
            helper(x)
            for name in TABLE:
                getattr(dt, name)(x)

        def test_compiled():
            check(lambda x: dt.flip(x, [0]), lambda i: (dt.randn(3),))

        def test_script():
            run_with_fake_driver("""
                x = dt.randn(3).cuda()
                x.topk(2)
            """)

        def _make(name):
            return lambda: dt.cummax(dt.randn(3), 0)

        for _name in ("a", "b"):
            globals()["test_made_" + _name] = _make(_name)
    ''')
    modules = {name: Module(name, open(os.path.join(_HERE, name + ".py")).read()) for name in HELPER_MODULES}
    reader = Reader(modules)
    module = Module("example", source)
    eager = reader.reach(module, [module.defs["test_eager"]])
    assert not eager.traces and {"sort", "[]", "+", "cumsum", "randn"} <= eager.spelled, eager.spelled
    compiled = reader.reach(module, [module.defs["test_compiled"]])
    assert compiled.traces and compiled.cpu_backend and "flip" in compiled.spelled
    script = reader.reach(module, [module.defs["test_script"]])
    assert script.fake_driver and not script.traces
    inner = _script_module(script.scripts[0])
    assert "topk" in reader.reach(inner, inner.tree.body).spelled
    made = [r for name, r in _test_roots(reader, module) if "tests made" in name]
    assert len(made) == 1 and "cummax" in made[0].spelled and not made[0].traces

"""The frame evaluator's Python surface: dt.jit's forms and option checks, guards() and graphs()
text, explain(), custom Python backends, tracing() / enable() / disable(), fullgraph, reset() and
stats()."""
import os

import dyntrace as dt
from jitlib import STAT_INT_KEYS, STAT_LIST_KEYS, fresh_copy, jitted_copy, stats
from testlib import assert_close, assert_raises, rand_tensor, seed


def _guard_target(x, n, unused):
    y = x * n
    return dt.exp(y)


def _exp_plus_one(x):
    return dt.exp(x) + 1


def _method_chain(x):
    return x.exp().sum(1) * 2


def _prints(x):
    y = x * 2
    print("side effect")
    return y + 1


def _two_ops(x, y):
    return dt.tanh(x) * y


def _line_of(fn, text):
    """The absolute line number of the first source line of fn containing `text`."""
    import inspect
    lines, first = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if text in line:
            return first + k
    raise AssertionError("%r not in source of %s" % (text, fn.__name__))


# ---------------------------------------------------------------------------------------------
# dt.jit forms and validation.

def test_jit_forms_return_a_compiled_callable_and_leave_the_function_plain():
    dt.reset()
    f = fresh_copy(_exp_plus_one)
    g = fresh_copy(_exp_plus_one)
    h = fresh_copy(_exp_plus_one)
    lam = lambda x: x + 1  # noqa: E731
    deco = dt.jit(backend="eager")
    assert callable(deco)
    compiled = [dt.jit(f), deco(g), dt.jit(h, backend="auto", fullgraph=False, cuda_graphs="auto", cache_limit=3),
                dt.jit(lam)]
    for c, fn in zip(compiled, (f, g, h, lam)):
        assert isinstance(c, dt.CompiledFunction) and c is not fn and c.__wrapped__ is fn
        assert (c.__name__, c.__qualname__, c.__doc__, c.__module__) == (fn.__name__, fn.__qualname__, fn.__doc__,
                                                                         fn.__module__)
    seed(31001)
    x = rand_tensor((3, 4))
    for c in compiled[:3]:
        assert_close(c(x), dt.exp(x) + 1)
    assert_close(compiled[3](x), x + 1)
    assert dt.stats()["frames_traced"] == 4, dt.stats()
    # The functions themselves stay plain: no frame traced, and no hook installed between calls.
    assert not dt._hook_installed()
    before = dt.stats()["frames_traced"]
    for fn in (f, g, h):
        assert_close(fn(x), dt.exp(x) + 1)
    assert dt.stats()["frames_traced"] == before and not dt._hook_installed()


def test_jit_decorator_syntax():
    dt.reset()

    @dt.jit
    def a(x):
        return x * 3

    @dt.jit(backend="eager", cache_limit=4)
    def b(x):
        return x - 3

    seed(31002)
    x = rand_tensor((5,))
    assert_close(a(x), x * 3)
    assert_close(b(x), x - 3)
    assert stats()["frames_traced"] == 2


def test_jit_rejects_non_functions():
    dt.reset()
    assert_raises(TypeError, dt.jit, 3)
    assert_raises(TypeError, dt.jit, "f")
    assert_raises(TypeError, dt.jit, len)          # builtin: no Python code object
    assert_raises(TypeError, dt.jit, dt.exp)


def test_jit_rejects_bad_options():
    dt.reset()
    f = fresh_copy(_exp_plus_one)
    assert_raises(ValueError, dt.jit, f, backend="no-such-backend")
    assert_raises(ValueError, lambda: dt.jit(backend="no-such-backend")(fresh_copy(f)))
    assert_raises(ValueError, dt.jit, fresh_copy(f), cache_limit=0)
    assert_raises(ValueError, dt.jit, fresh_copy(f), cache_limit=-3)
    assert_raises(ValueError, lambda: dt.jit(cache_limit=0)(fresh_copy(f)))
    # A rejected call leaves the function usable and untraced.
    seed(31003)
    x = rand_tensor((2, 2))
    assert_close(f(x), dt.exp(x) + 1)
    assert stats()["frames_traced"] == 0


# ---------------------------------------------------------------------------------------------
# stats() and reset().

def test_stats_keys_and_types():
    dt.reset()
    s = dt.stats()
    assert isinstance(s, dict)
    for k in STAT_INT_KEYS:
        assert k in s and type(s[k]) is int and s[k] == 0, (k, s.get(k))
    for k in STAT_LIST_KEYS:
        assert k in s and isinstance(s[k], list) and s[k] == [], (k, s.get(k))


def test_stats_count_a_trace_and_a_hit():
    dt.reset()
    f = jitted_copy(_exp_plus_one)
    seed(31004)
    f(rand_tensor((3, 3)))
    s = stats()
    assert s["frames_seen"] >= 1 and s["frames_traced"] == 1, s
    assert s["cache_misses"] == 1 and s["graphs"] >= 1, s
    f(rand_tensor((3, 3)))
    s2 = stats()
    assert s2["cache_hits"] == 1 and s2["frames_traced"] == 1, s2
    assert s2["frames_seen"] >= s["frames_seen"] + 1, s2


def test_reset_clears_caches_and_stats():
    dt.reset()
    f = jitted_copy(_exp_plus_one)
    seed(31005)
    x = rand_tensor((3, 3))
    f(x)
    f(x.to(dt.float64))
    assert len(dt.guards(f)) == 2
    dt.reset()
    s = stats()
    for k in STAT_INT_KEYS:
        assert s[k] == 0, (k, s)
    for k in STAT_LIST_KEYS:
        assert s[k] == [], (k, s)
    assert dt.guards(f) == []
    assert dt.graphs(f) == []
    # The next call is a miss and traces again (the function is still jit-marked).
    assert_close(f(x), dt.exp(x) + 1)
    s = stats()
    assert s["cache_misses"] == 1 and s["frames_traced"] == 1 and s["cache_hits"] == 0, s
    assert len(dt.guards(f)) == 1


# ---------------------------------------------------------------------------------------------
# guards() and graphs().

def test_guards_text_and_provenance():
    dt.reset()
    f = jitted_copy(_guard_target)
    seed(31006)
    x = rand_tensor((4, 5))
    unused = rand_tensor((2,))
    assert_close(f(x, 3, unused), dt.exp(x * 3))
    entries = dt.guards(f)
    assert isinstance(entries, list) and len(entries) == 1, entries
    text = entries[0]
    assert isinstance(text, str)
    lines = text.splitlines()
    tensor_lines = [ln for ln in lines if "L['x']" in ln and "Tensor(" in ln]
    assert tensor_lines, text
    tl = tensor_lines[0]
    assert "float32" in tl and "cpu" in tl and "ndim=2" in tl, tl
    use_line = _line_of(_guard_target, "y = x * n")
    assert "line %d" % use_line in tl, (use_line, tl)
    assert "offset" in tl, tl
    n_lines = [ln for ln in lines if "L['n']" in ln and "== 3" in ln]
    assert n_lines, text
    assert "line %d" % use_line in n_lines[0], (use_line, n_lines[0])
    assert "L['unused']" not in text, text
    # Sizes were never read: no exact size guards on x.
    assert "L['x'].size(" not in text and "L['x'].shape[" not in text, text


def test_guards_one_entry_per_cache_entry():
    dt.reset()
    f = jitted_copy(_guard_target)
    seed(31007)
    u = rand_tensor((1,))
    f(rand_tensor((4, 5)), 3, u)
    f(rand_tensor((4, 5)), 4, u)
    f(rand_tensor((4, 5), dt.float64), 4, u)
    entries = dt.guards(f)
    assert len(entries) == 3, entries
    assert "L['n'] == 3" in entries[0], entries
    # n changed once: from then on it is a run-time number, guarded by type only.
    assert "type(L['n']) is int" in entries[1] and "L['n'] ==" not in entries[1], entries
    assert any("float64" in e for e in entries), entries


def test_guards_size_read_and_list_length():
    def reads(x, xs):
        acc = x * x.shape[0]
        for t in xs:
            acc = acc + t
        return acc

    dt.reset()
    f = jitted_copy(reads)
    seed(31008)
    x = rand_tensor((6, 2))
    f(x, [rand_tensor((2,)), rand_tensor((2,))])
    text = dt.guards(f)[0]
    assert "L['x'].size(0) == 6" in text or "L['x'].shape[0] == 6" in text, text
    assert "len(L['xs']) == 2" in text, text


def test_guards_of_unjitted_or_uncalled_function():
    dt.reset()
    f = jitted_copy(_exp_plus_one)
    assert dt.guards(f) == []
    assert dt.graphs(f) == []
    g = fresh_copy(_exp_plus_one)
    assert dt.guards(g) == []


def test_graphs_text():
    dt.reset()
    f = jitted_copy(_exp_plus_one)
    seed(31009)
    f(rand_tensor((3, 4)))
    gs = dt.graphs(f)
    assert isinstance(gs, list) and len(gs) == 1, gs
    assert "dyntrace.exp(" in gs[0], gs[0]
    assert "dyntrace.add(" in gs[0] or "+" in gs[0], gs[0]
    g = jitted_copy(_method_chain)
    g(rand_tensor((3, 4)))
    text = dt.graphs(g)[0]
    assert "exp" in text and "sum" in text and ("mul" in text or "*" in text), text


# ---------------------------------------------------------------------------------------------
# explain().

def test_explain_without_break():
    dt.reset()
    seed(31010)
    x, y = rand_tensor((3, 3)), rand_tensor((3, 3))
    e = dt.explain(_two_ops, x, y)
    assert e.graph_count == 1, str(e)
    assert e.break_count == 0 and list(e.breaks) == [], str(e)
    assert len(e.graphs) == 1 and "dyntrace.tanh(" in e.graphs[0], e.graphs
    assert len(e.guards) >= 1 and "L['x']" in "\n".join(e.guards), e.guards
    report = str(e)
    assert isinstance(report, str) and report, report
    assert "dyntrace.tanh" in report, report


def test_explain_with_break():
    dt.reset()
    seed(31011)
    x = rand_tensor((3, 3))
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        e = dt.explain(_prints, x)
    assert buf.getvalue() == "side effect\n", buf.getvalue()
    assert e.break_count >= 1, str(e)
    assert len(e.breaks) == e.break_count, e.breaks
    b = e.breaks[0]
    for key in ("reason", "file", "line", "instruction", "offset"):
        assert key in b, (key, b)
    assert isinstance(b["reason"], str) and b["reason"], b
    assert "print" in b["reason"] or "print" in str(b["instruction"]), b
    assert b["line"] == _line_of(_prints, 'print("side effect")'), b
    assert os.path.basename(b["file"]) == "test_jit_api.py", b
    assert isinstance(b["offset"], int) and b["offset"] >= 0, b
    report = str(e)
    assert b["reason"] in report, report
    assert str(b["line"]) in report, report


def test_explain_repeated_reports_only_the_function():
    # Each explain() reports this function's graphs and breaks only, however many ran before.
    seed(31023)
    x, y = rand_tensor((3, 3)), rand_tensor((3, 3))
    for _ in range(3):
        dt.reset()
        e = dt.explain(_two_ops, x, y)
        assert e.graph_count == 1 and e.break_count == 0, str(e)
    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()):
        e = dt.explain(_prints, x)
    assert all(os.path.basename(b["file"]) == "test_jit_api.py" for b in e.breaks), e.breaks


def test_explain_with_kwargs():
    dt.reset()
    seed(31012)
    x, y = rand_tensor((2, 2)), rand_tensor((2, 2))
    e = dt.explain(_two_ops, x, y=y)
    assert e.graph_count == 1 and e.break_count == 0, str(e)


# ---------------------------------------------------------------------------------------------
# Custom Python backends.

def test_custom_backend_called_once_per_compilation():
    dt.reset()
    compiled = []
    runs = []

    def backend(graph, example_inputs):
        assert isinstance(graph, dt.Graph), type(graph)
        example_inputs = list(example_inputs)
        assert all(isinstance(t, dt.Tensor) for t in example_inputs), example_inputs
        compiled.append((str(graph), list(graph.nodes), example_inputs))

        def run(*inputs):
            runs.append(len(inputs))
            return graph.run(*inputs)
        return run

    f = jitted_copy(_exp_plus_one, backend=backend)
    seed(31013)
    for _ in range(3):
        x = rand_tensor((4, 3))
        assert_close(f(x), dt.exp(x) + 1)
    assert len(compiled) == 1, compiled
    assert len(runs) == 3, runs
    text, nodes, examples = compiled[0]
    assert "dyntrace.exp(" in text, text
    assert all(isinstance(n, str) for n in nodes), nodes
    assert any("exp" in n for n in nodes), nodes
    assert len(examples) == 1 and examples[0].shape == (4, 3), examples
    # A recompilation asks the backend again.
    x = rand_tensor((4, 3), dt.float64)
    assert_close(f(x), dt.exp(x) + 1)
    assert len(compiled) == 2, compiled
    assert len(runs) == 4, runs


def test_custom_backend_output_is_used():
    dt.reset()

    def backend(graph, example_inputs):
        def run(*inputs):
            return [o * 0 + 42 for o in graph.run(*inputs)]
        return run

    def g(x):
        return x + 1

    f = jitted_copy(g, backend=backend)
    seed(31014)
    x = rand_tensor((2, 2))
    assert f(x).tolist() == [[42.0, 42.0], [42.0, 42.0]]


def test_graph_run_matches_eager():
    dt.reset()
    seen = []

    def backend(graph, example_inputs):
        seen.append((graph, list(example_inputs)))
        return graph.run

    f = jitted_copy(_two_ops, backend=backend)
    seed(31015)
    x, y = rand_tensor((3, 5)), rand_tensor((3, 5))
    assert_close(f(x, y), dt.tanh(x) * y)
    graph, examples = seen[0]
    outs = graph.run(*examples)
    assert isinstance(outs, (list, tuple)) and len(outs) == 1
    assert_close(outs[0], dt.tanh(examples[0]) * examples[1])


# ---------------------------------------------------------------------------------------------
# tracing(), enable(), disable().

def test_tracing_context():
    dt.reset()
    f = fresh_copy(_exp_plus_one)
    seed(31016)
    x = rand_tensor((3, 3))
    with dt.tracing(backend="eager"):
        r = f(x)
    assert_close(r, dt.exp(x) + 1)
    s = stats()
    assert s["frames_traced"] >= 1, s
    # After the block the function runs plainly: nothing new is traced or looked up.
    g = fresh_copy(_exp_plus_one)
    assert_close(g(x), dt.exp(x) + 1)
    s2 = stats()
    assert s2["frames_traced"] == s["frames_traced"], s2
    assert s2["frames_seen"] == s["frames_seen"], s2


def test_tracing_context_with_custom_backend():
    dt.reset()
    compiled = []

    def backend(graph, example_inputs):
        compiled.append(str(graph))
        return graph.run

    f = fresh_copy(_two_ops)
    seed(31017)
    x, y = rand_tensor((2, 3)), rand_tensor((2, 3))
    with dt.tracing(backend=backend):
        r = f(x, y)
    assert_close(r, dt.tanh(x) * y)
    assert len(compiled) == 1 and "dyntrace.tanh(" in compiled[0], compiled


def test_tracing_context_restores_on_exception():
    dt.reset()
    f = fresh_copy(_exp_plus_one)
    seed(31018)
    x = rand_tensor((2, 2))
    try:
        with dt.tracing(backend="eager"):
            raise KeyError("boom")
    except KeyError:
        pass
    s = stats()
    assert_close(f(x), dt.exp(x) + 1)
    assert stats()["frames_traced"] == s["frames_traced"]


def test_enable_disable():
    dt.reset()
    f = fresh_copy(_exp_plus_one)
    g = fresh_copy(_two_ops)
    seed(31019)
    x = rand_tensor((3, 2))
    dt.enable(backend="eager")
    try:
        r = f(x)
    finally:
        dt.disable()
    assert_close(r, dt.exp(x) + 1)
    s = stats()
    assert s["frames_traced"] >= 1, s
    assert_close(g(x, x), dt.tanh(x) * x)
    s2 = stats()
    assert s2["frames_traced"] == s["frames_traced"] and s2["frames_seen"] == s["frames_seen"], s2


# ---------------------------------------------------------------------------------------------
# fullgraph.

def test_fullgraph_raises_on_break():
    dt.reset()
    f = jitted_copy(_prints, fullgraph=True)
    seed(31020)
    x = rand_tensor((2, 2))
    e = assert_raises(RuntimeError, f, x)
    assert "print" in str(e), str(e)


def test_fullgraph_allows_complete_graph():
    dt.reset()
    f = jitted_copy(_two_ops, fullgraph=True)
    seed(31021)
    x, y = rand_tensor((2, 4)), rand_tensor((2, 4))
    assert_close(f(x, y), dt.tanh(x) * y)
    s = stats()
    assert s["fallbacks"] == 0 and s["frames_traced"] == 1, s


def test_fallback_without_fullgraph_runs_plainly():
    dt.reset()
    f = jitted_copy(_prints)
    seed(31022)
    x = rand_tensor((2, 2))
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        r = f(x)
    assert buf.getvalue() == "side effect\n"
    assert_close(r, x * 2 + 1)
    s = stats()
    assert s["graph_breaks"] >= 1 and any("print" in r for r in s["break_reasons"]), s


def _device_aware(x):
    on_gpu = dt.cuda.is_available()
    count = dt.cuda.device_count()
    y = x * 2 + count
    if on_gpu:
        return y.exp()
    return y.sin()


def test_cuda_availability_is_a_trace_time_constant():
    # As torch.compile treats torch.cuda.is_available(): the driver is probed once per process, so
    # the answer is folded into the graph instead of breaking it.
    seed(7101)
    dt.reset()
    jfn = jitted_copy(_device_aware, backend="eager")
    for _ in range(3):
        x = rand_tensor((4, 5))
        assert_close(jfn(x), _device_aware(x))
    s = dt.stats()
    assert s["graph_breaks"] == 0, s["break_reasons"]
    assert s["graphs"] == 1 and s["recompiles"] == 0, s
    guards = "\n".join(str(g) for g in dt.guards(jfn))
    assert ".cuda.is_available is <staticmethod" in guards, guards


def test_compiled_versions_of_one_function_coexist():
    # Entries belong to the compiled callable (and so to its options): jitting a function again
    # with another backend compiles anew without disturbing the first version, and calling a
    # version again uses what it compiled.
    dt.reset()
    compiled = []

    def recording(tag):
        def backend(graph, example_inputs):
            compiled.append(tag)
            return graph.run
        return backend

    first, second = recording("first"), recording("second")
    f = fresh_copy(_exp_plus_one)
    seed(7102)
    x = rand_tensor((3, 4))
    want = _exp_plus_one(x)
    jf1 = dt.jit(f, backend=first)
    assert_close(jf1(x), want)
    assert_close(jf1(x), want)
    assert compiled == ["first"], compiled
    jf2 = dt.jit(f, backend=second)
    assert_close(jf2(x), want)
    assert compiled == ["first", "second"], compiled
    je = dt.jit(f, backend="eager")
    for c in (je, jf1, jf2, je):
        assert_close(c(x), want)
    assert compiled == ["first", "second"], compiled
    assert_close(f(x), want)  # plain
    assert dt.stats()["graphs"] == 3 and dt.stats()["recompiles"] == 0, dt.stats()
    assert len(dt.guards(jf1)) == len(dt.guards(jf2)) == 1 and len(dt.guards(f)) == 3


def _sin_plus_one(x):
    return x.sin() + 1


def test_compile_is_torch_compiles_spelling_of_jit():
    # dt.compile(model) / @dt.compile(...) take torch.compile's arguments: its modes and backend
    # names map onto dyntrace.jit's options; unknown ones raise; disable=True gives the model back.
    dt.reset()
    model = dt.nn.Linear(3, 2)
    x = rand_tensor((4, 3))
    compiled = dt.compile(model)
    assert isinstance(compiled, dt.CompiledFunction) and compiled(x).tolist() == model(x).tolist()
    assert "backend='auto'" in repr(compiled) and "backend='eager'" in repr(dt.compile(model, backend="aot_eager"))
    assert "backend='cpu'" in repr(dt.compile(model, backend="cpu"))
    for mode in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        f = dt.compile(fullgraph=True, mode=mode)(fresh_copy(_sin_plus_one))
        assert f(x).tolist() == _sin_plus_one(x).tolist(), mode
    assert dt.compile(model, disable=True) is model
    assert_raises(RuntimeError, dt.compile, model, mode="fast", match="Unrecognized mode='fast'")
    assert_raises(ValueError, dt.compile, model, backend="tvm", match="backend='tvm'")
    assert_raises(ValueError, dt.compile, model, options={"triton.cudagraphs": True}, match="Inductor")
    assert dt.stats()["graphs"] >= 1
    dt.compiler.reset()
    assert dt.stats()["graphs"] == 0

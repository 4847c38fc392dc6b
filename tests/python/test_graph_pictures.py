"""Graph pictures and the HTML report from Python: dt.graphs(fn, format="text" | "dot" | "svg")
(svg through Graphviz's dot command) and dt.report(path)."""
import os
import re
import tempfile

import dyntrace as dt
from jitlib import jitted_copy
from testlib import assert_raises, rand_tensor


def _block(x, w):
    h = dt.gelu(x @ w)
    return dt.softmax(h, dim=-1) + h.sum(0)


def _compiled_block():
    f = jitted_copy(_block)
    f(rand_tensor([3, 4]), rand_tensor([4, 5]))
    return f


def test_graphs_text_is_the_default():
    f = _compiled_block()
    text = dt.graphs(f)
    assert text == dt.graphs(f, format="text")
    assert len(text) == 1 and text[0].startswith("def _block("), text


def test_graphs_dot_has_one_node_per_op_and_edges_for_values():
    f = _compiled_block()
    [dot] = dt.graphs(f, format="dot")
    assert dot.startswith('digraph "_block" {') and dot.rstrip().endswith("}"), dot
    ops = re.findall(r'^  n\d+ \[shape=box.*label="(\w+)', dot, re.M)
    text_ops = [call.split("(")[0] for call in dt.graphs(f)[0].split("dyntrace.")[1:]]
    assert ops == text_ops, (ops, text_ops, dot)
    # inputs name their source and type; results carry dtype and shape
    assert re.search(r'in0 \[shape=ellipse.*label="input v0: f32\[3, 4\]\\nL\[\'x\'\]"', dot), dot
    assert re.search(r'label="matmul\\nv\d+: f32\[3, 5\]\\nline \d+"', dot), dot
    assert re.search(r'label="softmax\(dim=-1\)', dot), dot
    # every op is reached by an edge from an input or another op, and the output reaches return_
    for node in re.findall(r"^  (n\d+) \[", dot, re.M):
        assert re.search(rf"^  (in|n)\d+ -> {node} \[label=\"v\d+\"\];$", dot, re.M), (node, dot)
    assert re.search(r'-> return_ \[label="out 0: v\d+"\]', dot), dot


def test_graphs_dot_escapes_quotes_in_sources():
    f = jitted_copy(lambda d: d["a \"quoted\" key"] * 2)
    f({"a \"quoted\" key": rand_tensor([2])})
    [dot] = dt.graphs(f, format="dot")
    assert '\\"quoted\\"' in dot, dot


def test_graphs_svg_is_a_graphviz_picture():
    f = _compiled_block()
    [svg] = dt.graphs(f, format="svg")
    assert "<svg" in svg and svg.rstrip().endswith("</svg>"), svg[:300]
    for op in ("matmul", "gelu", "softmax", "return"):
        assert op in svg, op


def test_graphs_svg_without_graphviz_is_a_clear_error():
    f = _compiled_block()
    saved = os.environ.get("PATH")
    os.environ["PATH"] = tempfile.mkdtemp()  # an empty directory: no dot anywhere
    try:
        assert_raises(RuntimeError, dt.graphs, f, format="svg", match=("Graphviz", "dot", "graphviz"))
    finally:
        os.environ["PATH"] = saved


def test_graphs_unknown_format():
    f = _compiled_block()
    assert_raises(ValueError, dt.graphs, f, format="png", match=("'text', 'dot' or 'svg'", "png"))


def test_report_lists_compiled_frames():
    f = _compiled_block()
    path = os.path.join(tempfile.mkdtemp(), "report.html")
    dt.report(path)
    with open(path) as handle:
        html = handle.read()
    assert html.startswith("<!DOCTYPE html>"), html[:100]
    section = html[html.index("_block <small>"):]
    assert "def _block(" in section and "<svg" in section, section[:2000]
    assert "L[&#39;x&#39;] is a Tensor(float32" in section, section[:2000]
    assert_raises(TypeError, dt.report, 3)
    assert_raises(OSError, dt.report, os.path.join(path, "not", "a", "dir.html"))

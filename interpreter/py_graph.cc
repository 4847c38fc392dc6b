// interpreter/py_graph.cc: dyntrace.Graph, a captured graph as Python sees it (what a Python
// backend receives, and what graphs() shows).
#include <Python.h>

#include <memory>
#include <string>
#include <vector>

#include "interpreter/py_ref.h"
#include "interpreter/py_types.h"

namespace dt::interpreter::py {
namespace {

struct PyGraph {
  PyObject_HEAD
  std::shared_ptr<Graph> graph;
};

PyTypeObject GraphType = {PyVarObject_HEAD_INIT(nullptr, 0) "dyntrace.Graph"};

void GraphDealloc(PyObject* self) {
  reinterpret_cast<PyGraph*>(self)->graph.~shared_ptr<Graph>();
  Py_TYPE(self)->tp_free(self);
}

PyObject* GraphStr(PyObject* self) {
  return PyUnicode_FromString(reinterpret_cast<PyGraph*>(self)->graph->ToString().c_str());
}

PyObject* GraphRun(PyObject* self, PyObject* args) {
  const Graph& g = *reinterpret_cast<PyGraph*>(self)->graph;
  std::vector<Tensor> inputs;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    PyObject* a = PyTuple_GET_ITEM(args, i);
    if (!IsTensor(a)) {
      PyErr_Format(PyExc_TypeError, "Graph.run() expects tensors, got %s", Py_TYPE(a)->tp_name);
      return nullptr;
    }
    inputs.push_back(Unwrap(a));
  }
  auto outputs = g.RunEager(inputs);
  if (!outputs.ok()) return RaiseStatus(outputs.status());
  PyObject* list = PyList_New(0);
  for (const Tensor& t : *outputs) {
    PyRef w = PyRef::Steal(Wrap(t));
    PyList_Append(list, w.get());
  }
  return list;
}

PyObject* GraphNodes(PyObject* self, void*) {
  const Graph& g = *reinterpret_cast<PyGraph*>(self)->graph;
  PyObject* list = PyList_New(0);
  for (const Node& n : g.nodes()) {
    PyRef name = PyRef::Steal(PyUnicode_FromString((n.op->name() + (n.inplace ? "_" : "")).c_str()));
    PyList_Append(list, name.get());
  }
  return list;
}

PyObject* GraphInputs(PyObject* self, void*) {
  const Graph& g = *reinterpret_cast<PyGraph*>(self)->graph;
  PyObject* list = PyList_New(0);
  for (const std::string& s : g.input_sources()) {
    PyRef name = PyRef::Steal(PyUnicode_FromString(s.c_str()));
    PyList_Append(list, name.get());
  }
  return list;
}

PyMethodDef graph_methods[] = {
    {"run", GraphRun, METH_VARARGS, "run(*inputs): execute the graph op by op; returns the outputs"},
    {nullptr, nullptr, 0, nullptr},
};
PyGetSetDef graph_getset[] = {
    {"nodes", GraphNodes, nullptr, "op names, in order", nullptr},
    {"inputs", GraphInputs, nullptr, "where each input comes from (L['x'], G['w'] ...)", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

PyObject* WrapGraph(std::shared_ptr<Graph> graph) {
  auto* g = PyObject_New(PyGraph, &GraphType);
  if (g == nullptr) return nullptr;
  new (&g->graph) std::shared_ptr<Graph>(std::move(graph));
  return reinterpret_cast<PyObject*>(g);
}

bool InitGraphType(PyObject* module) {
  GraphType.tp_basicsize = sizeof(PyGraph);
  GraphType.tp_flags = Py_TPFLAGS_DEFAULT;
  GraphType.tp_dealloc = GraphDealloc;
  GraphType.tp_str = GraphStr;
  GraphType.tp_repr = GraphStr;
  GraphType.tp_methods = graph_methods;
  GraphType.tp_getset = graph_getset;
  GraphType.tp_doc = "A captured graph: str() shows its code, run(*inputs) executes it.";
  if (PyType_Ready(&GraphType) < 0) return false;
  return PyModule_AddObjectRef(module, "Graph", reinterpret_cast<PyObject*>(&GraphType)) >= 0;
}

}  // namespace dt::interpreter::py

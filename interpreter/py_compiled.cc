#include "interpreter/py_compiled.h"

#include <new>
#include <string>

#include "interpreter/py_ref.h"
#include "interpreter/py_str.h"

namespace dt::interpreter::py {
namespace {

struct PyCompiled {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* target;    // what a call calls
  PyCodeObject* root;  // the code of target's function (kept alive by target)
  JitOptions* options;
  CacheKey key;
  PyObject* dict;      // __name__, __doc__, __wrapped__ ... (functools.update_wrapper)
  PyObject* weakrefs;
};

PyTypeObject CompiledType = {PyVarObject_HEAD_INIT(nullptr, 0) "dyntrace.CompiledFunction"};

PyCompiled* AsCompiled(PyObject* obj) { return reinterpret_cast<PyCompiled*>(obj); }

// The Python function a call of `fn` starts in: fn itself, a bound method's function, or a
// model's __call__ (else its forward). Sets `target` to what the compiled function calls.
PyObject* RootFunction(PyObject* fn, PyObject** target) {
  *target = fn;
  if (PyFunction_Check(fn)) return fn;
  if (PyMethod_Check(fn) && PyFunction_Check(PyMethod_GET_FUNCTION(fn))) return PyMethod_GET_FUNCTION(fn);
  if (PyType_Check(fn)) return nullptr;
  PyRef call = PyRef::Steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(fn)), "__call__"));
  PyErr_Clear();
  if (call && PyFunction_Check(call.get())) return call.get();  // kept alive by the type
  PyRef forward = PyRef::Steal(PyObject_GetAttrString(fn, "forward"));
  PyErr_Clear();
  if (forward && PyMethod_Check(forward.get()) && PyFunction_Check(PyMethod_GET_FUNCTION(forward.get()))) {
    *target = forward.Release();  // the bound method: the call calls it (a new reference)
    return PyMethod_GET_FUNCTION(*target);
  }
  return nullptr;
}

PyObject* CompiledVectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  PyCompiled* c = AsCompiled(self);
  const ActiveMode mode{c->options, c->key, c->root};
  if (c->root->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) RecordGeneratorRoot(mode);
  EnterMode(mode);
  PyObject* result = PyObject_Vectorcall(c->target, args, nargsf, kwnames);
  ExitMode();
  return result;
}

int CompiledTraverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(AsCompiled(self)->target);
  Py_VISIT(AsCompiled(self)->dict);
  return 0;
}

int CompiledClear(PyObject* self) {
  Py_CLEAR(AsCompiled(self)->target);
  Py_CLEAR(AsCompiled(self)->dict);
  return 0;
}

void CompiledDealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  PyCompiled* c = AsCompiled(self);
  if (c->weakrefs != nullptr) PyObject_ClearWeakRefs(self);
  ResetKey(c->key);  // its entries can never be used again
  delete c->options;
  CompiledClear(self);
  Py_TYPE(self)->tp_free(self);
}

// A compiled function stored on a class binds like a function: `model.forward(x)`.
PyObject* CompiledDescrGet(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

PyObject* CompiledRepr(PyObject* self) {
  PyCompiled* c = AsCompiled(self);
  return PyUnicode_FromFormat("<dyntrace compiled %U (backend='%s')>", c->root->co_qualname,
                              c->options->backend.c_str());
}

PyObject* CompiledReset(PyObject* self, PyObject*) {
  ResetKey(AsCompiled(self)->key);
  Py_RETURN_NONE;
}

// What `self` was made from (functools' __wrapped__), borrowed; null when unknown.
PyObject* WrappedOf(PyObject* self) {
  PyObject* dict = AsCompiled(self)->dict;
  return dict != nullptr ? PyDict_GetItemString(dict, "__wrapped__") : nullptr;
}

// An attribute a compiled model lacks is the model's, read live (as torch.compile's
// OptimizedModule does): compiled.eval(), .parameters(), .state_dict(), .training act on the
// model. A compiled function keeps only its own attributes (functools.wraps copied the rest).
PyObject* CompiledGetAttr(PyObject* self, PyObject* name) {
  PyObject* found = PyObject_GenericGetAttr(self, name);
  if (found != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) return found;
  PyObject* wrapped = WrappedOf(self);
  if (wrapped == nullptr || PyFunction_Check(wrapped) || PyMethod_Check(wrapped)) return nullptr;
  PyErr_Clear();
  return PyObject_GetAttr(wrapped, name);
}

PyGetSetDef compiled_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef compiled_methods[] = {
    {"reset", CompiledReset, METH_NOARGS, "reset(): forget what this compiled function compiled"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

PyObject* NewCompiledFunction(PyObject* fn, const JitOptions& options) {
  PyObject* target = nullptr;
  PyObject* root = RootFunction(fn, &target);
  if (root == nullptr) {
    PyErr_Format(PyExc_TypeError,
                 "jit() expects a Python function, a method, or an object with a Python __call__ or "
                 "forward method; got %s",
                 Py_TYPE(fn)->tp_name);
    return nullptr;
  }
  PyRef owned_target = target == fn ? PyRef::Borrow(fn) : PyRef::Steal(target);
  PyCompiled* c = PyObject_GC_New(PyCompiled, &CompiledType);
  if (c == nullptr) return nullptr;
  c->vectorcall = CompiledVectorcall;
  c->target = owned_target.Release();
  c->root = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(root));
  c->options = new JitOptions(options);
  c->key = NewCacheKey();
  c->dict = nullptr;
  c->weakrefs = nullptr;
  PyObject_GC_Track(reinterpret_cast<PyObject*>(c));
  PyRef compiled = PyRef::Steal(reinterpret_cast<PyObject*>(c));
  // functools.wraps: __name__, __qualname__, __doc__, __module__, __dict__, __wrapped__. Of a
  // model (not a function), its __dict__ is not copied: its attributes are read live through
  // CompiledGetAttr, where a copy would go stale (`training` after .eval()).
  PyRef functools = PyRef::Steal(PyImport_ImportModule("functools"));
  const bool function = PyFunction_Check(fn) || PyMethod_Check(fn);
  PyRef assigned = functools ? PyRef::Steal(PyObject_GetAttrString(functools.get(), "WRAPPER_ASSIGNMENTS")) : PyRef();
  PyRef wrapped = !assigned ? PyRef()
                  : function ? PyRef::Steal(PyObject_CallMethod(functools.get(), "update_wrapper", "OO",
                                                                compiled.get(), fn))
                             : PyRef::Steal(PyObject_CallMethod(functools.get(), "update_wrapper", "OOO()",
                                                                compiled.get(), fn, assigned.get()));
  if (!wrapped) return nullptr;
  return compiled.Release();
}

bool IsCompiledFunction(PyObject* obj) { return Py_IS_TYPE(obj, &CompiledType); }
CacheKey KeyOf(PyObject* compiled) { return AsCompiled(compiled)->key; }
PyCodeObject* RootOf(PyObject* compiled) { return AsCompiled(compiled)->root; }
PyObject* TargetOf(PyObject* compiled) { return AsCompiled(compiled)->target; }
const JitOptions& OptionsOf(PyObject* compiled) { return *AsCompiled(compiled)->options; }

bool InitCompiledFunctionType(PyObject* module) {
  CompiledType.tp_basicsize = sizeof(PyCompiled);
  CompiledType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
  CompiledType.tp_vectorcall_offset = offsetof(PyCompiled, vectorcall);
  CompiledType.tp_call = PyVectorcall_Call;
  CompiledType.tp_dictoffset = offsetof(PyCompiled, dict);
  CompiledType.tp_weaklistoffset = offsetof(PyCompiled, weakrefs);
  CompiledType.tp_getattro = CompiledGetAttr;
  CompiledType.tp_setattro = PyObject_GenericSetAttr;
  CompiledType.tp_traverse = CompiledTraverse;
  CompiledType.tp_clear = CompiledClear;
  CompiledType.tp_dealloc = CompiledDealloc;
  CompiledType.tp_descr_get = CompiledDescrGet;
  CompiledType.tp_repr = CompiledRepr;
  CompiledType.tp_methods = compiled_methods;
  CompiledType.tp_getset = compiled_getset;
  CompiledType.tp_doc =
      "What dyntrace.jit(fn, **options) returns: calling it runs fn, and the frames fn calls, compiled "
      "under those options; fn itself stays plain.";
  if (PyType_Ready(&CompiledType) < 0) return false;
  return PyModule_AddObjectRef(module, "CompiledFunction", reinterpret_cast<PyObject*>(&CompiledType)) >= 0;
}

}  // namespace dt::interpreter::py

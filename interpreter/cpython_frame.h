// interpreter/cpython_frame.h: the only place dyntrace touches CPython internals.
//
// CPython 3.11 and 3.12 evaluate a Python function in a `_PyInterpreterFrame` that the PEP 523
// hook receives. dyntrace needs five things from it, behind this interface:
//   - installing the hook (_PyInterpreterState_SetEvalFrameFunc);
//   - the frame's code, function, globals, builtins and fast locals (its arguments at entry);
//   - running CPython's own evaluator on the frame (fallback);
//   - resuming the frame at a given instruction with values pushed on its stack ("hand-back"),
//     which is also how a compiled function returns: it resumes at the RETURN instruction with
//     the result on the stack, so CPython itself unwinds and frees the frame;
//   - a per-code-object slot (co_extra) for the code cache.
//
// The frame fields read are mirrored in cpython_frame_layout.h, checked at build time against
// CPython's internal pycore_frame.h (cpython_layout_check.cc). `localsplus` holds co_nlocalsplus
// locals/cells/free slots, then the value stack; `stacktop` is the stack depth counted from
// localsplus; `prev_instr` points at the code unit before the next instruction to run. The other
// internals dyntrace reads (type lookup without descriptors, instance dicts, local names, the
// trace function) are behind functions below, so nothing else in dyntrace touches them.
#ifndef DYNTRACE_INTERPRETER_CPYTHON_FRAME_H_
#define DYNTRACE_INTERPRETER_CPYTHON_FRAME_H_

#include <Python.h>

#include "absl/types/span.h"
#include "interpreter/cpython_frame_layout.h"

struct _PyInterpreterFrame;

namespace dt::interpreter::cpython {

using EvalFrameFn = PyObject* (*)(PyThreadState*, _PyInterpreterFrame*, int);

struct FrameView {
  PyCodeObject* code;    // borrowed
  PyObject* function;    // borrowed; the function object being called
  PyObject* globals;     // borrowed
  PyObject* builtins;    // borrowed
  PyObject** localsplus; // the fast locals; at entry, the arguments
};

// Inline: the hook calls it for every frame.
inline FrameView View(_PyInterpreterFrame* raw) {
  auto* f = reinterpret_cast<layout::Frame*>(raw);
  return FrameView{f->f_code, layout::FunctionOf(f), f->f_globals, f->f_builtins, f->localsplus};
}

// Installs `fn` as the interpreter's frame evaluator (null restores CPython's).
void SetEvalFrame(EvalFrameFn fn);
EvalFrameFn GetEvalFrame();

// A frame evaluator that only calls CPython's: the floor any PEP 523 hook pays (CPython stops
// inlining Python-to-Python calls while one is installed). bench/jit_overhead.py measures
// dyntrace's hook against it.
PyObject* NullEvalFrame(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwflag);

// Runs the frame from where it is with CPython's evaluator.
inline PyObject* EvalDefault(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwflag) {
  return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}

// Resumes the frame at the instruction starting at byte `offset` with `stack` pushed on its value
// stack (references are stolen). REQUIRES: the frame has not started running, and `stack` is what
// that instruction expects.
PyObject* ResumeAt(PyThreadState* tstate, _PyInterpreterFrame* frame, int offset,
                   absl::Span<PyObject* const> stack);

// Raises the pending Python exception from inside `frame` without running any of its code, so
// CPython unwinds and frees the frame and the traceback names it. REQUIRES: an exception is set.
PyObject* RaiseInFrame(PyThreadState* tstate, _PyInterpreterFrame* frame);

// Like RaiseInFrame, but as if the instruction at `offset` raised with `stack` on the value stack
// (references stolen): the frame's exception handlers for that instruction apply, and the
// traceback shows its line.
PyObject* RaiseAt(PyThreadState* tstate, _PyInterpreterFrame* frame, int offset,
                  absl::Span<PyObject* const> stack);

// Replaces the frame's fast locals with `values` (references stolen), releasing the old ones.
void WriteLocals(_PyInterpreterFrame* frame, absl::Span<PyObject* const> values);

// While a segment's escape runs (a call, a truth test, an iterator's next) on real values, the
// frame it escaped from must look to Python like the running frame, as it would under CPython:
// zero-argument super() reads its first argument and __class__ cell, sys._getframe(1),
// warnings' stacklevel and namedtuple's module lookup walk up to it, and the traceback of a
// nested error names its line. EnterForEscape links the frame as the thread's current frame,
// positioned at the instruction at byte `offset`, with `locals` (new references) as its fast
// locals and an empty value stack; it returns the frame that was current, which LeaveAfterEscape
// restores. REQUIRES: the frame is not running under CPython's evaluator.
_PyInterpreterFrame* EnterForEscape(PyThreadState* tstate, _PyInterpreterFrame* frame, int offset,
                                    absl::Span<PyObject* const> locals);
void LeaveAfterEscape(PyThreadState* tstate, _PyInterpreterFrame* previous);

// One level of recursion for a frame dyntrace runs, counted as CPython's evaluator counts a frame
// it enters. 3.11 has one counter for C calls and Python
// frames; 3.12 keeps them apart (sys.setrecursionlimit bounds only Python frames, and C calls
// stop at a fixed depth), so a frame counts on both there: counting only the C depth let
// `def f(): f()` recurse 1500 deep under any limit, and a doubly recursive function run for
// 2**1500 calls (regrtest test_exceptions). False: RecursionError is set and nothing is counted.
[[nodiscard]] bool EnterFrameDepth(PyThreadState* tstate);
void LeaveFrameDepth(PyThreadState* tstate);

// Internals the tracer and the hook read, kept here so that each is checked per version:
// The attribute `name` (a str) found on `type` or its bases without running descriptors
// (_PyType_Lookup); borrowed, or null. Never raises.
PyObject* LookupOnType(PyTypeObject* type, PyObject* name);
// The instance __dict__ of `obj` if it has one (_PyObject_GetDictPtr); borrowed, or null.
PyObject* InstanceDict(PyObject* obj);
// The name of local, cell or free slot `index` (co_localsplusnames); borrowed.
PyObject* LocalNameObject(PyCodeObject* code, int index);
// Whether Python code holds the frame's frame object (a traceback through an escaped call that
// raised, a callee frame's f_back, sys._getframe(1)): a frame object shows the frame's fast
// locals, while it runs and, copied into the object, after the frame ends.
bool FrameObjectShared(_PyInterpreterFrame* frame);
// Whether sys.settrace (or, with `profile`, also sys.setprofile) has a function installed.
bool TraceFunctionSet(PyThreadState* tstate, bool profile);

// co_extra: one index for dyntrace, requested once; `free_fn` runs when a code object dies.
void InitCodeExtra(freefunc free_fn);
Py_ssize_t CodeExtraIndex();
// Set by the first CodeExtraIndex() (InitCodeExtra's callers make it before any frame is seen).
extern Py_ssize_t code_extra_index;
// Inline: the hook calls it for every frame.
inline void* GetCodeExtra(PyCodeObject* code) {
  void* extra = nullptr;
  if (_PyCode_GetExtra(reinterpret_cast<PyObject*>(code), code_extra_index >= 0 ? code_extra_index : CodeExtraIndex(),
                       &extra) < 0) {
    PyErr_Clear();
    return nullptr;
  }
  return extra;
}
void SetCodeExtra(PyCodeObject* code, void* value);

// Another co_extra slot, for data that must die with its code object without keeping it alive
// or creating Python objects (a weak reference per code object would be one more object the
// traced program's gc.get_objects() sees). REQUIRES: the GIL.
class CodeExtraSlot {
 public:
  // Aborts when CPython has no index left. CPython calls `free_fn` for every slot of a dying code
  // object, with null where that slot was never set (this slot's and the hook's alike).
  explicit CodeExtraSlot(freefunc free_fn);
  void* Get(PyCodeObject* code) const;       // null when unset
  // False (nothing stored, no error left) when CPython refused.
  [[nodiscard]] bool Set(PyCodeObject* code, void* value) const;

 private:
  Py_ssize_t index_;
};

}  // namespace dt::interpreter::cpython

#endif  // DYNTRACE_INTERPRETER_CPYTHON_FRAME_H_

#include "interpreter/cpython_frame.h"

#include "interpreter/cpython_frame_layout.h"

#include <cstdio>
#include <cstdlib>

namespace dt::interpreter::cpython {
namespace {

using layout::Frame;
using layout::FunctionOf;

Frame* AsFrame(_PyInterpreterFrame* f) { return reinterpret_cast<Frame*>(f); }

}  // namespace


void SetEvalFrame(EvalFrameFn fn) {
  _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(),
                                       fn != nullptr ? fn : _PyEval_EvalFrameDefault);
}

EvalFrameFn GetEvalFrame() {
  return _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
}

PyObject* NullEvalFrame(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwflag) {
  return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}


namespace {
// Puts `stack` on the frame's value stack (stealing references) and points the frame at the
// instruction at byte `offset`: `at` = true makes it the instruction being executed (for
// raising), false the next one to execute (for resuming).
void PositionFrame(Frame* f, int offset, absl::Span<PyObject* const> stack, bool at) {
  const int nlocalsplus = f->f_code->co_nlocalsplus;
  for (size_t i = 0; i < stack.size(); ++i) f->localsplus[nlocalsplus + i] = stack[i];
  f->stacktop = nlocalsplus + static_cast<int>(stack.size());
  _Py_CODEUNIT* code = reinterpret_cast<_Py_CODEUNIT*>(f->f_code->co_code_adaptive);
  f->prev_instr = code + offset / static_cast<int>(sizeof(_Py_CODEUNIT)) - (at ? 0 : 1);
}
}  // namespace

PyObject* ResumeAt(PyThreadState* tstate, _PyInterpreterFrame* raw, int offset,
                   absl::Span<PyObject* const> stack) {
  PositionFrame(AsFrame(raw), offset, stack, /*at=*/false);
  return _PyEval_EvalFrameDefault(tstate, raw, 0);
}

PyObject* RaiseInFrame(PyThreadState* tstate, _PyInterpreterFrame* frame) {
  // The throw path (generator.throw) enters the frame's error handling before its first
  // instruction; no exception-table entry covers that point, so the frame unwinds.
  return _PyEval_EvalFrameDefault(tstate, frame, 1);
}

PyObject* RaiseAt(PyThreadState* tstate, _PyInterpreterFrame* raw, int offset,
                  absl::Span<PyObject* const> stack) {
  PositionFrame(AsFrame(raw), offset, stack, /*at=*/true);
  return _PyEval_EvalFrameDefault(tstate, raw, 1);
}

void WriteLocals(_PyInterpreterFrame* raw, absl::Span<PyObject* const> values) {
  Frame* f = AsFrame(raw);
  for (size_t i = 0; i < values.size(); ++i) {
    PyObject* old = f->localsplus[i];
    f->localsplus[i] = values[i];
    Py_XDECREF(old);
  }
}

_PyInterpreterFrame* EnterForEscape(PyThreadState* tstate, _PyInterpreterFrame* raw, int offset,
                                    absl::Span<PyObject* const> locals) {
  for (PyObject* o : locals) Py_XINCREF(o);
  WriteLocals(raw, locals);
  Frame* f = AsFrame(raw);
  PositionFrame(f, offset, {}, /*at=*/true);
  // tstate->cframe->current_frame is the frame Python code sees as running (sys._getframe,
  // super()); CPython's evaluator links a frame the same way when it starts running it.
  _PyInterpreterFrame* previous = tstate->cframe->current_frame;
  f->previous = reinterpret_cast<Frame*>(previous);
  tstate->cframe->current_frame = raw;
  return previous;
}

void LeaveAfterEscape(PyThreadState* tstate, _PyInterpreterFrame* previous) {
  tstate->cframe->current_frame = previous;
}

namespace {
freefunc code_extra_free = nullptr;
}  // namespace

void InitCodeExtra(freefunc free_fn) { code_extra_free = free_fn; }

Py_ssize_t code_extra_index = -1;

Py_ssize_t CodeExtraIndex() {
  static Py_ssize_t index = [] {
    Py_ssize_t i = _PyEval_RequestCodeExtraIndex(code_extra_free);
    if (i < 0) {
      std::fprintf(stderr, "dyntrace: no co_extra index available\n");
      std::abort();
    }
    return i;
  }();
  code_extra_index = index;
  return index;
}

void SetCodeExtra(PyCodeObject* code, void* value) {
  if (_PyCode_SetExtra(reinterpret_cast<PyObject*>(code), CodeExtraIndex(), value) < 0) {
    PyErr_Clear();
  }
}

CodeExtraSlot::CodeExtraSlot(freefunc free_fn) : index_(_PyEval_RequestCodeExtraIndex(free_fn)) {
  if (index_ < 0) {
    std::fprintf(stderr, "dyntrace: no co_extra index available\n");
    std::abort();
  }
}

void* CodeExtraSlot::Get(PyCodeObject* code) const {
  void* extra = nullptr;
  if (_PyCode_GetExtra(reinterpret_cast<PyObject*>(code), index_, &extra) < 0) {
    PyErr_Clear();
    return nullptr;
  }
  return extra;
}

bool CodeExtraSlot::Set(PyCodeObject* code, void* value) const {
  if (_PyCode_SetExtra(reinterpret_cast<PyObject*>(code), index_, value) < 0) {
    PyErr_Clear();
    return false;
  }
  return true;
}

PyObject* LookupOnType(PyTypeObject* type, PyObject* name) {
  PyObject* found = _PyType_Lookup(type, name);
  PyErr_Clear();  // 3.11 may leave an error from a failed hash
  return found;
}

PyObject* InstanceDict(PyObject* obj) {
  PyObject** dict = _PyObject_GetDictPtr(obj);
  PyErr_Clear();
  return dict != nullptr ? *dict : nullptr;
}

PyObject* LocalNameObject(PyCodeObject* code, int index) {
  return PyTuple_GET_ITEM(code->co_localsplusnames, index);
}

bool FrameObjectShared(_PyInterpreterFrame* frame) {
  // The interpreter frame owns one reference to its frame object (frame_obj), made when Python
  // first asked for the object; any other is Python's.
  PyFrameObject* obj = AsFrame(frame)->frame_obj;
  return obj != nullptr && Py_REFCNT(obj) > 1;
}

bool TraceFunctionSet(PyThreadState* tstate, bool profile) {
  return tstate->c_tracefunc != nullptr || (profile && tstate->c_profilefunc != nullptr);
}

bool EnterFrameDepth(PyThreadState* tstate) {
  if (Py_EnterRecursiveCall("") != 0) return false;  // the evaluator's own message on 3.11
#if PY_VERSION_HEX >= 0x030C0000
  // As _Py_EnterRecursivePy: past the limit only while an earlier RecursionError is being
  // handled (recursion_headroom), and then by at most 50 frames.
  --tstate->py_recursion_remaining;
  const bool handling_overflow = tstate->recursion_headroom > 0;
  if (tstate->py_recursion_remaining < (handling_overflow ? -50 : 0)) {
    ++tstate->py_recursion_remaining;
    Py_LeaveRecursiveCall();
    ++tstate->recursion_headroom;
    PyErr_SetString(PyExc_RecursionError, "maximum recursion depth exceeded");
    --tstate->recursion_headroom;
    return false;
  }
#else
  (void)tstate;
#endif
  return true;
}

void LeaveFrameDepth(PyThreadState* tstate) {
#if PY_VERSION_HEX >= 0x030C0000
  ++tstate->py_recursion_remaining;
#else
  (void)tstate;
#endif
  Py_LeaveRecursiveCall();
}

}  // namespace dt::interpreter::cpython

// interpreter/cpython_frame_layout.h: dyntrace's mirror of the leading fields of CPython's
// _PyInterpreterFrame (Include/internal/pycore_frame.h), per version. Only cpython_frame.cc
// reads frames through it; cpython_layout_check.cc compiles against CPython's internal header and
// static_asserts every mirrored field's offset and type size, so a layout change in a new patch
// release fails the build instead of corrupting frames.
#ifndef DYNTRACE_INTERPRETER_CPYTHON_FRAME_LAYOUT_H_
#define DYNTRACE_INTERPRETER_CPYTHON_FRAME_LAYOUT_H_

#include <Python.h>

#include <cstdint>

namespace dt::interpreter::cpython::layout {

#if PY_VERSION_HEX >= 0x030D0000
#error "dyntrace supports CPython 3.11 and 3.12"
#elif PY_VERSION_HEX >= 0x030C0000
struct Frame {
  PyCodeObject* f_code;
  Frame* previous;
  PyObject* f_funcobj;
  PyObject* f_globals;
  PyObject* f_builtins;
  PyObject* f_locals;
  PyFrameObject* frame_obj;
  _Py_CODEUNIT* prev_instr;
  int stacktop;
  uint16_t return_offset;
  char owner;
  PyObject* localsplus[1];
};
inline PyObject* FunctionOf(Frame* f) { return f->f_funcobj; }
#elif PY_VERSION_HEX >= 0x030B0000
struct Frame {
  PyFunctionObject* f_func;
  PyObject* f_globals;
  PyObject* f_builtins;
  PyObject* f_locals;
  PyCodeObject* f_code;
  PyFrameObject* frame_obj;
  Frame* previous;
  _Py_CODEUNIT* prev_instr;
  int stacktop;
  bool is_entry;
  char owner;
  PyObject* localsplus[1];
};
inline PyObject* FunctionOf(Frame* f) { return reinterpret_cast<PyObject*>(f->f_func); }
#else
#error "dyntrace supports CPython 3.11 and 3.12"
#endif


}  // namespace dt::interpreter::cpython::layout

#endif  // DYNTRACE_INTERPRETER_CPYTHON_FRAME_LAYOUT_H_

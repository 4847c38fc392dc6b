// interpreter/cpython_layout_check.cc: the frame mirror (cpython_frame_layout.h) checked against
// CPython's own definition. This file alone is compiled as part of the core (Py_BUILD_CORE) to
// see _PyInterpreterFrame; it defines nothing.
#define Py_BUILD_CORE 1
#include <Python.h>

#include <cstddef>

#include "internal/pycore_frame.h"
#include "interpreter/cpython_frame_layout.h"

namespace dt::interpreter::cpython::layout {
namespace {

#define DT_SAME_FIELD(field)                                                         \
  static_assert(offsetof(Frame, field) == offsetof(_PyInterpreterFrame, field),      \
                "_PyInterpreterFrame::" #field " moved: update cpython_frame_layout.h"); \
  static_assert(sizeof(Frame::field) == sizeof(_PyInterpreterFrame::field),          \
                "_PyInterpreterFrame::" #field " changed size: update cpython_frame_layout.h")

#if PY_VERSION_HEX >= 0x030C0000
DT_SAME_FIELD(f_code);
DT_SAME_FIELD(previous);
DT_SAME_FIELD(f_funcobj);
DT_SAME_FIELD(f_globals);
DT_SAME_FIELD(f_builtins);
DT_SAME_FIELD(f_locals);
DT_SAME_FIELD(frame_obj);
DT_SAME_FIELD(prev_instr);
DT_SAME_FIELD(stacktop);
DT_SAME_FIELD(return_offset);
DT_SAME_FIELD(owner);
DT_SAME_FIELD(localsplus);
#else
DT_SAME_FIELD(f_func);
DT_SAME_FIELD(f_globals);
DT_SAME_FIELD(f_builtins);
DT_SAME_FIELD(f_locals);
DT_SAME_FIELD(f_code);
DT_SAME_FIELD(frame_obj);
DT_SAME_FIELD(previous);
DT_SAME_FIELD(prev_instr);
DT_SAME_FIELD(stacktop);
DT_SAME_FIELD(is_entry);
DT_SAME_FIELD(owner);
DT_SAME_FIELD(localsplus);
#endif

#undef DT_SAME_FIELD

}  // namespace
}  // namespace dt::interpreter::cpython::layout

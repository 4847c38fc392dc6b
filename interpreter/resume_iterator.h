// interpreter/resume_iterator.h: the iterator a loop's state becomes when it crosses a break.
//
// When a graph break happens inside a `for` loop, the loop's iterator (symbolic during tracing)
// must become a real object in the frame state. A ResumeIterator is a plain iterator over a
// tuple of the remaining items, so CPython's FOR_ITER can continue it after a hand-back, and the
// tracer (and guards) can read the remaining items without running Python code when the next
// segment starts, so the loop keeps running as compiled segments.
#ifndef DYNTRACE_INTERPRETER_RESUME_ITERATOR_H_
#define DYNTRACE_INTERPRETER_RESUME_ITERATOR_H_

#include <Python.h>

namespace dt::interpreter::py {

// Steals `items` (a tuple). Null with a Python error on failure.
PyObject* NewResumeIterator(PyObject* items);
// Readies the type and registers it with guards/ as an iterator whose items can be read.
[[nodiscard]] bool InitResumeIterator();

}  // namespace dt::interpreter::py

#endif  // DYNTRACE_INTERPRETER_RESUME_ITERATOR_H_

// interpreter/resume_iterator.h: the iterator a loop's state becomes when it crosses a break.
//
// When a graph break happens inside a `for` loop, the loop's iterator (symbolic during tracing)
// must become a real object in the frame state. A ResumeIterator continues the loop the way the
// loop's own iterator would: over a tuple of the remaining items (a loop over a tuple, a range,
// a tensor ...), or live over a list or dict at a position, exactly as CPython's list and dict
// iterators do (a list appended to inside the loop yields the new items; a dict that changes size
// raises RuntimeError). CPython's FOR_ITER continues it after a hand-back, and the tracer (and
// guards) read its remaining items without running Python code when the next segment starts, so
// the loop keeps running as compiled segments.
#ifndef DYNTRACE_INTERPRETER_RESUME_ITERATOR_H_
#define DYNTRACE_INTERPRETER_RESUME_ITERATOR_H_

#include <Python.h>

namespace dt::interpreter::py {

// Over a tuple of the remaining items. Steals `items`. Null with a Python error on failure.
PyObject* NewResumeIterator(PyObject* items);
// Live over a list or dict (borrowed), `position` items in. For a dict, fails with a Python
// error if it has fewer than `position` entries.
PyObject* NewLiveResumeIterator(PyObject* container, Py_ssize_t position);
// A new iterator continuing `iterator` (a ResumeIterator) `n` items further on. The original is
// left as it was: sources of the segment's inputs still read its items from where it stood.
PyObject* AdvancedResumeIterator(PyObject* iterator, Py_ssize_t n);
// Readies the type and registers it with guards/ as an iterator whose items can be read.
[[nodiscard]] bool InitResumeIterator();

}  // namespace dt::interpreter::py

#endif  // DYNTRACE_INTERPRETER_RESUME_ITERATOR_H_

// interpreter/symbolic.h: the values the tracer keeps on its symbolic stack and in locals.
//
// A Sym stands for a Python value during tracing: a constant known at trace time (guarded when it
// came from the frame), a tensor (a graph value with a meta tensor for shape inference), a
// container of Syms, or a callable the tracer knows how to follow. `source` is set for values read
// from the frame; it is what guards check and how outputs that are inputs are returned as the very
// same objects.
#ifndef DYNTRACE_INTERPRETER_SYMBOLIC_H_
#define DYNTRACE_INTERPRETER_SYMBOLIC_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "graph/graph.h"
#include "guards/source.h"
#include "interpreter/py_ref.h"

namespace dt::interpreter::trace {

enum class SymKind : uint8_t {
  kConst,        // obj: the value
  kTensor,       // value + meta
  kTuple,        // items
  kList,         // items (mutable only when made by the trace)
  kDict,         // keys (constants) + items
  kNull,         // the NULL CPython pushes before some calls
  kIter,         // items left to yield
  kCell,         // items[0]: contents (or null when empty)
  kBoundMethod,  // obj: the function; items[0]: self
  kOpMethod,     // obj: a dyntrace op function; items[0]: the bound tensor (if any)
  kFunction,     // a user function: obj = function object, or code when made by MAKE_FUNCTION
  kObject,       // obj: an object from the frame whose attributes the trace reads; keys + items:
                 // attributes the trace stored on it (names, values), replayed after the graph
  kSlice,        // items: start, stop, step
  kShape,        // items[0]: the tensor whose .shape this is
  kNumber,       // a Python number known only at run time: scalar slot `value`, obj: trace-time value
  kRunIter,      // an iterator from the segment's start state, advanced only at run time (source)
  kSuper,        // super(obj, items[0]): obj the class whose MRO successors are searched, items[0] self
  kSet,          // a set the trace made: keys = its history of steps (py_types.h ReplaySet)
  kPartial,      // functools.partial: items = [func, args..., keyword values...], keys = keyword names
  kGenManager,   // a contextlib.contextmanager manager the trace made: items[0] the generator
                 // function; position: its frame (Tracer::manager_frames_); consumed: entered, exited
  kRunSeq,       // a caller's list or tuple whose length is a run-time value: obj the real one,
                 // items what the trace appended, value its number-program slot (or -1)
                 // (trace_run_sequence.cc)
};

struct SymValue;
using Sym = std::shared_ptr<SymValue>;

struct SymValue {
  SymKind kind;
  py::PyRef obj;
  ValueId value = -1;
  Tensor meta;
  std::vector<Sym> items;
  std::vector<py::PyRef> keys;
  guards::SourceRef source;
  // kBoundMethod of a method found on the object's class: where its function is
  // (type(obj).name), so the inlined method reads its closure cells and defaults through it (a
  // method of a class defined inside a function closes over that function's variables).
  guards::SourceRef function_source;
  // Functions made by MAKE_FUNCTION: defaults tuple, kw-defaults dict, closure tuple of cells.
  Sym defaults, kwdefaults, closure;
  PyObject* globals = nullptr;  // borrowed: the globals a kFunction made in the trace runs with
  bool from_frame = false;      // a container read from the frame: mutating it is a side effect
  // A NULL pushed by LOAD_METHOD (3.12: a method LOAD_ATTR) below the attribute: a CALL consumes
  // it, so a break may rewrite [NULL, bound method] to CPython's [function, self]. Not a NULL from
  // PUSH_NULL, which CALL_FUNCTION_EX requires to stay NULL below a bound method object.
  bool method_call_slot = false;
  // A kIter that only a for loop sees (made by GET_ITER, or a resume iterator read back): at a
  // break it may be rebuilt as a resume iterator. Iterators user code holds (zip(), enumerate(),
  // reversed() results) must keep their type, so they cannot cross a break.
  bool loop_iterator = false;
  // A kIter standing for a dict view (keys(), values(), items()): iterable but not an iterator,
  // so next() of it raises and iter() of it is a new iterator.
  bool dict_view = false;
  bool keys_view = false;
  // A kIter a generator run by the trace made: what the generator returned (null: None), which
  // `yield from` of it evaluates to.
  Sym returned;  // dict_view: keys(), whose items are the keys (constants) in order
  // That generator raised an exception it made after its last yield: the last item is that
  // exception, raised (trace_exceptions.cc) when the consumer asks for it.
  bool raises_when_exhausted = false;
  // A loop's iterator over a list or dict reads its container live, as CPython's do: `over` is
  // the container, `position` the index of the next item (a list that grows while it is iterated
  // yields the new items; one that shrinks ends early). For a dict, `keys_at_start` are its keys
  // when iteration began: CPython raises once its size changes.
  Sym over;
  size_t position = 0;
  std::vector<py::PyRef> keys_at_start;
  // A loop iterator read back from the frame (a ResumeIterator): how many items this segment
  // consumed, so a break hands on that very object advanced as far (keeping it live).
  bool resumed = false;
  size_t consumed = 0;
  // A kIter reversed() made of the list or tuple `reversed_of`, whose items were then
  // `reversed_items` (rebuilt at a break as reversed() of it, advanced past what was taken).
  Sym reversed_of;
  std::vector<Sym> reversed_items;
  // A kIter zip() or enumerate() made over at least one iterator: read lazily, as CPython's
  // are, one item of each source per step in order (so an iterator also read elsewhere, as in
  // `zip(range(n), it)` then `for x in it`, is left where CPython leaves it). enumerate's
  // count starts at `enumerate_start` (null for zip) and runs on `consumed`.
  std::vector<Sym> zip_sources;
  py::PyRef enumerate_start;
  // A kObject the traced code made by calling its class (trace_objects.cc): `obj` is a blank
  // instance standing for it, `keys`/`items` its attributes; built for real when it leaves.
  bool made_by_trace = false;
  // A kConst exception the traced code made (made_by_trace) that a traced handler caught: in
  // CPython it now has a traceback and context, so it never leaves the trace.
  bool caught = false;
  guards::SourceRef class_source;  // made_by_trace: where its class was read (null: unknown)
  // A loop's iterator over a set the trace made: the set, whose history at GET_ITER is
  // keys_at_start. CPython's set iterator raises once the size changes, and follows the table
  // when it changes at the same size (then the trace stops).
  Sym iterated_set;
  // A kTuple of an op's named results (`x.max(1)`): their named-tuple type, which Python sees and
  // whose fields (`.values`) read items; null for plain tuples.
  py::PyRef named_type;
  // A kObject that is a dict of the caller keyed by tensors (trace_keyed_dict.cc): the keys the
  // trace looked up or stored (kLists of (key, value) kTuples), null until then.
  Sym keyed_entries, keyed_writes;
  // When MakeSym made it (increasing): a generator's run tells the containers it made itself
  // from older ones (Tracer::RunGenerator).
  uint64_t serial = 0;
};

// The next MakeSym's serial.
inline std::atomic<uint64_t> next_sym_serial{1};

inline Sym MakeSym(SymKind kind) {
  auto s = std::make_shared<SymValue>();
  s->kind = kind;
  s->serial = next_sym_serial.fetch_add(1, std::memory_order_relaxed);
  return s;
}
inline Sym ConstSym(py::PyRef obj) {
  Sym s = MakeSym(SymKind::kConst);
  s->obj = std::move(obj);
  return s;
}

}  // namespace dt::interpreter::trace

#endif  // DYNTRACE_INTERPRETER_SYMBOLIC_H_

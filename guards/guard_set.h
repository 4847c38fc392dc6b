// guards/guard_set.h: the conditions under which a captured graph may be reused.
//
// A GuardSet is a list of leaf guards, each a pure predicate on the value at one Source, checked
// in order without calling Python code: exact type, identity, equality with a constant of a
// builtin type, sequence length, that two sources are different objects, and a tensor's dtype/device/rank/size-1 dims/layout (plus exact
// sizes for the dims the traced code read). Check() is the fast path; Explain() is a separate const
// path that returns the first failure as "expected X, actual Y" and changes nothing.
//
// Every guard keeps the source line and instruction that required it, so listings say why it
// exists:
//   L['x'] is a Tensor(float32, cpu, ndim=2, size-1 dims=[-, -], contiguous)  # line 3: LOAD_FAST x
#ifndef DYNTRACE_GUARDS_GUARD_SET_H_
#define DYNTRACE_GUARDS_GUARD_SET_H_

#include <Python.h>

#include <optional>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "guards/source.h"
#include "runtime/tensor.h"

namespace dt::guards {

// Whether repr(obj) runs only CPython's own code: builtin types all the way down (a heap type's
// repr, or a module subclass's attribute lookups, is the program's code, which tracing and
// messages must not run). Messages print `<Type object>` otherwise.
bool ReprRunsNoUserCode(PyObject* obj, int depth = 0);

// How the interpreter layer recognises its tensors; set once at module start-up.
using TensorOf = const Tensor* (*)(PyObject* obj);
void SetTensorRecogniser(TensorOf fn);

// Memory-order class of a tensor, guarded so layout-specialised kernels stay valid.
enum class Layout : uint8_t { kContiguous, kDense, kStrided };
Layout LayoutOf(const Tensor& t);

struct Provenance {
  int line = -1;
  int offset = -1;
  std::string instruction;  // "LOAD_FAST x"
};

struct TensorProperties {
  DType dtype;
  Device device;
  int64_t ndim;
  std::vector<bool> size_is_one;
  Layout layout;
  // Grad mode is on and the tensor requires grad: the call must run eagerly so autograd records
  // it (compiled graphs record nothing), so a trace only ever holds tensors without it.
  bool tracks_grad = false;
};

// Whether `list` is a list that list.sort is sorting now (it reads as empty until the sort ends).
bool IsBeingSorted(PyObject* list);

class LeafGuard {
 public:
  enum class Kind : uint8_t { kType, kIdentity, kEquals, kLength, kTensor, kTensorSize, kAbsent, kRelation, kNotSame, kSame, kKeys,
                           kNotSorting };
  // Evaluates a relation on the frame's values; nullopt when it cannot (a value is gone).
  using RelationFn = std::function<std::optional<bool>(const FrameInputs&)>;

  static LeafGuard Type(SourceRef source, PyTypeObject* type, Provenance where);
  static LeafGuard Identity(SourceRef source, PyObject* expected, Provenance where);
  // REQUIRES: `expected` is an int, float, str or bytes (compared without running Python code).
  static LeafGuard Equals(SourceRef source, PyObject* expected, Provenance where);
  static LeafGuard Length(SourceRef source, Py_ssize_t length, Provenance where);
  // A list or tuple whose length is a run-time value of the trace (a caller's list that grows
  // between calls): only its lower bound is guarded.
  static LeafGuard LengthAtLeast(SourceRef source, Py_ssize_t min, Provenance where);
  static LeafGuard TensorMatch(SourceRef source, const Tensor& example, Provenance where);
  static LeafGuard TensorSize(SourceRef source, int64_t dim, int64_t size, Provenance where);
  // A size that is a run-time value of the trace (a dynamic size): only its lower bound is
  // guarded (sizes 0 and 1 stay specialised, as in PyTorch).
  static LeafGuard TensorSizeAtLeast(SourceRef source, int64_t dim, int64_t min, Provenance where);
  // Passes when `relation` evaluates to `holds` (a branch on symbolic sizes or dynamic numbers:
  // `L['x'].size(1) > 64`). `source` is one of the values it reads; `expression` its code.
  static LeafGuard Relation(SourceRef source, std::string expression, bool holds,
                            std::shared_ptr<const RelationFn> relation, Provenance where);
  // Passes when the source does not exist (no global shadows a builtin).
  static LeafGuard Absent(SourceRef source, Provenance where);
  // Passes when `source` and `other` are two different objects: a trace that changes a container
  // of the caller relies on no other name of the caller reaching that same container.
  static LeafGuard NotSame(SourceRef source, SourceRef other, Provenance where);
  // Passes when `source` and `other` are one object: a trace that reached an object two ways
  // (a with block's bound __exit__ on the stack, and the manager's own name) keeps one Sym for it.
  static LeafGuard Same(SourceRef source, SourceRef other, Provenance where);
  // Passes when the source is a dict whose keys are the str keys of the tuple `keys`, in that
  // order: a trace that iterates a dict of the caller relies on its order.
  static LeafGuard KeysInOrder(SourceRef source, PyObject* keys, Provenance where);
  // Passes when the source is a list that list.sort is not sorting right now. While CPython sorts
  // a list it empties it and marks it (`allocated == -1`), and after the sort it raises
  // "list modified during sort" when the mark is gone, which any change made by CPython's list
  // operations does. A trace that changes a caller's list replays only its final contents, which
  // for `L.append(3); L.pop()` on the emptied list are the same and leave the mark: so such a
  // trace may only run on a list that is not being sorted, and CPython makes the changes otherwise.
  static LeafGuard NotSorting(SourceRef source, Provenance where);

  // REQUIRES: the GIL. Never raises.
  bool Check(const FrameInputs& frame) const;
  // Why Check() fails: "L['x'].dtype: expected float32, actual int64"; nullopt when it passes.
  std::optional<std::string> Explain(const FrameInputs& frame) const;
  // The guard as one line of code with its provenance comment.
  std::string ToString() const;
  const Source& source() const { return *source_; }
  Kind kind() const { return kind_; }
  int64_t dim() const { return dim_; }  // kTensorSize
  Py_ssize_t length() const { return length_; }  // kLength
  bool at_least() const { return at_least_; }  // kLength, kTensorSize

 private:
  LeafGuard(Kind kind, SourceRef source, Provenance where)
      : kind_(kind), source_(std::move(source)), where_(std::move(where)) {}
  bool CheckValue(PyObject* value) const;

  Kind kind_;
  SourceRef source_;
  SourceRef other_;  // kNotSame, kSame
  Provenance where_;
  PyTypeObject* type_ = nullptr;
  // kType, kIdentity, kEquals: the expected object. Held through `weak_expected_` (an owned weak
  // reference; `expected_` then borrowed) when its type supports weak references, so guards do
  // not keep functions and classes alive (a cache entry lives as long as its code object); the
  // guard fails once the object is gone, so a reused address never passes. Otherwise owned.
  PyObject* expected_ = nullptr;
  PyObject* weak_expected_ = nullptr;
  void Hold(PyObject* obj);
  // `expected_`, or null when it was held weakly and has died.
  PyObject* LiveExpected() const;
  Py_ssize_t length_ = 0;
  TensorProperties tensor_{};
  int64_t dim_ = 0, size_ = 0;
  bool at_least_ = false;  // kTensorSize: size(dim) >= size_; kLength: len >= length_
  std::shared_ptr<const RelationFn> relation_;  // kRelation
  std::string expression_;
  bool holds_ = true;

 public:
  LeafGuard(const LeafGuard& other);
  LeafGuard& operator=(const LeafGuard& other);
  ~LeafGuard();
};

class GuardSet {
 public:
  // Adds a guard unless an identical one (same text) is already present.
  void Add(LeafGuard guard);
  bool Check(const FrameInputs& frame) const;
  // The first failing guard: its failure ("L['x'].dtype: expected float32, actual float64"),
  // then "; failed guard: " and the guard's line with its provenance. nullopt when all pass.
  std::optional<std::string> Explain(const FrameInputs& frame) const;
  // The first guard that fails, or null.
  const LeafGuard* FirstFailing(const FrameInputs& frame) const;
  // Every failing guard, for the recompile policy; relations after the first failure are not asked.
  std::vector<const LeafGuard*> Failing(const FrameInputs& frame) const;
  std::vector<std::string> Lines() const;
  size_t size() const { return guards_.size(); }
  // Drops guards added after the first `n`, except tensor guards (their tensors stay graph inputs).
  void RollBack(size_t n);

 private:
  std::vector<LeafGuard> guards_;
  // The default float dtype when the trace began: every Python float and dtype-less float factory
  // in the graph was typed by it, so the set fails once set_default_dtype changed it. Not a leaf
  // guard, because it looks at no frame value.
  DType default_float_ = DefaultFloat();
  // Each guard's text, made once when it is added (it may call repr(), which must not happen
  // later while frames are being traced).
  std::vector<std::string> texts_;
  std::vector<std::string> keys_;
};

}  // namespace dt::guards

#endif  // DYNTRACE_GUARDS_GUARD_SET_H_

#include "guards/guard_set.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/autograd_meta.h"
#include "absl/strings/str_join.h"

namespace dt::guards {

bool ReprRunsNoUserCode(PyObject* obj, int depth) {
  PyTypeObject* type = Py_TYPE(obj);
  if (PyType_Check(obj)) return type->tp_repr == PyType_Type.tp_repr;  // `<class 'm.C'>` from its dict
  // A class of the program's (a module subclass with its own __getattribute__, a user
  // __repr__) could run anything; builtin containers repr their items.
  if (PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE) || depth > 4) return false;
  if (PyTuple_CheckExact(obj) || PyList_CheckExact(obj)) {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(obj); ++i) {
      if (!ReprRunsNoUserCode(PySequence_Fast_GET_ITEM(obj, i), depth + 1)) return false;
    }
    return true;
  }
  if (PyDict_CheckExact(obj)) {
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(obj, &pos, &key, &value)) {
      if (!ReprRunsNoUserCode(key, depth + 1) || !ReprRunsNoUserCode(value, depth + 1)) return false;
    }
    return true;
  }
  // Sets, views and other builtin containers of unknown items; a type's repr reads attributes
  // its metaclass (a heap type, above) could compute.
  return !PyAnySet_Check(obj) && !PyDictViewSet_Check(obj) && !PyDictValues_Check(obj);
}

namespace {

TensorOf tensor_recogniser = nullptr;

std::string Repr(PyObject* obj) {
  if (obj == nullptr) return "<missing>";
  if (!ReprRunsNoUserCode(obj)) return absl::StrCat("<", Py_TYPE(obj)->tp_name, " object>");
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);  // keep any pending error intact
  PyObject* r = PyObject_Repr(obj);
  std::string text = "<unprintable>";
  if (r != nullptr) {
    // Checked: a repr holding a lone surrogate has no UTF-8 text.
    Py_ssize_t size = 0;
    if (const char* utf8 = PyUnicode_AsUTF8AndSize(r, &size)) {
      text.assign(utf8, size);
    } else {
      PyErr_Clear();
    }
    Py_DECREF(r);
  } else {
    PyErr_Clear();
  }
  PyErr_Restore(type, value, tb);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

const char* LayoutName(Layout l) {
  switch (l) {
    case Layout::kContiguous: return "contiguous";
    case Layout::kDense: return "dense";
    case Layout::kStrided: return "strided";
  }
  __builtin_unreachable();
}

std::string Describe(const TensorProperties& p) {
  std::vector<std::string> ones;
  for (bool one : p.size_is_one) ones.push_back(one ? "1" : "-");
  return absl::StrFormat("Tensor(%s, %s, ndim=%d, size-1 dims=[%s], %s)", DTypeName(p.dtype),
                         p.device.ToString(), p.ndim, absl::StrJoin(ones, ", "),
                         LayoutName(p.layout));
}

TensorProperties PropertiesOf(const Tensor& t) {
  TensorProperties p{t.dtype(), t.device(), t.ndim(), {}, LayoutOf(t), TracksGrad(t)};
  for (int64_t s : t.sizes()) p.size_is_one.push_back(s == 1);
  return p;
}

// Same-type scalar comparison in C, for the builtin types Equals() accepts.
bool SameConstant(PyObject* a, PyObject* b) {
  if (Py_TYPE(a) != Py_TYPE(b)) return false;
  if (PyLong_CheckExact(a)) {
    int overflow_a = 0, overflow_b = 0;
    const long long x = PyLong_AsLongLongAndOverflow(a, &overflow_a);
    const long long y = PyLong_AsLongLongAndOverflow(b, &overflow_b);
    if (overflow_a || overflow_b) return PyObject_RichCompareBool(a, b, Py_EQ) == 1;  // exact ints: no user code
    return x == y;
  }
  if (PyFloat_CheckExact(a)) {
    // The same bits: 0.0 == -0.0, but float.hex, copysign, 1/x and str tell them apart (CPython's
    // test_float roundtrip of -0.0 passed a guard traced with 0.0).
    const double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
    return std::memcmp(&x, &y, sizeof(double)) == 0;
  }
  if (PyUnicode_CheckExact(a)) return PyUnicode_Compare(a, b) == 0;
  if (PyBytes_CheckExact(a)) {
    return PyBytes_GET_SIZE(a) == PyBytes_GET_SIZE(b) &&
           std::memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), PyBytes_GET_SIZE(a)) == 0;
  }
  return a == b;
}

}  // namespace

void SetTensorRecogniser(TensorOf fn) { tensor_recogniser = fn; }

Layout LayoutOf(const Tensor& t) {
  if (t.is_contiguous()) return Layout::kContiguous;
  if (t.is_non_overlapping_and_dense()) return Layout::kDense;
  return Layout::kStrided;
}

LeafGuard::LeafGuard(const LeafGuard& other)
    : kind_(other.kind_),
      source_(other.source_),
      other_(other.other_),
      where_(other.where_),
      type_(other.type_),
      expected_(other.expected_),
      weak_expected_(other.weak_expected_),
      length_(other.length_),
      tensor_(other.tensor_),
      dim_(other.dim_),
      size_(other.size_),
      at_least_(other.at_least_),
      relation_(other.relation_),
      expression_(other.expression_),
      holds_(other.holds_) {
  Py_XINCREF(weak_expected_ != nullptr ? weak_expected_ : expected_);
}

LeafGuard& LeafGuard::operator=(const LeafGuard& other) {
  if (this == &other) return *this;
  Py_XINCREF(other.weak_expected_ != nullptr ? other.weak_expected_ : other.expected_);
  Py_XDECREF(weak_expected_ != nullptr ? weak_expected_ : expected_);
  kind_ = other.kind_;
  source_ = other.source_;
  other_ = other.other_;
  where_ = other.where_;
  type_ = other.type_;
  expected_ = other.expected_;
  weak_expected_ = other.weak_expected_;
  length_ = other.length_;
  tensor_ = other.tensor_;
  dim_ = other.dim_;
  size_ = other.size_;
  at_least_ = other.at_least_;
  relation_ = other.relation_;
  expression_ = other.expression_;
  holds_ = other.holds_;
  return *this;
}

LeafGuard::~LeafGuard() { Py_XDECREF(weak_expected_ != nullptr ? weak_expected_ : expected_); }

void LeafGuard::Hold(PyObject* obj) {
  expected_ = obj;
  if (PyType_SUPPORTS_WEAKREFS(Py_TYPE(obj))) {
    weak_expected_ = PyWeakref_NewRef(obj, nullptr);
    if (weak_expected_ != nullptr) return;
    PyErr_Clear();
  }
  Py_INCREF(obj);
}

PyObject* LeafGuard::LiveExpected() const {
  if (weak_expected_ == nullptr) return expected_;
  return PyWeakref_GET_OBJECT(weak_expected_) == expected_ ? expected_ : nullptr;
}

LeafGuard LeafGuard::Type(SourceRef source, PyTypeObject* type, Provenance where) {
  LeafGuard g(Kind::kType, std::move(source), std::move(where));
  g.type_ = type;
  g.Hold(reinterpret_cast<PyObject*>(type));
  return g;
}

LeafGuard LeafGuard::Identity(SourceRef source, PyObject* expected, Provenance where) {
  LeafGuard g(Kind::kIdentity, std::move(source), std::move(where));
  g.Hold(expected);
  return g;
}

LeafGuard LeafGuard::Equals(SourceRef source, PyObject* expected, Provenance where) {
  LeafGuard g(Kind::kEquals, std::move(source), std::move(where));
  g.expected_ = expected;
  Py_INCREF(expected);
  return g;
}

LeafGuard LeafGuard::Length(SourceRef source, Py_ssize_t length, Provenance where) {
  LeafGuard g(Kind::kLength, std::move(source), std::move(where));
  g.length_ = length;
  return g;
}

LeafGuard LeafGuard::LengthAtLeast(SourceRef source, Py_ssize_t min, Provenance where) {
  LeafGuard g = Length(std::move(source), min, std::move(where));
  g.at_least_ = true;
  return g;
}

LeafGuard LeafGuard::TensorMatch(SourceRef source, const Tensor& example, Provenance where) {
  LeafGuard g(Kind::kTensor, std::move(source), std::move(where));
  g.tensor_ = PropertiesOf(example);
  return g;
}

LeafGuard LeafGuard::TensorSize(SourceRef source, int64_t dim, int64_t size, Provenance where) {
  LeafGuard g(Kind::kTensorSize, std::move(source), std::move(where));
  g.dim_ = dim;
  g.size_ = size;
  return g;
}

LeafGuard LeafGuard::TensorSizeAtLeast(SourceRef source, int64_t dim, int64_t min, Provenance where) {
  LeafGuard g = TensorSize(std::move(source), dim, min, std::move(where));
  g.at_least_ = true;
  return g;
}

LeafGuard LeafGuard::Relation(SourceRef source, std::string expression, bool holds,
                              std::shared_ptr<const RelationFn> relation, Provenance where) {
  LeafGuard g(Kind::kRelation, std::move(source), std::move(where));
  g.expression_ = std::move(expression);
  g.holds_ = holds;
  g.relation_ = std::move(relation);
  return g;
}

LeafGuard LeafGuard::Absent(SourceRef source, Provenance where) {
  return LeafGuard(Kind::kAbsent, std::move(source), std::move(where));
}

LeafGuard LeafGuard::NotSame(SourceRef source, SourceRef other, Provenance where) {
  LeafGuard g(Kind::kNotSame, std::move(source), std::move(where));
  g.other_ = std::move(other);
  return g;
}

LeafGuard LeafGuard::Same(SourceRef source, SourceRef other, Provenance where) {
  LeafGuard g(Kind::kSame, std::move(source), std::move(where));
  g.other_ = std::move(other);
  return g;
}

LeafGuard LeafGuard::KeysInOrder(SourceRef source, PyObject* keys, Provenance where) {
  LeafGuard g(Kind::kKeys, std::move(source), std::move(where));
  g.expected_ = keys;
  Py_INCREF(keys);
  return g;
}

LeafGuard LeafGuard::NotSorting(SourceRef source, Provenance where) {
  return LeafGuard(Kind::kNotSorting, std::move(source), std::move(where));
}

bool IsBeingSorted(PyObject* list) {
  // list.sort (Objects/listobject.c, list_sort_impl) sets `allocated` to -1 for the length of the
  // sort and nothing else ever does.
  return PyList_Check(list) && reinterpret_cast<PyListObject*>(list)->allocated == -1;
}

bool LeafGuard::CheckValue(PyObject* value) const {
  if (kind_ == Kind::kAbsent) return value == nullptr;
  if (value == nullptr) return false;
  switch (kind_) {
    case Kind::kKeys: {
      if (!PyDict_CheckExact(value) || PyDict_GET_SIZE(value) != PyTuple_GET_SIZE(expected_)) return false;
      PyObject *key, *item;
      Py_ssize_t pos = 0, i = 0;
      while (PyDict_Next(value, &pos, &key, &item)) {
        PyObject* want = PyTuple_GET_ITEM(expected_, i++);
        if (!PyUnicode_CheckExact(key) || PyUnicode_Compare(key, want) != 0) return false;
      }
      return true;
    }
    case Kind::kNotSame:
    case Kind::kSame: return false;  // two values: Check() decides
    case Kind::kNotSorting: return PyList_CheckExact(value) && !IsBeingSorted(value);
    // A dead expected object's address may be reused: the weak reference tells them apart.
    case Kind::kType: return Py_TYPE(value) == type_ && LiveExpected() != nullptr;
    case Kind::kIdentity: return value == expected_ && LiveExpected() != nullptr;
    case Kind::kEquals: return SameConstant(value, expected_);
    case Kind::kLength: {
      Py_ssize_t n = -1;
      RemainingItems remaining;
      if (PyTuple_Check(value)) n = PyTuple_GET_SIZE(value);
      else if (PyList_Check(value)) n = PyList_GET_SIZE(value);
      else if (PyDict_Check(value)) n = PyDict_GET_SIZE(value);
      else if (ReadRemainingItems(value, &remaining)) n = PySequence_Fast_GET_SIZE(remaining.items) - remaining.start;
      return n >= 0 && (at_least_ ? n >= length_ : n == length_);
    }
    case Kind::kTensor: {
      const Tensor* t = tensor_recogniser ? tensor_recogniser(value) : nullptr;
      if (t == nullptr || t->dtype() != tensor_.dtype || t->device() != tensor_.device ||
          t->ndim() != tensor_.ndim || LayoutOf(*t) != tensor_.layout ||
          TracksGrad(*t) != tensor_.tracks_grad) {
        return false;
      }
      for (int64_t d = 0; d < tensor_.ndim; ++d) {
        if ((t->size(d) == 1) != tensor_.size_is_one[d]) return false;
      }
      return true;
    }
    case Kind::kTensorSize: {
      const Tensor* t = tensor_recogniser ? tensor_recogniser(value) : nullptr;
      return t != nullptr && dim_ < t->ndim() && (at_least_ ? t->size(dim_) >= size_ : t->size(dim_) == size_);
    }
    case Kind::kAbsent:
    case Kind::kRelation: return false;  // checked on the frame, not on one value
  }
  __builtin_unreachable();
}

bool LeafGuard::Check(const FrameInputs& frame) const {
  if (kind_ == Kind::kRelation) {
    const std::optional<bool> now = (*relation_)(frame);
    return now.has_value() && *now == holds_;
  }
  PyObject* value = source_->Resolve(frame);
  if (kind_ == Kind::kNotSame) return value != nullptr && value != other_->Resolve(frame);
  if (kind_ == Kind::kSame) return value != nullptr && value == other_->Resolve(frame);
  return CheckValue(value);
}

std::optional<std::string> LeafGuard::Explain(const FrameInputs& frame) const {
  if (Check(frame)) return std::nullopt;
  if (kind_ == Kind::kRelation) {
    const std::optional<bool> now = (*relation_)(frame);
    return absl::StrFormat("%s: expected %s, actual %s", expression_, holds_ ? "True" : "False",
                           now.has_value() ? (*now ? "True" : "False") : "not computable");
  }
  PyObject* value = source_->Resolve(frame);
  const std::string src = source_->ToString();
  if (kind_ == Kind::kNotSame && value != nullptr) {
    return absl::StrFormat("%s is %s: expected two different objects, actual the same %s", src,
                           other_->ToString(), Py_TYPE(value)->tp_name);
  }
  if (kind_ == Kind::kSame && value != nullptr) {
    return absl::StrFormat("%s is not %s: expected one object, actual two", src, other_->ToString());
  }
  if (kind_ == Kind::kAbsent) return absl::StrFormat("%s: expected no such name, actual %s", src, Repr(value));
  if (value == nullptr) return absl::StrCat(src, ": expected a value, actual: it no longer exists");
  switch (kind_) {
    case Kind::kAbsent:
    case Kind::kRelation:
    case Kind::kNotSame:
    case Kind::kSame: break;
    case Kind::kNotSorting:
      return absl::StrFormat("%s: expected a list that list.sort is not sorting, actual %s", src,
                             IsBeingSorted(value) ? "a list being sorted" : Py_TYPE(value)->tp_name);
    case Kind::kKeys: {
      PyObject* actual = PyDict_Check(value) ? PySequence_Tuple(value) : nullptr;
      if (actual == nullptr) PyErr_Clear();
      const std::string text = actual != nullptr ? Repr(actual) : Repr(value);
      Py_XDECREF(actual);
      return absl::StrFormat("tuple(%s): expected %s, actual %s", src, Repr(expected_), text);
    }
    case Kind::kType:
      return absl::StrFormat("type(%s): expected %s, actual %s", src,
                             LiveExpected() != nullptr ? type_->tp_name : "a class that no longer exists",
                             Py_TYPE(value)->tp_name);
    case Kind::kIdentity:
      return absl::StrFormat("%s: expected the object %s, actual %s", src,
                             LiveExpected() != nullptr ? Repr(expected_) : "that no longer exists",
                             Repr(value));
    case Kind::kEquals:
      return absl::StrFormat("%s: expected %s, actual %s", src, Repr(expected_), Repr(value));
    case Kind::kLength: {
      Py_ssize_t actual = -1;
      RemainingItems remaining;
      if (ReadRemainingItems(value, &remaining)) {
        actual = PySequence_Fast_GET_SIZE(remaining.items) - remaining.start;
      } else if (PyTuple_Check(value) || PyList_Check(value) || PyDict_Check(value)) {
        actual = PyObject_Length(value);
      }
      return absl::StrFormat("len(%s): expected %s%d, actual %d", src, at_least_ ? "at least " : "", length_, actual);
    }
    case Kind::kTensor: {
      const Tensor* t = tensor_recogniser ? tensor_recogniser(value) : nullptr;
      if (t == nullptr) {
        return absl::StrFormat("%s: expected a Tensor, actual %s", src, Py_TYPE(value)->tp_name);
      }
      const TensorProperties actual = PropertiesOf(*t);
      if (actual.tracks_grad != tensor_.tracks_grad) {
        return absl::StrFormat("%s: autograd followed it when traced (requires_grad with grad mode on): "
                               "expected %s, actual %s", src, tensor_.tracks_grad ? "True" : "False",
                               actual.tracks_grad ? "True" : "False");
      }
      if (actual.dtype != tensor_.dtype) {
        return absl::StrFormat("%s.dtype: expected %s, actual %s", src, DTypeName(tensor_.dtype),
                               DTypeName(actual.dtype));
      }
      if (actual.device != tensor_.device) {
        return absl::StrFormat("%s.device: expected %s, actual %s", src, tensor_.device.ToString(),
                               actual.device.ToString());
      }
      if (actual.ndim != tensor_.ndim) {
        return absl::StrFormat("%s.ndim: expected %d, actual %d (shape %s)", src, tensor_.ndim,
                               actual.ndim, t->ShapeString());
      }
      if (actual.layout != tensor_.layout) {
        return absl::StrFormat("%s layout: expected %s, actual %s", src, LayoutName(tensor_.layout),
                               LayoutName(actual.layout));
      }
      return absl::StrFormat("%s: expected %s, actual %s (shape %s)", src, Describe(tensor_),
                             Describe(actual), t->ShapeString());
    }
    case Kind::kTensorSize: {
      const Tensor* t = tensor_recogniser ? tensor_recogniser(value) : nullptr;
      return absl::StrFormat("%s.size(%d): expected %s%d, actual %s", src, dim_, at_least_ ? ">= " : "", size_,
                             t != nullptr && dim_ < t->ndim() ? absl::StrCat(t->size(dim_)) : "none");
    }
  }
  __builtin_unreachable();
}

std::string LeafGuard::ToString() const {
  const std::string src = source_->ToString();
  std::string code;
  switch (kind_) {
    case Kind::kType: code = absl::StrFormat("type(%s) is %s", src, type_->tp_name); break;
    case Kind::kIdentity: code = absl::StrFormat("%s is %s", src, Repr(expected_)); break;
    case Kind::kEquals: code = absl::StrFormat("%s == %s", src, Repr(expected_)); break;
    case Kind::kLength: code = absl::StrFormat("len(%s) %s %d", src, at_least_ ? ">=" : "==", length_); break;
    case Kind::kTensor: code = absl::StrFormat("%s is a %s", src, Describe(tensor_)); break;
    case Kind::kTensorSize:
      code = absl::StrFormat("%s.size(%d) %s %d", src, dim_, at_least_ ? ">=" : "==", size_);
      break;
    case Kind::kAbsent: code = absl::StrFormat("%s does not exist", src); break;
    case Kind::kRelation: code = holds_ ? expression_ : absl::StrCat("not (", expression_, ")"); break;
    case Kind::kNotSame: code = absl::StrFormat("%s is not %s", src, other_->ToString()); break;
    case Kind::kSame: code = absl::StrFormat("%s is %s", src, other_->ToString()); break;
    case Kind::kKeys: code = absl::StrFormat("tuple(%s) == %s", src, Repr(expected_)); break;
    case Kind::kNotSorting: code = absl::StrFormat("%s is not being sorted by list.sort", src); break;
  }
  if (where_.line >= 0 || !where_.instruction.empty()) {
    absl::StrAppendFormat(&code, "  # line %d: %s (offset %d)", where_.line, where_.instruction,
                          where_.offset);
  }
  return code;
}

void GuardSet::Add(LeafGuard guard) {
  // The key leaves out provenance: the first instruction that needed a guard explains it.
  std::string text = guard.ToString();
  const std::string key = text.substr(0, text.find("  # line"));
  if (std::find(keys_.begin(), keys_.end(), key) != keys_.end()) return;
  keys_.push_back(key);
  texts_.push_back(std::move(text));
  guards_.push_back(std::move(guard));
}

bool GuardSet::Check(const FrameInputs& frame) const {
  if (default_float_ != DefaultFloat()) return false;
  FrameInputs memoised = frame;
  memoised.resolve_epoch = NewResolveEpoch();
  for (const LeafGuard& g : guards_) {
    if (!g.Check(memoised)) return false;
    // A relation may run Python code, which may change what the sources lead to.
    if (g.kind() == LeafGuard::Kind::kRelation) memoised.resolve_epoch = NewResolveEpoch();
  }
  return true;
}

std::optional<std::string> GuardSet::Explain(const FrameInputs& frame) const {
  if (default_float_ != DefaultFloat()) {
    return absl::StrFormat("dyntrace.get_default_dtype(): expected %s, actual %s", DTypeName(default_float_),
                           DTypeName(DefaultFloat()));
  }
  for (size_t i = 0; i < guards_.size(); ++i) {
    // The guard's own text says which guard it was and which line of the program made it.
    if (auto why = guards_[i].Explain(frame)) return absl::StrCat(*why, "; failed guard: ", texts_[i]);
  }
  return std::nullopt;
}

const LeafGuard* GuardSet::FirstFailing(const FrameInputs& frame) const {
  for (const LeafGuard& guard : guards_) {
    if (!guard.Check(frame)) return &guard;
  }
  return nullptr;
}

std::vector<const LeafGuard*> GuardSet::Failing(const FrameInputs& frame) const {
  std::vector<const LeafGuard*> failing;
  for (const LeafGuard& guard : guards_) {
    // A relation computes on values its earlier guards vouch for; once one of those failed, it
    // could run arbitrary code, so it is not asked.
    if (!failing.empty() && guard.kind() == LeafGuard::Kind::kRelation) continue;
    if (!guard.Check(frame)) failing.push_back(&guard);
  }
  return failing;
}

std::vector<std::string> GuardSet::Lines() const { return texts_; }

void GuardSet::RollBack(size_t n) {
  std::vector<LeafGuard> guards(guards_.begin(), guards_.begin() + std::min(n, guards_.size()));
  std::vector<std::string> texts(texts_.begin(), texts_.begin() + std::min(n, texts_.size()));
  std::vector<std::string> keys(keys_.begin(), keys_.begin() + std::min(n, keys_.size()));
  for (size_t i = n; i < guards_.size(); ++i) {
    if (guards_[i].kind() != LeafGuard::Kind::kTensor) continue;
    guards.push_back(guards_[i]);
    texts.push_back(texts_[i]);
    keys.push_back(keys_[i]);
  }
  guards_ = std::move(guards);
  texts_ = std::move(texts);
  keys_ = std::move(keys);
}

}  // namespace dt::guards

// interpreter/trace_exceptions.cc: exceptions the traced code raises and catches itself.
//
// `raise ValueError(k)` inside a `try` of the same frame, or of a traced caller (a helper that
// raises, a loop that retries), is followed instead of ending the trace: the exception is an
// object made at trace time from constant arguments, and the raise sends control where CPython's
// exception table would (the handler's stack depth, PUSH_EXC_INFO, CHECK_EXC_MATCH, the body,
// POP_EXCEPT). Such an exception is read only in ways that never show the difference from
// CPython's own object (str, repr, format, type, isinstance, `.args`): it has no traceback, so it
// never leaves the trace (returned, stored, or in a frame state at a break), and a graph break
// inside an except or finally block hands the frame to CPython. An exception no traced handler
// catches, one a `with` block's __exit__ would see, one raised by a generator the trace runs ahead
// of its consumer, and every exception raised by an operation (a missing key, a division by zero)
// stop the trace as before: CPython runs the raising instruction and raises its own.
#include <Python.h>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "interpreter/py_str.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {
namespace {

constexpr absl::string_view kRaisingPayload = "dyntrace.trace-exception";

// Special methods that would run Python code while an instance is made, printed, compared or read.
constexpr const char* kInstanceHooks[] = {
    "__new__", "__init__", "__str__", "__repr__", "__format__", "__getattribute__", "__getattr__",
    "__setattr__", "__delattr__", "__eq__", "__ne__", "__hash__", "__bool__", "__len__", "__del__",
    "__init_subclass__", "__instancecheck__", "__subclasscheck__"};

bool ExceptionTuple(PyObject* types) {
  if (PyExceptionClass_Check(types)) return true;
  if (!PyTuple_CheckExact(types)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(types); ++i) {
    if (!PyExceptionClass_Check(PyTuple_GET_ITEM(types, i))) return false;
  }
  return true;
}

}  // namespace

bool PlainExceptionClass(PyObject* cls) {
  if (!PyExceptionClass_Check(cls) || Py_TYPE(cls) != &PyType_Type) return false;
  PyObject* mro = reinterpret_cast<PyTypeObject*>(cls)->tp_mro;
  if (mro == nullptr || !PyTuple_Check(mro)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    auto* base = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (!PyType_HasFeature(base, Py_TPFLAGS_HEAPTYPE)) continue;  // builtin: C code, no Python
    if (base->tp_dict == nullptr) return false;
    for (const char* hook : kInstanceHooks) {
      if (PyDict_GetItemString(base->tp_dict, hook) != nullptr) return false;
    }
  }
  return true;
}

bool IsTraceException(const Sym& s) {
  return s != nullptr && s->kind == SymKind::kConst && s->made_by_trace && PyExceptionInstance_Check(s->obj.get());
}

bool ReadsExceptionOnly(PyObject* fn, PyObject* builtins) {
  for (const char* name : {"str", "repr", "ascii", "format", "type", "isinstance", "bool"}) {
    if (fn == PyDict_GetItemString(builtins, name)) return true;
  }
  return false;
}

// `ValueError(k)`: made now from constant arguments (no Python code runs: PlainExceptionClass).
absl::StatusOr<Sym> Tracer::MakeException(PyObject* cls, const std::vector<Sym>& args, const Kwargs& kwargs) {
  const std::string name = reinterpret_cast<PyTypeObject*>(cls)->tp_name;
  if (!kwargs.empty()) return Unsupported(absl::StrCat("making a ", name, " with keyword arguments"));
  PyRef tuple = PyRef::Steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  if (!tuple) return Unsupported("out of memory");
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i]->kind != SymKind::kConst || !IsPureConstType(args[i]->obj.get())) {
      return Unsupported(absl::StrCat("making a ", name, " from a ", Describe(args[i])));
    }
    PyTuple_SET_ITEM(tuple.get(), static_cast<Py_ssize_t>(i), Py_NewRef(args[i]->obj.get()));
  }
  PyRef made = PyRef::Steal(PyObject_Call(cls, tuple.get(), nullptr));
  if (!made || !PyExceptionInstance_Check(made.get())) {
    PyErr_Clear();
    return Unsupported(absl::StrCat("making a ", name));
  }
  Sym s = ConstSym(std::move(made));
  s->made_by_trace = true;
  trace_exceptions_[s->obj.get()] = s;
  return s;
}

// Starts `exception` up the traced frames: a Raises status that CatchInFrame recognises by its
// serial (a raise a helper swallowed, getattr's default, cannot be mistaken for this one).
absl::Status Tracer::Throw(const Sym& exception) {
  raising_ = exception;
  // Raised while another is handled: CPython chains it as __context__ (never onto itself).
  if (!handled_exceptions_.empty() && handled_exceptions_.back() != exception) {
    PyException_SetContext(exception->obj.get(), Py_NewRef(handled_exceptions_.back()->obj.get()));
  }
  PyRef text = PyRef::Steal(PyObject_Str(exception->obj.get()));
  if (!text) PyErr_Clear();
  absl::Status s = Raises(absl::StrCat("the traced code raises ", Py_TYPE(exception->obj.get())->tp_name,
                                       text ? absl::StrCat(": ", py::Utf8Or(text.get())) : ""));
  s.SetPayload(kRaisingPayload, absl::Cord(absl::StrCat(++raising_serial_)));
  return s;
}

Sym Tracer::TakeRaising(const absl::Status& status) {
  const auto serial = status.GetPayload(kRaisingPayload);
  if (raising_ == nullptr || !serial || *serial != absl::StrCat(raising_serial_)) return nullptr;
  Sym taken = std::move(raising_);
  raising_ = nullptr;
  fail_line_ = -1;  // kept for later: a later break reports its own place
  fail_file_.clear();
  fail_offset_ = -1;
  fail_instruction_.clear();
  return taken;
}

namespace {

// Its arguments are constants, and nothing about it but its class and arguments is set.
bool PlainException(PyObject* e) {
  if (!PlainExceptionClass(reinterpret_cast<PyObject*>(Py_TYPE(e)))) return false;
  PyRef args = PyRef::Steal(PyObject_GetAttrString(e, "args"));
  if (!args) PyErr_Clear();
  return args && PyTuple_CheckExact(args.get()) && IsPureConstType(args.get());
}

}  // namespace

absl::Status Tracer::PythonError(absl::string_view why) {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  PyRef owned_type = PyRef::Steal(type), error = PyRef::Steal(value), owned_traceback = PyRef::Steal(traceback);
  PyErr_Clear();
  if (!error || !PyExceptionInstance_Check(error.get())) return Raises(why);
  // Made fresh from its class and arguments: the one raised here may carry the thread's context.
  PyRef args = PyRef::Steal(PyObject_GetAttrString(error.get(), "args"));
  if (!args) PyErr_Clear();
  return ThrowNew(reinterpret_cast<PyObject*>(Py_TYPE(error.get())), args.get(), why);
}

absl::Status Tracer::RaiseNew(PyObject* cls, PyObject* arg, absl::string_view why) {
  PyRef args = PyRef::Steal(arg != nullptr ? PyTuple_Pack(1, arg) : PyTuple_New(0));
  return ThrowNew(cls, args.get(), why);
}

// Throws `cls(*args)`, made now, when it is a plain exception; else Raises(why).
absl::Status Tracer::ThrowNew(PyObject* cls, PyObject* args, absl::string_view why) {
  PyRef made = args != nullptr && PlainExceptionClass(cls) ? PyRef::Steal(PyObject_Call(cls, args, nullptr)) : PyRef();
  if (!made || !PlainException(made.get())) {
    PyErr_Clear();
    return Raises(why);
  }
  Sym s = ConstSym(std::move(made));
  s->made_by_trace = true;
  trace_exceptions_[s->obj.get()] = s;
  return Throw(s);
}

// Where CPython's exception table sends an exception raised at `in`: on to the handler (true),
// or out of this frame (false: the status goes on to the caller, and out of the root it is a
// break, so CPython raises it for real).
absl::StatusOr<bool> Tracer::CatchInFrame(TFrame& f, const Instr& in, const absl::Status& status) {
  const auto serial = status.GetPayload(kRaisingPayload);
  if (raising_ == nullptr || !serial || *serial != absl::StrCat(raising_serial_)) return false;
  if (f.generator) {
    // Run ahead of its consumer: RunGenerator keeps it for the consumer's next() after the last
    // item. A context manager's generator is not run ahead: its exception is CPython's.
    if (f.suspend_at_yield) raising_ = nullptr;
    return false;
  }
  const ExceptionHandler* handler = HandlerAt(*f.decoded, in.offset);
  if (handler == nullptr) return false;
  const auto target = f.decoded->index_of_offset.find(handler->target);
  if (target == f.decoded->index_of_offset.end() || static_cast<size_t>(handler->depth) > f.stack.size()) {
    raising_ = nullptr;
    return false;
  }
  const size_t next = static_cast<size_t>(target->second) + 1;
  if (next < f.decoded->instrs.size() && f.decoded->instrs[next].opname == "WITH_EXCEPT_START") {
    raising_ = nullptr;  // __exit__ would receive the exception with its traceback
    return false;
  }
  f.stack.resize(static_cast<size_t>(handler->depth));
  if (handler->lasti) f.stack.push_back(ConstSym(PyRef::Steal(PyLong_FromLong(in.offset / 2))));
  raising_->caught = true;
  if (handled_exceptions_.empty()) before_handling_ = snapshot_;
  f.stack.push_back(raising_);
  raising_ = nullptr;
  f.pc = target->second;
  fail_line_ = -1;  // the raise is handled: a later break reports its own place
  fail_file_.clear();
  fail_offset_ = -1;
  fail_instruction_.clear();
  return true;
}

absl::Status Tracer::DoRaiseVarargs(TFrame& f, const Instr& in) {
  if (in.arg == 0) {
    if (handled_exceptions_.empty()) return Unsupported("a bare raise outside an except block the trace entered");
    return Throw(handled_exceptions_.back());
  }
  DT_RETURN_IF_ERROR(f.Need(static_cast<size_t>(in.arg), in));
  Sym cause = in.arg == 2 ? f.Pop() : nullptr;  // `raise X from Y`
  Sym exception = f.Pop();
  if (cause != nullptr && !IsTraceException(cause) && !(cause->kind == SymKind::kConst && cause->obj.get() == Py_None)) {
    return Unsupported(absl::StrCat("raise ... from a ", Describe(cause)));
  }
  if (exception->kind == SymKind::kConst && PyExceptionClass_Check(exception->obj.get()) &&
      PlainExceptionClass(exception->obj.get())) {
    DT_ASSIGN_OR_RETURN(exception, MakeException(exception->obj.get(), {}, {}));
  }
  if (!IsTraceException(exception)) return Unsupported(absl::StrCat("raising a ", Describe(exception)));
  if (cause != nullptr) {
    // Only visible on an exception a traced handler catches, which never leaves the trace.
    PyException_SetCause(exception->obj.get(), cause->obj.get() == Py_None ? nullptr : Py_NewRef(cause->obj.get()));
    if (cause->obj.get() == Py_None) reinterpret_cast<PyBaseExceptionObject*>(exception->obj.get())->suppress_context = 1;
  }
  return Throw(exception);
}

absl::Status Tracer::DoReraise(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  Sym exception = f.Pop();
  if (!IsTraceException(exception)) return Unsupported(absl::StrCat("re-raising a ", Describe(exception)));
  return Throw(exception);
}

absl::Status Tracer::DoPushExcInfo(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  Sym exception = f.Pop();
  if (!IsTraceException(exception)) return Unsupported(absl::StrCat("handling a ", Describe(exception)));
  f.stack.push_back(handled_exceptions_.empty() ? ConstSym(PyRef::Borrow(Py_None)) : handled_exceptions_.back());
  f.stack.push_back(exception);
  handled_exceptions_.push_back(exception);
  return absl::OkStatus();
}

absl::Status Tracer::DoCheckExcMatch(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(2, in));
  Sym types = f.Pop();
  const Sym& exception = f.stack.back();
  if (types->kind == SymKind::kTuple && !types->named_type) {  // `except (KeyError, IndexError)`
    PyRef tuple = PyRef::Steal(PyTuple_New(static_cast<Py_ssize_t>(types->items.size())));
    for (size_t i = 0; tuple && i < types->items.size(); ++i) {
      const Sym& item = types->items[i];
      if (item->kind != SymKind::kConst) return Unsupported("`except` with a tuple holding a non-class");
      PyTuple_SET_ITEM(tuple.get(), static_cast<Py_ssize_t>(i), Py_NewRef(item->obj.get()));
    }
    if (!tuple) return Unsupported("out of memory");
    types = ConstSym(std::move(tuple));
  }
  if (!IsTraceException(exception) || types->kind != SymKind::kConst || !ExceptionTuple(types->obj.get())) {
    return Unsupported(absl::StrCat("`except` matching a ", Describe(exception), " against a ", Describe(types)));
  }
  const int matches = PyErr_GivenExceptionMatches(exception->obj.get(), types->obj.get());
  f.stack.push_back(ConstSym(PyRef::Borrow(matches ? Py_True : Py_False)));
  return absl::OkStatus();
}

absl::Status Tracer::DoPopExcept(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  if (handled_exceptions_.empty()) return Unsupported("leaving an except block the trace did not enter");
  f.Pop();
  handled_exceptions_.pop_back();
  return absl::OkStatus();
}

// `.args`, `.__cause__`, `.__context__`, `.__suppress_context__` of an exception the trace made:
// what CPython's object would hold. Its traceback and notes differ, so they are not read.
absl::StatusOr<Sym> Tracer::ExceptionAttr(const Sym& exception, const std::string& name) {
  PyObject* e = exception->obj.get();
  if (name == "args" || name == "__suppress_context__") return ConstSym(PyRef::Steal(PyObject_GetAttrString(e, name.c_str())));
  if (name != "__cause__" && name != "__context__") {
    return Unsupported(absl::StrCat("attribute '", name, "' of an exception the trace made"));
  }
  PyRef linked = PyRef::Steal(name == "__cause__" ? PyException_GetCause(e) : PyException_GetContext(e));
  if (!linked) return ConstSym(PyRef::Borrow(Py_None));
  auto it = trace_exceptions_.find(linked.get());
  if (it == trace_exceptions_.end()) return Unsupported(absl::StrCat("the ", name, " of an exception the trace made"));
  return it->second;
}

// An exception the trace made leaving it (returned, or on the stack of a break at the `raise`
// that no traced handler catches): made again each run by calling its class with its arguments,
// a new object as CPython's would be. One a traced handler caught has a traceback in CPython.
absl::StatusOr<OutputSpec> Tracer::ExceptionOutput(const Sym& s, OutputSpec out) {
  PyObject* e = s->obj.get();
  if (s->caught) {
    return Unsupported(absl::StrCat("the ", Py_TYPE(e)->tp_name,
                                    " the traced code raised and caught leaves the trace (it has no traceback)"));
  }
  PyRef args = PyRef::Steal(PyObject_GetAttrString(e, "args"));
  if (!args || !PyTuple_CheckExact(args.get())) {
    PyErr_Clear();
    return Unsupported("an exception without its arguments");
  }
  out.kind = OutputSpec::Kind::kCall;
  out.obj = PyRef::Borrow(reinterpret_cast<PyObject*>(Py_TYPE(e)));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args.get()); ++i) {
    OutputSpec arg;
    arg.kind = OutputSpec::Kind::kConst;
    arg.obj = PyRef::Borrow(PyTuple_GET_ITEM(args.get(), i));
    out.children.push_back(std::move(arg));
  }
  return out;
}

}  // namespace dt::interpreter::trace

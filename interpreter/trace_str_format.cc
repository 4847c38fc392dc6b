// interpreter/trace_str_format.cc: str.format with fields the trace resolves.
//
// `"{0.name}:{0.dims[1]}".format(cfg)` and `"{n:>{w}}".format(n=..., w=...)` read attributes and
// items of their arguments and may nest fields in a format spec. The format string is split by
// CPython's own parser (_string.formatter_parser, which runs no user code); each field is found
// by the trace (GetAttr, Subscript) and formatted like an f-string's FORMAT_VALUE (Format), so a
// field of an object the trace holds (a user object, a traced number) no longer ends the trace.
#include <Python.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "interpreter/py_str.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {
namespace {

PyRef CallStringModule(const char* function, PyObject* arg) {
  PyRef module = PyRef::Steal(PyImport_ImportModule("_string"));
  PyRef r = module ? PyRef::Steal(PyObject_CallMethod(module.get(), function, "O", arg)) : PyRef();
  PyRef items = r ? PyRef::Steal(PySequence_List(r.get())) : PyRef();  // the parser is lazy
  if (!items) PyErr_Clear();
  if (!items || std::string_view(function) == "formatter_parser") return items;
  return r;
}

// Field numbering as CPython's: all automatic ("{}") or all manual ("{0}").
struct Numbering {
  size_t next_auto = 0;
  int mode = 0;  // 0 none yet, 1 automatic, 2 manual
};

}  // namespace

absl::StatusOr<Sym> Tracer::FormatField(PyObject* field_name, const std::vector<Sym>& args, const Kwargs& kwargs,
                                        size_t& next_auto) {
  PyRef module = PyRef::Steal(PyImport_ImportModule("_string"));
  PyRef split = module ? PyRef::Steal(PyObject_CallMethod(module.get(), "formatter_field_name_split", "O", field_name))
                       : PyRef();
  PyRef rest = split && PyTuple_Check(split.get()) && PyTuple_GET_SIZE(split.get()) == 2
                   ? PyRef::Steal(PySequence_List(PyTuple_GET_ITEM(split.get(), 1)))
                   : PyRef();
  if (!rest) {
    PyErr_Clear();
    return Raises("the traced code raises in str.format (a malformed field)");
  }
  PyObject* first = PyTuple_GET_ITEM(split.get(), 0);
  Sym value;
  if (PyLong_Check(first) || (PyUnicode_Check(first) && PyUnicode_GET_LENGTH(first) == 0)) {
    const size_t index = PyLong_Check(first) ? PyLong_AsSize_t(first) : next_auto++;
    if (PyErr_Occurred() || index >= args.size()) {
      PyErr_Clear();
      return Raises("the traced code raises IndexError in str.format (a replacement index out of range)");
    }
    value = args[index];
  } else {
    DT_ASSIGN_OR_RETURN(const std::string name, Text(first));
    for (const auto& [k, v] : kwargs) {
      if (k == name) value = v;
    }
    if (value == nullptr) return Raises(absl::StrCat("the traced code raises KeyError in str.format: '", name, "'"));
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rest.get()); ++i) {
    PyObject* part = PyList_GET_ITEM(rest.get(), i);  // (is_attribute, key)
    PyObject* key = PyTuple_GET_ITEM(part, 1);
    if (PyTuple_GET_ITEM(part, 0) == Py_True) {
      DT_ASSIGN_OR_RETURN(const std::string attr, Text(key));
      DT_ASSIGN_OR_RETURN(value, GetAttr(value, attr));
    } else {
      DT_ASSIGN_OR_RETURN(value, Subscript(value, ConstSym(PyRef::Borrow(key))));
    }
  }
  return value;
}

absl::StatusOr<Sym> Tracer::StrFormat(PyObject* format, const std::vector<Sym>& args, const Kwargs& kwargs, int depth) {
  if (depth > 1) return Raises("the traced code raises ValueError: Max string recursion exceeded");
  PyRef pieces = CallStringModule("formatter_parser", format);
  if (!pieces) return Raises("the traced code raises ValueError in str.format (a malformed format string)");
  PyRef parts = PyRef::Steal(PyList_New(0));
  Numbering numbering;
  // CPython's writer hands back a field's own str when it is the one thing written and the
  // format string ends with it (`"{0}".format(s) is s`): that field's value, or null.
  Sym lone_field;
  bool written = false;
  for (Py_ssize_t i = 0; parts && i < PyList_GET_SIZE(pieces.get()); ++i) {
    PyObject* piece = PyList_GET_ITEM(pieces.get(), i);  // (literal, field_name, spec, conversion)
    if (PyList_Append(parts.get(), PyTuple_GET_ITEM(piece, 0)) < 0) return Unsupported("out of memory");
    written |= lone_field != nullptr || PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(piece, 0)) > 0;
    lone_field = nullptr;
    PyObject* field_name = PyTuple_GET_ITEM(piece, 1);
    if (field_name == Py_None) continue;
    const bool automatic = PyUnicode_Check(field_name) && (PyUnicode_GET_LENGTH(field_name) == 0 ||
                                                           PyUnicode_READ_CHAR(field_name, 0) == '.' ||
                                                           PyUnicode_READ_CHAR(field_name, 0) == '[');
    const bool positional = automatic || (PyUnicode_Check(field_name) && Py_UNICODE_ISDIGIT(PyUnicode_READ_CHAR(field_name, 0)));
    if (positional && numbering.mode != 0 && numbering.mode != (automatic ? 1 : 2)) {
      return Raises("the traced code raises ValueError: cannot switch between automatic field numbering and manual field specification");
    }
    if (positional) numbering.mode = automatic ? 1 : 2;
    DT_ASSIGN_OR_RETURN(Sym value, FormatField(field_name, args, kwargs, numbering.next_auto));
    Sym spec = ConstSym(PyRef::Borrow(PyTuple_GET_ITEM(piece, 2)));
    if (PyUnicode_FindChar(spec->obj.get(), '{', 0, PyUnicode_GET_LENGTH(spec->obj.get()), 1) >= 0) {
      DT_ASSIGN_OR_RETURN(spec, StrFormat(spec->obj.get(), args, kwargs, depth + 1));
    }
    PyObject* conversion = PyTuple_GET_ITEM(piece, 3);
    int code = 0;
    if (conversion != Py_None) {
      const Py_UCS4 c = PyUnicode_GET_LENGTH(conversion) == 1 ? PyUnicode_READ_CHAR(conversion, 0) : 0;
      code = c == 's' ? 1 : c == 'r' ? 2 : c == 'a' ? 3 : -1;
      if (code < 0) return Raises("the traced code raises ValueError: unknown conversion specifier");
    }
    DT_ASSIGN_OR_RETURN(Sym text, Format(value, code, spec));
    if (PyList_Append(parts.get(), text->obj.get()) < 0) return Unsupported("out of memory");
    const bool nonempty = PyUnicode_GET_LENGTH(text->obj.get()) > 0;
    if (nonempty && !written && PyUnicode_CheckExact(text->obj.get())) {
      lone_field = value->kind == SymKind::kConst && value->obj.get() == text->obj.get() ? value : text;
    } else {
      written |= nonempty;
    }
  }
  if (lone_field != nullptr) return lone_field;
  PyRef empty = PyRef::Steal(PyUnicode_FromStringAndSize(nullptr, 0));
  PyRef joined = parts && empty ? PyRef::Steal(PyUnicode_Join(empty.get(), parts.get())) : PyRef();
  if (!joined) {
    PyErr_Clear();
    return Unsupported("str.format failed");
  }
  return ConstSym(std::move(joined));
}

}  // namespace dt::interpreter::trace

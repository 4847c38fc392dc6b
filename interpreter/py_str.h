// interpreter/py_str.h: checked conversion of Python strings to UTF-8.
//
// PyUnicode_AsUTF8 returns null (with a Python error set) for a str holding a lone surrogate
// ("\udc80") or for an object that is not a str; building a std::string from that null aborts
// the process, and a char* loses everything after an embedded NUL. Every str -> UTF-8 conversion
// in interpreter/ goes through these helpers instead: they keep the length, never leave a Python
// error set, and say when there is no text, so callers can hand the frame back to CPython (which
// then raises exactly what it would raise) or print a placeholder.
//
//   std::optional<std::string> name = py::Utf8(key);
//   if (!name) return Unsupported("a keyword name UTF-8 cannot encode");
#ifndef DYNTRACE_INTERPRETER_PY_STR_H_
#define DYNTRACE_INTERPRETER_PY_STR_H_

#include <Python.h>

#include <optional>
#include <string>
#include <string_view>

namespace dt::interpreter::py {

// The UTF-8 text of `obj` (embedded NULs kept), or nullopt when `obj` is null, not a str, or holds
// text UTF-8 cannot encode. Clears any Python error the conversion raised.
inline std::optional<std::string> Utf8(PyObject* obj) {
  if (obj == nullptr || !PyUnicode_Check(obj)) return std::nullopt;
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(obj, &size);
  if (text == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  return std::string(text, static_cast<size_t>(size));
}

// For names in messages, logs and reports: the text, or `fallback` when there is none.
inline std::string Utf8Or(PyObject* obj, std::string_view fallback = "<?>") {
  std::optional<std::string> text = Utf8(obj);
  return text ? *std::move(text) : std::string(fallback);
}

// A str made from UTF-8 text of known length (embedded NULs kept); null with a Python error set
// when `text` is not valid UTF-8.
inline PyObject* FromUtf8(std::string_view text) {
  return PyUnicode_FromStringAndSize(text.data(), static_cast<Py_ssize_t>(text.size()));
}

}  // namespace dt::interpreter::py

#endif  // DYNTRACE_INTERPRETER_PY_STR_H_

// interpreter/report.h: the HTML report of everything dyntrace compiled in this process.
//
// One self-contained file (inline CSS, inline SVG, a few lines of inline script; nothing fetched
// from anywhere) listing every frame dyntrace looked at and kept something for: each segment's
// graph as code and as a Graphviz picture, its guards, its backend and kernel source when a
// compiler backend produced one, the frame's graph breaks with an excerpt of the source around
// each, and its recompile reasons. All text from programs is HTML-escaped.
//
//   dyntrace --report out.html script.py      (written at exit)
//   dyntrace.report("out.html")               (from Python, any time)
#ifndef DYNTRACE_INTERPRETER_REPORT_H_
#define DYNTRACE_INTERPRETER_REPORT_H_

#include <Python.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dt::interpreter {

// REQUIRES: the GIL. Graph pictures need Graphviz's `dot`; without it the report says so in place
// of each picture and is still written.
[[nodiscard]] absl::StatusOr<std::string> RenderReport();
[[nodiscard]] absl::Status WriteReport(const std::string& path);

// `text` with & < > " ' replaced by character references.
std::string EscapeHtml(absl::string_view text);

// Adds dyntrace.report(path) to the module.
[[nodiscard]] bool AddReportBindings(PyObject* module);

}  // namespace dt::interpreter

#endif  // DYNTRACE_INTERPRETER_REPORT_H_

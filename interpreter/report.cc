#include "interpreter/report.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "interpreter/code_cache.h"
#include "interpreter/graphviz.h"
#include "interpreter/py_str.h"
#include "interpreter/py_ref.h"

namespace dt::interpreter {

std::string EscapeHtml(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

using py::PyRef;

constexpr int kExcerptContext = 2;  // source lines shown before and after a break's line

constexpr const char kStyle[] = R"CSS(
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 75em; color: #1f2937; }
h1 { margin-bottom: 0.2em; }
h2 { border-bottom: 1px solid #d1d5db; padding-bottom: 0.2em; margin-top: 2em; }
h2 small, h3 small { color: #6b7280; font-weight: normal; }
pre { background: #f9fafb; border: 1px solid #e5e7eb; padding: 0.6em; overflow-x: auto; font-size: 0.85em; }
table.summary td { padding: 0.1em 1em 0.1em 0; }
table.summary td.count { text-align: right; font-variant-numeric: tabular-nums; }
.entry { border-left: 3px solid #93c5fd; padding-left: 1em; margin: 1.5em 0; }
.entry.fallback { border-left-color: #fca5a5; }
.picture svg { max-width: 100%; height: auto; }
.break { border-left: 3px solid #fca5a5; padding-left: 1em; margin: 1em 0; }
.excerpt .hit { background: #fee2e2; font-weight: bold; }
.missing { color: #b91c1c; }
)CSS";

// Counts the frames and pictures once the page has loaded; a test reads these attributes from
// the rendered DOM to know the document was parsed and its script ran without errors.
constexpr const char kScript[] = R"JS(
document.addEventListener("DOMContentLoaded", function () {
  var frames = document.querySelectorAll("section.frame").length;
  var pictures = document.querySelectorAll(".picture svg").length;
  document.body.setAttribute("data-frames", String(frames));
  document.body.setAttribute("data-pictures", String(pictures));
  document.body.setAttribute("data-rendered", "ok");
});
)JS";

std::string CodeName(PyCodeObject* code) {
  return py::Utf8Or(code->co_qualname);
}

std::string CodeFile(PyCodeObject* code) {
  return py::Utf8Or(code->co_filename);
}

std::string Pre(absl::string_view css_class, absl::string_view text) {
  return absl::StrCat("<pre class=\"", css_class, "\">", EscapeHtml(text), "</pre>\n");
}

// Lines [line - context, line + context] of `file`, the break's own line marked; "" when the
// file cannot be read (code compiled from a string, a deleted file).
std::string SourceExcerpt(const std::string& file, int line) {
  if (line < 1) return "";
  std::ifstream in(file);
  if (!in) return "";
  std::string out;
  std::string text;
  for (int number = 1; std::getline(in, text) && number <= line + kExcerptContext; ++number) {
    if (number < line - kExcerptContext) continue;
    const std::string row = absl::StrFormat("%5d  %s", number, text);
    if (number == line) {
      absl::StrAppend(&out, "<span class=\"hit\">", EscapeHtml(row), "</span>\n");
    } else {
      absl::StrAppend(&out, EscapeHtml(row), "\n");
    }
  }
  return out.empty() ? "" : absl::StrCat("<pre class=\"excerpt\">", out, "</pre>\n");
}

// dyntrace.stats() as table rows: every number it has, so counters added later show up too.
std::string SummaryTable() {
  PyRef module = PyRef::Steal(PyImport_ImportModule("dyntrace"));
  PyRef stats = module ? PyRef::Steal(PyObject_CallMethod(module.get(), "stats", nullptr)) : PyRef();
  if (!stats || !PyDict_Check(stats.get())) {
    PyErr_Clear();
    return "<p class=\"missing\">dyntrace.stats() is unavailable</p>\n";
  }
  std::string out = "<table class=\"summary\">\n";
  PyObject *key, *value;  // borrowed
  Py_ssize_t pos = 0;
  while (PyDict_Next(stats.get(), &pos, &key, &value)) {
    if (!PyUnicode_Check(key)) continue;
    std::string shown;
    if (PyLong_Check(value)) {
      shown = absl::StrCat(PyLong_AsLongLong(value));
    } else if (PyFloat_Check(value)) {
      shown = absl::StrFormat("%.3f", PyFloat_AsDouble(value));
    } else {
      continue;  // the reason lists are shown per frame below
    }
    absl::StrAppend(&out, "<tr><td>", EscapeHtml(py::Utf8Or(key)), "</td><td class=\"count\">",
                    shown, "</td></tr>\n");
  }
  PyErr_Clear();
  return absl::StrCat(out, "</table>\n");
}

std::string EntrySection(PyCodeObject* code, const CacheEntry& entry, int number) {
  std::string out = absl::StrCat("<div class=\"entry", entry.fallback() ? " fallback" : "", "\">\n");
  const std::string where = entry.start_offset == 0 ? "from the frame's entry"
                                                    : absl::StrCat("from offset ", entry.start_offset);
  if (entry.fallback()) {
    absl::StrAppend(&out, "<h3>Segment ", number, " <small>", where, "</small>: runs under CPython</h3>\n",
                    "<p>", EscapeHtml(*entry.fallback_reason), "</p>\n");
  } else {
    std::string details = where;
    if (!entry.backend_used.empty()) absl::StrAppend(&details, ", backend ", entry.backend_used);
    if (entry.compile_seconds > 0) absl::StrAppendFormat(&details, ", compiled in %.3f s", entry.compile_seconds);
    if (entry.trace.break_info) absl::StrAppend(&details, ", ends at a break: ", entry.trace.break_info->reason);
    absl::StrAppend(&out, "<h3>Graph ", number, " <small>", EscapeHtml(details), "</small></h3>\n");
  }
  if (entry.graph() != nullptr && !entry.fallback()) {
    const std::string name = entry.start_offset == 0
                                 ? py::Utf8Or(code->co_name)
                                 : absl::StrCat(py::Utf8Or(code->co_name), "_at_", entry.start_offset);
    absl::StrAppend(&out, "<h4>Code</h4>\n", Pre("graph-code", entry.graph()->ToString(name)));
    absl::StrAppend(&out, "<h4>Picture</h4>\n");
    absl::StatusOr<std::string> svg = graphviz::DotToSvg(entry.graph()->ToDot(name));
    if (svg.ok()) {
      absl::StrAppend(&out, "<div class=\"picture\">", graphviz::InlineSvg(*svg), "</div>\n");
    } else {
      absl::StrAppend(&out, "<p class=\"missing\">no picture: ", EscapeHtml(svg.status().message()), "</p>\n");
    }
    if (entry.backward != nullptr) {
      const JointGraph& joint = *entry.backward->joint;
      absl::StrAppend(&out, "<h4>Backward graph</h4>\n<p class=\"backward\">",
                      EscapeHtml(absl::StrFormat("backend %s; the forward graph saves %d bytes for it (saving every "
                                                 "value the derivative formulas read: %d bytes; %d nodes recomputed)",
                                                 entry.backward->backend_used, joint.saved_bytes,
                                                 joint.save_everything_bytes, joint.recomputed_nodes)),
                      "</p>\n", Pre("graph-code", joint.backward.ToString(name + "_backward")));
    }
  }
  absl::StrAppend(&out, "<h4>Guards</h4>\n", Pre("guards", absl::StrJoin(entry.guards.Lines(), "\n")));
  if (!entry.kernel_source.empty()) {
    absl::StrAppend(&out, "<h4>Kernels</h4>\n", Pre("kernel-source", entry.kernel_source));
  } else if (!entry.fallback()) {
    absl::StrAppend(&out, "<h4>Kernels</h4>\n<p class=\"no-kernels\">none generated: the ",
                    EscapeHtml(entry.backend_used.empty() ? "eager" : entry.backend_used),
                    " backend runs the graph's ops one by one</p>\n");
  }
  return absl::StrCat(out, "</div>\n");
}

std::string FrameSection(const CodeCache& cache, int index) {
  PyCodeObject* code = cache.code;
  const std::string file = CodeFile(code);
  std::string out = absl::StrFormat("<section class=\"frame\" id=\"frame-%d\">\n", index);
  const auto entries = cache.AllEntries();
  absl::StrAppend(&out, "<h2>", EscapeHtml(CodeName(code)), " <small>", EscapeHtml(file), ":",
                  code->co_firstlineno, "</small></h2>\n");
  absl::StrAppendFormat(&out, "<p>%d cache entr%s, %d graph break%s, %d recompile%s</p>\n", entries.size(),
                        entries.size() == 1 ? "y" : "ies", cache.breaks.size(),
                        cache.breaks.size() == 1 ? "" : "s", cache.recompile_reasons.size(),
                        cache.recompile_reasons.size() == 1 ? "" : "s");
  int number = 0;
  for (const auto& entry : entries) absl::StrAppend(&out, EntrySection(code, *entry, ++number));
  if (!cache.breaks.empty()) {
    absl::StrAppend(&out, "<h3>Graph breaks</h3>\n");
    for (const BreakRecord& b : cache.breaks) {
      absl::StrAppend(&out, "<div class=\"break\"><p>", EscapeHtml(b.reason), " <small>at ",
                      EscapeHtml(b.file), ":", b.line, " (", EscapeHtml(b.instruction), ", offset ",
                      b.offset, ")</small></p>\n", SourceExcerpt(b.file, b.line), "</div>\n");
    }
  }
  if (!cache.recompile_reasons.empty()) {
    absl::StrAppend(&out, "<h3>Recompiles</h3>\n<ol class=\"recompiles\">\n");
    for (const std::string& reason : cache.recompile_reasons) {
      absl::StrAppend(&out, "<li>", EscapeHtml(reason), "</li>\n");
    }
    absl::StrAppend(&out, "</ol>\n");
  }
  return absl::StrCat(out, "</section>\n");
}

PyObject* FnReport(PyObject*, PyObject* path) {
  if (!PyUnicode_Check(path)) {
    PyErr_Format(PyExc_TypeError, "report() expects a file name (str), got %s", Py_TYPE(path)->tp_name);
    return nullptr;
  }
  const std::optional<std::string> file = py::Utf8(path);
  if (!file) {
    PyErr_SetString(PyExc_ValueError, "report(): the file name is not valid UTF-8 text");
    return nullptr;
  }
  if (absl::Status status = WriteReport(*file); !status.ok()) {
    PyErr_SetString(PyExc_OSError, std::string(status.message()).c_str());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyMethodDef report_functions[] = {
    {"report", FnReport, METH_O,
     "report(path): write an HTML report of every compiled frame (graphs, guards, breaks, "
     "recompiles, kernels)"},
    {nullptr, nullptr, 0, nullptr},
};

// True when some segment of the frame runs a captured graph (not only fallbacks).
bool HasCompiledGraph(const CodeCache& cache) {
  for (const auto& entry : cache.AllEntries()) {
    if (!entry->fallback() && entry->graph() != nullptr && !entry->graph()->nodes().empty()) return true;
  }
  return false;
}

// A contents list and the frames' sections, numbered from `first_index` (anchors stay unique).
std::pair<std::string, std::string> FrameList(const std::vector<const CodeCache*>& frames, int first_index,
                                              absl::string_view when_empty) {
  if (frames.empty()) return {absl::StrCat("<p>", when_empty, "</p>\n"), ""};
  std::string contents = "<ul>\n", sections;
  for (size_t i = 0; i < frames.size(); ++i) {
    const int index = first_index + static_cast<int>(i);
    PyCodeObject* code = frames[i]->code;
    absl::StrAppendFormat(&contents, "<li><a href=\"#frame-%d\">%s</a> <small>%s:%d</small></li>\n", index,
                          EscapeHtml(CodeName(code)), EscapeHtml(CodeFile(code)), code->co_firstlineno);
    absl::StrAppend(&sections, FrameSection(*frames[i], index));
  }
  return {contents + "</ul>\n", sections};
}

}  // namespace

absl::StatusOr<std::string> RenderReport() {
  // Compiled frames first; then frames dyntrace looked at but left to CPython (their breaks say
  // why), so a reader finds what did not compile too.
  std::vector<const CodeCache*> compiled, uncompiled;
  for (const CodeCache* cache : AllCaches()) {
    if (HasCompiledGraph(*cache)) {
      compiled.push_back(cache);
    } else if (!cache->segments.empty() || !cache->breaks.empty() || !cache->recompile_reasons.empty()) {
      uncompiled.push_back(cache);
    }
  }
  const auto [compiled_list, compiled_sections] = FrameList(compiled, 0, "No frame was compiled.");
  const auto [other_list, other_sections] =
      FrameList(uncompiled, static_cast<int>(compiled.size()), "None.");
  return absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
                      "<title>dyntrace report</title>\n<style>", kStyle, "</style>\n</head>\n<body>\n",
                      "<h1>dyntrace report</h1>\n<p>Python ", EscapeHtml(Py_GetVersion()), "</p>\n",
                      "<h2>Summary</h2>\n", SummaryTable(), "<h2>Compiled frames</h2>\n", compiled_list,
                      "<h2>Frames left to CPython</h2>\n", other_list, compiled_sections, other_sections,
                      "<script>", kScript, "</script>\n</body>\n</html>\n");
}

absl::Status WriteReport(const std::string& path) {
  absl::StatusOr<std::string> html = RenderReport();
  if (!html.ok()) return html.status();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot open ", path, " for writing"));
  out << *html;
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("could not write all of ", path));
  return absl::OkStatus();
}

bool AddReportBindings(PyObject* module) { return PyModule_AddFunctions(module, report_functions) >= 0; }

}  // namespace dt::interpreter

#include "cli/stats_table.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dt::cli {
namespace {

int64_t IntAt(PyObject* stats, const char* key) {
  PyObject* v = PyDict_GetItemString(stats, key);  // borrowed
  if (v == nullptr || !PyLong_Check(v)) return 0;
  const long long n = PyLong_AsLongLong(v);
  if (n == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  return n;
}

double FloatAt(PyObject* stats, const char* key) {
  PyObject* v = PyDict_GetItemString(stats, key);  // borrowed
  if (v == nullptr || !(PyFloat_Check(v) || PyLong_Check(v))) return 0;
  const double d = PyFloat_AsDouble(v);
  if (d == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  return d;
}

std::vector<std::string> StringsAt(PyObject* stats, const char* key) {
  std::vector<std::string> out;
  PyObject* v = PyDict_GetItemString(stats, key);  // borrowed
  if (v == nullptr || !PyList_Check(v)) return out;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); ++i) {
    PyObject* item = PyList_GET_ITEM(v, i);  // borrowed
    if (!PyUnicode_Check(item)) continue;
    if (const char* text = PyUnicode_AsUTF8(item)) out.emplace_back(text);
    else PyErr_Clear();
  }
  return out;
}

// {reason: count} with its non-zero counts, in the dict's order.
std::vector<std::pair<std::string, int64_t>> CountsAt(PyObject* stats, const char* key) {
  std::vector<std::pair<std::string, int64_t>> out;
  PyObject* d = PyDict_GetItemString(stats, key);  // borrowed
  if (d == nullptr || !PyDict_Check(d)) return out;
  PyObject* k;
  PyObject* v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(d, &pos, &k, &v)) {  // borrowed
    const char* text = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : nullptr;
    const long long n = PyLong_Check(v) ? PyLong_AsLongLong(v) : 0;
    if (PyErr_Occurred()) PyErr_Clear();
    if (text != nullptr && n > 0) out.emplace_back(text, n);
  }
  return out;
}

void AppendRow(std::string& out, absl::string_view label, absl::string_view value) {
  absl::StrAppendFormat(&out, "  %-26s %12s\n", label, value);
}

void AppendReasons(std::string& out, const std::vector<std::string>& reasons) {
  for (const auto& [text, count] : CountByText(reasons)) {
    absl::StrAppendFormat(&out, "      %4dx  %s\n", count, text);
  }
}

}  // namespace

StatsSummary SummaryFromDict(PyObject* stats) {
  StatsSummary s;
  s.frames_seen = IntAt(stats, "frames_seen");
  s.frames_traced = IntAt(stats, "frames_traced");
  s.frames_skipped = IntAt(stats, "frames_skipped");
  s.skipped_by = CountsAt(stats, "frames_skipped_by");
  s.frames_generator = IntAt(stats, "frames_generator");
  s.frames_excluded = IntAt(stats, "frames_excluded");
  PyObject* coverage = PyDict_GetItemString(stats, "coverage");  // borrowed
  s.coverage = coverage != nullptr && PyFloat_Check(coverage) ? PyFloat_AS_DOUBLE(coverage) : -1;
  s.cache_hits = IntAt(stats, "cache_hits");
  s.cache_misses = IntAt(stats, "cache_misses");
  s.recompiles = IntAt(stats, "recompiles");
  s.graphs = IntAt(stats, "graphs");
  s.graph_breaks = IntAt(stats, "graph_breaks");
  s.fallbacks = IntAt(stats, "fallbacks");
  s.kernels_compiled = IntAt(stats, "kernels_compiled");
  s.kernels_cached = IntAt(stats, "kernels_cached");
  s.compile_seconds = FloatAt(stats, "compile_seconds");
  s.cubins_compiled = IntAt(stats, "cubins_compiled");
  s.cubins_cached = IntAt(stats, "cubins_cached");
  s.nvrtc_seconds = FloatAt(stats, "nvrtc_seconds");
  s.cuda_graph_captures = IntAt(stats, "cuda_graph_captures");
  s.cuda_graph_replays = IntAt(stats, "cuda_graph_replays");
  s.cuda_graph_patches = IntAt(stats, "cuda_graph_patches");
  s.recompile_reasons = StringsAt(stats, "recompile_reasons");
  s.break_reasons = StringsAt(stats, "break_reasons");
  return s;
}

std::vector<std::pair<std::string, int>> CountByText(const std::vector<std::string>& texts) {
  std::vector<std::pair<std::string, int>> counts;
  absl::flat_hash_map<std::string, size_t> index;
  for (const std::string& t : texts) {
    auto [it, inserted] = index.try_emplace(t, counts.size());
    if (inserted) counts.emplace_back(t, 0);
    ++counts[it->second].second;
  }
  std::stable_sort(counts.begin(), counts.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return counts;
}

std::string FormatStatsTable(const StatsSummary& s) {
  std::string out = "dyntrace stats\n";
  AppendRow(out, "frames seen", absl::StrCat(s.frames_seen));
  AppendRow(out, "frames traced", absl::StrCat(s.frames_traced));
  AppendRow(out, "frames skipped", absl::StrCat(s.frames_skipped));
  for (const auto& [reason, count] : s.skipped_by) AppendRow(out, absl::StrCat("  ", reason), absl::StrCat(count));
  AppendRow(out, "generator/coroutine frames", absl::StrCat(s.frames_generator));
  AppendRow(out, "library/module-body frames", absl::StrCat(s.frames_excluded));
  // Frames seen over the frames dyntrace could run (generator and excluded frames are not among
  // them, so a script's coverage is not diluted by the library code it calls).
  if (s.coverage >= 0) AppendRow(out, "coverage", absl::StrFormat("%.3f", s.coverage));
  AppendRow(out, "cache hits", absl::StrCat(s.cache_hits));
  AppendRow(out, "cache misses", absl::StrCat(s.cache_misses));
  AppendRow(out, "graphs captured", absl::StrCat(s.graphs));
  AppendRow(out, "fallbacks to CPython", absl::StrCat(s.fallbacks));
  AppendRow(out, "recompiles", absl::StrCat(s.recompiles));
  AppendReasons(out, s.recompile_reasons);
  AppendRow(out, "graph breaks", absl::StrCat(s.graph_breaks));
  AppendReasons(out, s.break_reasons);
  AppendRow(out, "kernels compiled (cold)", absl::StrCat(s.kernels_compiled));
  AppendRow(out, "kernels cached", absl::StrCat(s.kernels_cached));
  AppendRow(out, "compile time", absl::StrFormat("%.3f s", s.compile_seconds));
  // CUDA rows only where the cuda backend ran, so CPU-only runs keep a short table.
  if (s.cubins_compiled + s.cubins_cached + s.cuda_graph_captures + s.cuda_graph_replays > 0) {
    AppendRow(out, "CUDA kernels compiled (NVRTC)", absl::StrCat(s.cubins_compiled));
    AppendRow(out, "CUDA kernels cached", absl::StrCat(s.cubins_cached));
    AppendRow(out, "NVRTC time", absl::StrFormat("%.3f s", s.nvrtc_seconds));
    AppendRow(out, "CUDA graphs captured", absl::StrCat(s.cuda_graph_captures));
    AppendRow(out, "CUDA graph replays", absl::StrCat(s.cuda_graph_replays));
    AppendRow(out, "kernel nodes re-pointed", absl::StrCat(s.cuda_graph_patches));
  }
  return out;
}

}  // namespace dt::cli

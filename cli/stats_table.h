// cli/stats_table.h: the table `dyntrace --stats` prints at exit.
//
// It is made from the dict dyntrace.stats() returns, so every counter has one definition (the
// module's). Keys the running module does not have yet (the kernel counters of the compiler
// backends) read as 0.
//
//   StatsSummary s = SummaryFromDict(stats_dict);   // REQUIRES: the GIL
//   std::fputs(FormatStatsTable(s).c_str(), stderr);
#ifndef DYNTRACE_CLI_STATS_TABLE_H_
#define DYNTRACE_CLI_STATS_TABLE_H_

#include <Python.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dt::cli {

struct StatsSummary {
  int64_t frames_seen = 0, frames_traced = 0, frames_skipped = 0;
  std::vector<std::pair<std::string, int64_t>> skipped_by;  // reason, frames (reasons with none left out)
  int64_t frames_generator = 0;  // generators and coroutines: not in frames_skipped
  // Module bodies, the standard library, installed packages: not in frames_skipped either (what
  // a user asks dyntrace to run is their own functions); always 0 outside stress mode's scope.
  int64_t frames_excluded = 0;
  double coverage = -1;          // frames seen / (seen + skipped); -1: no frame
  int64_t cache_hits = 0, cache_misses = 0;
  int64_t recompiles = 0, graphs = 0, graph_breaks = 0, fallbacks = 0;
  int64_t kernels_compiled = 0, kernels_cached = 0;
  double compile_seconds = 0;
  // The cuda backend: CUBINs from NVRTC, and CUDA-graph captures and replays.
  int64_t cubins_compiled = 0, cubins_cached = 0;
  double nvrtc_seconds = 0;
  int64_t cuda_graph_captures = 0, cuda_graph_replays = 0, cuda_graph_patches = 0;
  std::vector<std::string> recompile_reasons;
  std::vector<std::string> break_reasons;
};

// REQUIRES: the GIL; `stats` is dyntrace.stats()'s dict. Missing or mistyped keys read as 0 / [].
StatsSummary SummaryFromDict(PyObject* stats);

// Distinct texts with how often each occurs, most frequent first (ties keep first-seen order).
std::vector<std::pair<std::string, int>> CountByText(const std::vector<std::string>& texts);

// The printed table, ending with a newline.
std::string FormatStatsTable(const StatsSummary& s);

}  // namespace dt::cli

#endif  // DYNTRACE_CLI_STATS_TABLE_H_

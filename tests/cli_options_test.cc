// Unit tests of the dyntrace command's option parsing and --stats table (no Python started).
#include <string>
#include <vector>

#include "cli/options.h"
#include "cli/stats_table.h"
#include "gtest/gtest.h"
#include "runtime/log.h"

namespace dt::cli {
namespace {

absl::StatusOr<Options> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "dyntrace");
  return ParseOptions(static_cast<int>(args.size()), args.data());
}

TEST(Options, ScriptAndItsArgumentsEndOptionParsing) {
  auto o = Parse({"--stats", "--backend", "eager", "run.py", "--stats", "-m", "x"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->stats);
  EXPECT_EQ(o->backend, "eager");
  EXPECT_EQ(o->script, "run.py");
  EXPECT_TRUE(o->module.empty());
  EXPECT_EQ(o->program_args, (std::vector<std::string>{"--stats", "-m", "x"}));
}

TEST(Options, ModuleForms) {
  auto o = Parse({"--fullgraph", "-m", "pkg.tool", "a"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->fullgraph);
  EXPECT_EQ(o->module, "pkg.tool");
  EXPECT_EQ(o->program_args, std::vector<std::string>{"a"});
  auto joined = Parse({"-mpkg.tool"});
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->module, "pkg.tool");
}

TEST(Options, ValuesWithEqualsOrSeparate) {
  auto o = Parse({"--report=out.html", "--log", "graph,recompiles", "--stress", "s.py"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->report_path, "out.html");
  EXPECT_TRUE(o->logs_given);
  EXPECT_EQ(o->logs, "graph,recompiles");
  EXPECT_TRUE(o->stress);
  EXPECT_TRUE(log::Enabled(log::Kind::kRecompiles));
  ASSERT_TRUE(log::Configure("").ok());
}

TEST(Options, DoubleDashNamesAScriptThatLooksLikeAnOption) {
  auto o = Parse({"--", "--weird.py", "x"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->script, "--weird.py");
  EXPECT_EQ(o->program_args, std::vector<std::string>{"x"});
}

TEST(Options, HelpWinsAndErrorsNameTheProblem) {
  auto help = Parse({"--stats", "--help", "--bogus"});
  ASSERT_TRUE(help.ok());
  EXPECT_TRUE(help->help);
  EXPECT_NE(Usage().find("--report FILE.html"), std::string::npos);
  struct Case {
    std::vector<const char*> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{{{"--bogus", "s.py"}, "unknown option '--bogus'"},
                                         {{}, "no script"},
                                         {{"--backend"}, "--backend needs a value"},
                                         {{"-m"}, "-m needs a module name"},
                                         {{"--log", "graph,nope", "s.py"}, "unknown log kind 'nope'"},
                                         {{"-"}, "stdin"}}) {
    auto o = Parse(c.args);
    ASSERT_FALSE(o.ok()) << c.message;
    EXPECT_NE(o.status().message().find(c.message), absl::string_view::npos) << o.status();
  }
}

TEST(StatsTable, CountsReasonsMostFrequentFirst) {
  auto counts = CountByText({"b", "a", "b", "c", "a", "b"});
  ASSERT_EQ(counts.size(), 3u);
  EXPECT_EQ(counts[0], (std::pair<std::string, int>{"b", 3}));
  EXPECT_EQ(counts[1], (std::pair<std::string, int>{"a", 2}));
  EXPECT_EQ(counts[2], (std::pair<std::string, int>{"c", 1}));
}

TEST(StatsTable, RowsAndReasons) {
  StatsSummary s;
  s.frames_seen = 12;
  s.frames_skipped = 4;
  s.skipped_by = {{"no tensor work", 3}, {"cache_limit", 1}};
  s.frames_excluded = 40;
  s.frames_generator = 5;
  s.coverage = 0.75;
  s.cache_hits = 7;
  s.recompiles = 2;
  s.recompile_reasons = {"f: L['x'].dtype: expected float32, actual float64",
                         "f: L['x'].dtype: expected float32, actual float64"};
  s.kernels_cached = 3;
  s.compile_seconds = 1.25;
  const std::string table = FormatStatsTable(s);
  EXPECT_NE(table.find("  frames seen                          12\n"), std::string::npos) << table;
  EXPECT_NE(table.find("  frames skipped                        4\n"
                       "    no tensor work                      3\n"
                       "    cache_limit                         1\n"
                       "  generator/coroutine frames            5\n"
                       "  library/module-body frames           40\n"
                       "  coverage                          0.750\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("  recompiles                            2\n"
                       "         2x  f: L['x'].dtype: expected float32, actual float64\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("  kernels cached                        3\n"), std::string::npos) << table;
  EXPECT_NE(table.find("  compile time                    1.250 s\n"), std::string::npos) << table;
  EXPECT_EQ(table.find("CUDA"), std::string::npos) << "CUDA rows in a CPU-only table:\n" << table;
  s.cubins_compiled = 4;
  s.cuda_graph_captures = 1;
  s.cuda_graph_replays = 9;
  const std::string cuda_table = FormatStatsTable(s);
  EXPECT_NE(cuda_table.find("CUDA kernels compiled (NVRTC)"), std::string::npos) << cuda_table;
  EXPECT_NE(cuda_table.find("  CUDA graph replays                    9\n"), std::string::npos) << cuda_table;
}

TEST(Options, CudaGraphs) {
  EXPECT_EQ(Parse({"s.py"})->cuda_graphs, "auto");
  EXPECT_EQ(Parse({"--cuda-graphs", "false", "s.py"})->cuda_graphs, "false");
  EXPECT_EQ(Parse({"--cuda-graphs=true", "s.py"})->cuda_graphs, "true");
  auto bad = Parse({"--cuda-graphs", "yes", "s.py"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("auto, true or false"), absl::string_view::npos) << bad.status();
}

}  // namespace
}  // namespace dt::cli

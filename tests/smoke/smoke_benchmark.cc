// Proves that benchmark and benchmark_main link; not a meaningful benchmark.
#include <string>

#include "absl/container/flat_hash_map.h"
#include "benchmark/benchmark.h"

namespace {

void BM_FlatHashMapInsert(benchmark::State& state) {
  for (auto _ : state) {
    absl::flat_hash_map<int, int> map;
    for (int i = 0; i < state.range(0); ++i) map[i] = i;
    benchmark::DoNotOptimize(map);
  }
}
BENCHMARK(BM_FlatHashMapInsert)->Arg(64)->Arg(4096);

}  // namespace

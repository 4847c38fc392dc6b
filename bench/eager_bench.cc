// Eager op throughput against memcpy, measured side by side in one run.
//
// For each op on 16M float32 elements it reports the bytes the op must move (inputs read plus
// output written) per second, as a fraction of what memcpy achieves moving the same number of
// bytes on this machine right now. 1.0 means the op is as fast as copying its data.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "graph/op_registry.h"
#include "runtime/allocator.h"
#include "runtime/parallel.h"
#include "runtime/random.h"

namespace dt {
namespace {

constexpr int64_t kElements = 16 * 1024 * 1024;

// Best-of-N wall time in seconds: the least disturbed run is the most representative.
double BestTime(const std::function<void()>& fn, int repeats) {
  fn();  // warm caches and the allocator
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    best = std::min(best, elapsed.count());
  }
  return best;
}

// memcpy of `bytes` split as read+write of bytes/2 each, so "bytes moved" means the same thing.
double MemcpySeconds(int64_t bytes_moved) {
  const size_t half = static_cast<size_t>(bytes_moved / 2);
  std::vector<char> src(half, 1), dst(half, 0);
  return BestTime([&] { std::memcpy(dst.data(), src.data(), half); }, 10);
}

Tensor Random(Dims shape) {
  Tensor t = Tensor::Empty(shape, DType::kFloat32, Device::Cpu());
  FillNormal(t);
  return t;
}

struct Workload {
  std::string name;
  int64_t bytes_moved;
  std::function<void()> run;
};

}  // namespace
}  // namespace dt

int main() {
  using namespace dt;
  ManualSeed(0);
  const int64_t n = kElements;
  const int64_t f32 = 4;
  Tensor a = Random({n});
  Tensor b = Random({n});
  Tensor rows = Random({n / 1024, 1024});
  auto must = [](absl::StatusOr<Tensor> r) {
    if (!r.ok()) {
      std::fprintf(stderr, "benchmark op failed: %s\n", std::string(r.status().message()).c_str());
      std::exit(1);
    }
  };
  std::vector<Workload> workloads = {
      {"add(a, b)", 3 * n * f32, [&] { must(Call("add", {a, b})); }},
      {"mul(a, 2.0)", 2 * n * f32, [&] { must(Call("mul", {a, Scalar::Float(2.0)})); }},
      {"exp(a)", 2 * n * f32, [&] { must(Call("exp", {a})); }},
      {"gelu(a)", 2 * n * f32, [&] { must(Call("gelu", {a})); }},
      {"mul(a, 1) (int scalar)", 2 * n * f32, [&] { must(Call("mul", {a, Scalar::Int(1)})); }},
      {"sum(a)", n * f32, [&] { must(Call("sum", {a})); }},
      {"sum(rows, dim=1)", n * f32 + (n / 1024) * f32, [&] { must(Call("sum", {rows, Dims{1}})); }},
      {"softmax(rows, -1)", 2 * n * f32, [&] { must(Call("softmax", {rows, Scalar::Int(-1)})); }},
  };

  std::printf("dyntrace eager throughput on %lld float32 elements (%d threads)\n",
              static_cast<long long>(n), MaxThreads());
  std::printf("%-26s %12s %12s %14s\n", "op", "time (ms)", "GB/s", "vs memcpy");
  for (const Workload& w : workloads) {
    const double seconds = BestTime(w.run, 5);
    const double copy_seconds = MemcpySeconds(w.bytes_moved);
    std::printf("%-26s %12.2f %12.2f %13.2fx\n", w.name.c_str(), seconds * 1e3,
                w.bytes_moved / seconds / 1e9, copy_seconds / seconds);
  }
  std::printf("(vs memcpy: op bytes/s divided by single-threaded memcpy bytes/s for the same "
              "byte count; 1.00x = copy speed)\n");
  return 0;
}

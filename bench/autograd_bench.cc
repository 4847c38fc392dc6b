// The backward engine's own cost: a 1-element, 20-op graph's backward pass beside the same
// number of eager op calls made directly from C++ (what its kernels and dispatch cost), in one
// run. The bar: the engine adds under 20 µs above the ops it runs.
#include <chrono>
#include <cstdio>
#include <functional>

#include "autograd/engine.h"
#include "autograd/record.h"
#include "graph/op_registry.h"
#include "runtime/autograd_meta.h"

namespace dt {
namespace {

constexpr int kOps = 20;

double BestMicros(const std::function<void()>& fn, int repeats, int inner) {
  for (int i = 0; i < inner; ++i) fn();
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < inner; ++i) fn();
    const std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
    best = std::min(best, elapsed.count() / inner);
  }
  return best;
}

Tensor Chain(const Tensor& x) {
  Tensor y = x;
  for (int i = 0; i < kOps; ++i) y = *Call("mul", {y, Scalar::Float(1.0001)});
  return *Call("sum", {y});
}

int Main() {
  InstallAutograd();
  Tensor x = *Call("ones", {Dims{1}});
  auto meta = std::make_shared<AutogradMeta>();
  meta->requires_grad = true;
  x.set_autograd(meta);
  Tensor loss = Chain(x);
  BackwardRequest request{.roots = {loss}, .retain_graph = true};
  const double backward = BestMicros([&] { (void)RunBackward(request); }, 20, 2000);
  // The backward pass runs about as many ops as the forward (one mul per mul, the sum's
  // broadcast, the leaf's accumulation): the same calls without recording stand for them.
  Tensor plain = x;
  plain.set_autograd(nullptr);
  const double ops = BestMicros([&] { (void)Chain(plain); }, 20, 2000);
  const double forward = BestMicros([&] { (void)Chain(x); }, 20, 2000);
  std::printf("backward of a 1-element %d-op graph: %.2f us\n", kOps + 1, backward);
  std::printf("the same number of op calls, unrecorded: %.2f us\n", ops);
  std::printf("engine overhead above its ops: %.2f us (bar: 20 us)\n", backward - ops);
  std::printf("forward recording overhead: %.2f us per op (%.2f us recorded vs %.2f us plain)\n",
              (forward - ops) / (kOps + 1), forward, ops);
  return 0;
}

}  // namespace
}  // namespace dt

int main() { return dt::Main(); }

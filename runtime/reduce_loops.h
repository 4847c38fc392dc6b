// runtime/reduce_loops.h: inner loops that fold input elements into an accumulator tensor.
//
// Operand 0 is the accumulator (stride 0 along reduced dims), operand 1 the input. Combine is a
// functor calling a dt::scalar::reduce_* function. A run along a reduced dim (accumulator stride 0)
// accumulates in a register and stores once.
#ifndef DYNTRACE_RUNTIME_REDUCE_LOOPS_H_
#define DYNTRACE_RUNTIME_REDUCE_LOOPS_H_

#include <cstdint>
#include <type_traits>

#include "runtime/dtype.h"

namespace dt {

// S: input storage type, A: accumulator type.
template <typename S, typename A, typename Combine>
void ReduceLoop(char* const* p, const int64_t* s, int64_t n) {
  auto load = [](const char* q) { return static_cast<A>(static_cast<ComputeType<S>>(*reinterpret_cast<const S*>(q))); };
  if (s[0] == 0) {
    A acc = *reinterpret_cast<A*>(p[0]);
    if (s[1] == sizeof(S)) {
      const S* in = reinterpret_cast<const S*>(p[1]);
      int64_t i = 0;
      if constexpr (!std::is_same_v<A, ComputeType<S>>) {
        // A wider accumulator (float summed in double): four independent chains instead of one
        // add waiting on the last (a row sum was latency-bound). The reordering changes the
        // double sum far below the input's precision; accumulators as wide as the input keep
        // one chain and their order, as before. Chains 1-3 start at elements 1-3, so no
        // combiner needs an identity here.
        if (n >= 8) {
          A part[4] = {Combine::Apply(acc, load(p[1])), static_cast<A>(static_cast<ComputeType<S>>(in[1])),
                       static_cast<A>(static_cast<ComputeType<S>>(in[2])),
                       static_cast<A>(static_cast<ComputeType<S>>(in[3]))};
          for (i = 4; i + 4 <= n; i += 4) {
            for (int k = 0; k < 4; ++k) {
              part[k] = Combine::Apply(part[k], static_cast<A>(static_cast<ComputeType<S>>(in[i + k])));
            }
          }
          acc = Combine::Apply(Combine::Apply(part[0], part[1]), Combine::Apply(part[2], part[3]));
        }
      }
      for (; i < n; ++i) {
        acc = Combine::Apply(acc, static_cast<A>(static_cast<ComputeType<S>>(in[i])));
      }
    } else {
      for (int64_t i = 0; i < n; ++i) acc = Combine::Apply(acc, load(p[1] + i * s[1]));
    }
    *reinterpret_cast<A*>(p[0]) = acc;
    return;
  }
  if (s[0] == sizeof(A) && s[1] == sizeof(S)) {
    // A run along a kept dim, both contiguous (sum over a batch's leading dim: bias and norm
    // weight gradients): element by element, so the loop vectorises without reassociating.
    A* __restrict acc = reinterpret_cast<A*>(p[0]);
    const S* __restrict in = reinterpret_cast<const S*>(p[1]);
    for (int64_t i = 0; i < n; ++i) acc[i] = Combine::Apply(acc[i], static_cast<A>(static_cast<ComputeType<S>>(in[i])));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    A* acc = reinterpret_cast<A*>(p[0] + i * s[0]);
    *acc = Combine::Apply(*acc, load(p[1] + i * s[1]));
  }
}

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_REDUCE_LOOPS_H_

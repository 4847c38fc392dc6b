// runtime/reduce_loops.h: inner loops that fold input elements into an accumulator tensor.
//
// Operand 0 is the accumulator (stride 0 along reduced dims), operand 1 the input. Combine is a
// functor calling a dt::scalar::reduce_* function. A run along a reduced dim (accumulator stride 0)
// accumulates in a register and stores once.
#ifndef DYNTRACE_RUNTIME_REDUCE_LOOPS_H_
#define DYNTRACE_RUNTIME_REDUCE_LOOPS_H_

#include <cstdint>

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
      for (int64_t i = 0; i < n; ++i) {
        acc = Combine::Apply(acc, static_cast<A>(static_cast<ComputeType<S>>(in[i])));
      }
    } else {
      for (int64_t i = 0; i < n; ++i) acc = Combine::Apply(acc, load(p[1] + i * s[1]));
    }
    *reinterpret_cast<A*>(p[0]) = acc;
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    A* acc = reinterpret_cast<A*>(p[0] + i * s[0]);
    *acc = Combine::Apply(*acc, load(p[1] + i * s[1]));
  }
}

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_REDUCE_LOOPS_H_

// runtime/pointwise_loops.h: inner loops that apply an element function from scalar_math.h.
//
// An element functor `Fn` has `template <typename C> static auto Apply(C...)` calling one
// dt::scalar function. PointwiseLoop<S, O, Fn, Arity> reads Arity operands stored as S, computes
// in ComputeType<S> (float for Half), and stores O. The unit-stride case (and the common
// "tensor op broadcast scalar" case) gets its own loop so the compiler vectorises it.
#ifndef DYNTRACE_RUNTIME_POINTWISE_LOOPS_H_
#define DYNTRACE_RUNTIME_POINTWISE_LOOPS_H_

#include <cstdint>
#include <type_traits>

#include "runtime/convert.h"
#include "runtime/dtype.h"
#include "runtime/strided_loop.h"

namespace dt {
namespace internal {

template <typename S>
inline ComputeType<S> Load(const char* p) {
  return static_cast<ComputeType<S>>(*reinterpret_cast<const S*>(p));
}

}  // namespace internal

// flatten: every element function (gelu, its derivative, erf_f32 and exp_f32 within them) is
// inlined into the loop, which then vectorises; a call left out of line runs one element at a
// time (GCC kept gelu_backward out of line, and it took a quarter of an MLP's training step).
// On x86-64 each loop is built twice, for AVX2 and for the baseline, and the loader picks the
// one the machine runs (an ifunc): eight floats a step instead of four, the same operations in
// the same order, so the same results.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DT_ELEMENT_LOOP [[gnu::flatten, gnu::target_clones("avx2", "default")]]
#else
#define DT_ELEMENT_LOOP [[gnu::flatten]]
#endif

template <typename S, typename O, typename Fn>
DT_ELEMENT_LOOP void UnaryPointwiseLoop(char* const* p, const int64_t* s, int64_t n) {
  using C = ComputeType<S>;
  if (s[0] == sizeof(O) && s[1] == sizeof(S)) {
    O* __restrict out = reinterpret_cast<O*>(p[0]);
    const S* __restrict in = reinterpret_cast<const S*>(p[1]);
    for (int64_t i = 0; i < n; ++i) out[i] = Store<O>(Fn::Apply(static_cast<C>(in[i])));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<O*>(p[0] + i * s[0]) =
        Store<O>(Fn::Apply(internal::Load<S>(p[1] + i * s[1])));
  }
}

template <typename S, typename O, typename Fn>
DT_ELEMENT_LOOP void BinaryPointwiseLoop(char* const* p, const int64_t* s, int64_t n) {
  using C = ComputeType<S>;
  O* __restrict out = reinterpret_cast<O*>(p[0]);
  if (s[0] == sizeof(O) && s[1] == sizeof(S) && s[2] == sizeof(S)) {
    const S* __restrict a = reinterpret_cast<const S*>(p[1]);
    const S* __restrict b = reinterpret_cast<const S*>(p[2]);
    for (int64_t i = 0; i < n; ++i) {
      out[i] = Store<O>(Fn::Apply(static_cast<C>(a[i]), static_cast<C>(b[i])));
    }
    return;
  }
  if (s[0] == sizeof(O) && s[1] == sizeof(S) && s[2] == 0) {
    const S* __restrict a = reinterpret_cast<const S*>(p[1]);
    const C b = internal::Load<S>(p[2]);
    for (int64_t i = 0; i < n; ++i) out[i] = Store<O>(Fn::Apply(static_cast<C>(a[i]), b));
    return;
  }
  if (s[0] == sizeof(O) && s[1] == 0 && s[2] == sizeof(S)) {
    const C a = internal::Load<S>(p[1]);
    const S* __restrict b = reinterpret_cast<const S*>(p[2]);
    for (int64_t i = 0; i < n; ++i) out[i] = Store<O>(Fn::Apply(a, static_cast<C>(b[i])));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<O*>(p[0] + i * s[0]) = Store<O>(
        Fn::Apply(internal::Load<S>(p[1] + i * s[1]), internal::Load<S>(p[2] + i * s[2])));
  }
}

// where(cond, a, b): operand 1 is the bool condition, operands 2 and 3 are stored as S.
template <typename S, typename O, typename Fn>
void WherePointwiseLoop(char* const* p, const int64_t* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const bool c = *reinterpret_cast<const bool*>(p[1] + i * s[1]);
    *reinterpret_cast<O*>(p[0] + i * s[0]) = Store<O>(
        Fn::Apply(c, internal::Load<S>(p[2] + i * s[2]), internal::Load<S>(p[3] + i * s[3])));
  }
}

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_POINTWISE_LOOPS_H_

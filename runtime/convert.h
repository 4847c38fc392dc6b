// runtime/convert.h: how one element changes dtype (CastTo, `.to()`, type promotion).
//
// The eager copy loops and the generated kernels both call Convert, so a compiled cast rounds
// exactly like an eager one: through the source's compute type, with nonzero-is-true for bool and
// round-to-nearest-even into float16 and bfloat16. Header-only and self-contained for the same reason as
// scalar_math.h: the JIT pastes it into generated translation units.
#ifndef DYNTRACE_RUNTIME_CONVERT_H_
#define DYNTRACE_RUNTIME_CONVERT_H_

#include "runtime/half.h"
#include "runtime/kernel_portability.h"

namespace dt {

template <typename T> struct ComputeTypeOf { using type = T; };
template <> struct ComputeTypeOf<Half> { using type = float; };
template <> struct ComputeTypeOf<BFloat16> { using type = float; };
// The type arithmetic happens in for values stored as T.
template <typename T> using ComputeType = typename ComputeTypeOf<T>::type;

// An integer converted to a float never gives -0.0. GCC, allowed to by -fno-trapping-math,
// folds float -> int -> float in one kernel into trunc(), which keeps the sign (-0.5 -> -0.0);
// the select below gives back eager's +0.0. (`+ 0.0` does not: GCC drops it first, knowing an
// integer's float is never -0.0, then folds.) It still vectorises, as a compare and a blend.
template <typename C> inline constexpr bool kIntegral = C(0.5) == C(0);
template <typename F> DT_HD F PositiveZero(F r) { return r == F(0) ? F(0) : r; }

// A float converted to an integer type: NaN and values outside the 32-bit (64-bit for 8-byte
// results) range give that range's most negative value, x86's "integer indefinite", and a
// narrower result keeps the low bits of the 32-bit one. C++ leaves these conversions undefined,
// and a kernel's vectorised or folded conversion (or a GPU's) answered differently from the
// eager loop's scalar one (NaN -> 0 where eager and PyTorch give -9223372036854775808); spelled
// out, every backend agrees with eager and with PyTorch on x86.
template <typename Out, typename C>
DT_HD Out FloatToInteger(C v) {
  if constexpr (sizeof(Out) == 8) {
    constexpr long long kMin = -9223372036854775807LL - 1;
    const bool in_range = v >= C(-9223372036854775808.0) && v < C(9223372036854775808.0);
    return static_cast<Out>(in_range ? static_cast<long long>(v) : kMin);
  } else {
    constexpr int kMin = -2147483647 - 1;
    const bool in_range = v >= C(-2147483648.0) && v < C(2147483648.0);
    return static_cast<Out>(in_range ? static_cast<int>(v) : kMin);
  }
}

template <typename Out, typename In>
DT_HD Out Convert(In v) {
  using C = ComputeType<In>;
  if constexpr (kSameType<Out, In>) {
    return v;
  } else if constexpr (kSameType<Out, bool>) {
    return static_cast<C>(v) != C(0);
  } else if constexpr (kSameType<Out, Half>) {
    if constexpr (kIntegral<C>) return Half(PositiveZero(static_cast<float>(static_cast<C>(v))));
    return Half(static_cast<float>(static_cast<C>(v)));
  } else if constexpr (kSameType<Out, BFloat16>) {
    if constexpr (kIntegral<C>) {
      return BFloat16(PositiveZero(static_cast<float>(static_cast<C>(v))));
    }
    return BFloat16(static_cast<float>(static_cast<C>(v)));
  } else if constexpr (kIntegral<C> && !kIntegral<Out>) {
    return PositiveZero(static_cast<Out>(static_cast<C>(v)));
  } else if constexpr (!kIntegral<C> && !kSameType<C, bool> && kIntegral<Out>) {  // a float to an integer
    return FloatToInteger<Out>(static_cast<C>(v));
  } else {
    return static_cast<Out>(static_cast<C>(v));
  }
}

// An op's result (computed in its compute type) stored as `Out`: float16 and bfloat16 round to
// nearest even.
template <typename Out, typename V>
DT_HD Out Store(V v) {
  if constexpr (kSameType<Out, Half>) {
    return Half(static_cast<float>(v));
  } else if constexpr (kSameType<Out, BFloat16>) {
    return BFloat16(static_cast<float>(v));
  } else {
    return static_cast<Out>(v);
  }
}

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_CONVERT_H_

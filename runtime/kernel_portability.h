// runtime/kernel_portability.h: what the pasted kernel headers need from their surroundings.
//
// half.h, convert.h and scalar_math.h are compiled three ways: by the project's own C++ build, by
// the host compiler inside generated CPU kernels (DT_GENERATED_KERNEL: no standard headers, they
// dominate compile time), and by NVRTC inside generated CUDA kernels (__CUDACC_RTC__: there are no
// standard headers at all). This header is the one place that papers over the difference: the
// function qualifier, fixed-width integers, a bit cast, IEEE special values and a type equality
// test. It is pasted first into every generated translation unit (see jit:kernel_prelude_cc).
//
//   DT_HD float Negate(float x) { return dt::BitCast<float>(dt::BitCast<uint32_t>(x) ^ 0x80000000u); }
#ifndef DYNTRACE_RUNTIME_KERNEL_PORTABILITY_H_
#define DYNTRACE_RUNTIME_KERNEL_PORTABILITY_H_

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DT_HD __host__ __device__ __forceinline__
#define DT_HD_ALWAYS_INLINE __host__ __device__ __forceinline__
// Fully unrolls the next loop (constant trip count): its array indices become registers.
#define DT_UNROLL _Pragma("unroll")
#elif defined(DT_GENERATED_KERNEL)
// A generated CPU kernel's loop runs its element functions inline, or it does not vectorise
// (GCC kept gelu and its derivative out of line there: 5x slower than the eager loops, which
// are flattened; see runtime/pointwise_loops.h).
#define DT_HD inline __attribute__((always_inline))
#define DT_HD_ALWAYS_INLINE inline __attribute__((always_inline))
#define DT_UNROLL
#else
#define DT_HD inline
// For the element functions loops must vectorise through: a call the compiler chose not to
// inline (exp_f32 inside gelu's derivative did not) leaves the loop one element at a time.
#define DT_HD_ALWAYS_INLINE inline __attribute__((always_inline))
#define DT_UNROLL
#endif

#if defined(__CUDACC_RTC__)
// NVRTC has no <cstdint>. The widths match the LP64 host, so a struct shared by host and device
// code (jit/cuda_launch_abi.h) has one layout.
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;
#define INT64_C(c) c##L
#else
#include <cstdint>
#endif

namespace dt {

template <typename A, typename B> inline constexpr bool kSameType = false;
template <typename A> inline constexpr bool kSameType<A, A> = true;

// The bits of `from` read as a `To` (same size). memcpy is a builtin in CUDA device code; host
// code uses the compiler's builtin so that generated kernels need no <cstring>.
template <typename To, typename From>
DT_HD To BitCast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "BitCast needs equal sizes");
  To to;
#if defined(__CUDACC_RTC__)
  memcpy(&to, &from, sizeof(to));
#else
  __builtin_memcpy(&to, &from, sizeof(to));
#endif
  return to;
}

// IEEE special values, spelled the same for every compiler generated code meets.
template <typename T> DT_HD T Infinity();
template <> DT_HD float Infinity<float>() { return BitCast<float>(0x7f800000u); }
template <> DT_HD double Infinity<double>() { return BitCast<double>(uint64_t{0x7ff0000000000000ull}); }
template <typename T> DT_HD T QuietNan();
template <> DT_HD float QuietNan<float>() { return BitCast<float>(0x7fc00000u); }
template <> DT_HD double QuietNan<double>() { return BitCast<double>(uint64_t{0x7ff8000000000000ull}); }

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_KERNEL_PORTABILITY_H_

// runtime/scalar_math.h: the element-level meaning of every pointwise and reduction op.
//
// This header is the single definition of what `exp`, `floor_divide` or `gelu` compute on one
// element. The eager kernels instantiate these templates, and the JIT pastes this very file into
// every translation unit it generates (C++ for the host compiler, CUDA C++ for NVRTC), so eager,
// CPU-compiled and GPU-compiled results agree by construction. It must stay self-contained:
// no includes beyond the C math library and kernel_portability.h, no exceptions, nothing that needs linking.
//
// Arithmetic happens in the op's compute type: float for float16 storage, the type itself
// otherwise. Integer division by zero is excluded by callers (the runtime raises
// ZeroDivisionError first), so these functions never trap.
#ifndef DYNTRACE_RUNTIME_SCALAR_MATH_H_
#define DYNTRACE_RUNTIME_SCALAR_MATH_H_

#include "runtime/kernel_portability.h"

// NVRTC and nvcc provide the math library as builtins (exp, erf ... overloaded for float and
// double); generated CPU kernels reach libm through compiler builtins (below).
#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__) && !defined(DT_GENERATED_KERNEL)
#include <cmath>
#endif

namespace dt {
namespace scalar {

#if defined(DT_GENERATED_KERNEL)
// Generated CPU kernels skip <cmath>, which is most of their compile time: the same libm
// functions, reached through the compiler's builtins (calls to the very same symbols).
#define DT_LIBM_UNARY(name)                                            \
  DT_HD float name(float x) { return __builtin_##name##f(x); }         \
  DT_HD double name(double x) { return __builtin_##name(x); }
#define DT_LIBM_BINARY(name)                                                     \
  DT_HD float name(float a, float b) { return __builtin_##name##f(a, b); }       \
  DT_HD double name(double a, double b) { return __builtin_##name(a, b); }
DT_LIBM_UNARY(ceil) DT_LIBM_UNARY(cos) DT_LIBM_UNARY(erf) DT_LIBM_UNARY(exp)
DT_LIBM_UNARY(exp2) DT_LIBM_UNARY(expm1) DT_LIBM_UNARY(floor) DT_LIBM_UNARY(log)
DT_LIBM_UNARY(log1p) DT_LIBM_UNARY(log2) DT_LIBM_UNARY(nearbyint) DT_LIBM_UNARY(sin)
DT_LIBM_UNARY(sqrt) DT_LIBM_UNARY(tan) DT_LIBM_UNARY(tanh) DT_LIBM_UNARY(trunc)
DT_LIBM_BINARY(atan2) DT_LIBM_BINARY(fmod)
// pow's exponent passes through an empty asm, so the compiler cannot see a constant one and
// rewrite pow(x, 2) as x * x (or pow(x, -1) as 1 / x): those round once, where the powf call
// eager makes (its exponent is a run-time value) may round a near-tie the other way.
DT_HD float pow(float a, float b) {
  __asm__("" : "+r"(b));
  return __builtin_powf(a, b);
}
DT_HD double pow(double a, double b) {
  __asm__("" : "+r"(b));
  return __builtin_pow(a, b);
}
#undef DT_LIBM_UNARY
#undef DT_LIBM_BINARY
#elif !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
using std::abs;
using std::atan2;
using std::ceil;
using std::cos;
using std::erf;
using std::exp;
using std::exp2;
using std::expm1;
using std::floor;
using std::fmod;
using std::isnan;
using std::log;
using std::log1p;
using std::log2;
using std::nearbyint;
using std::pow;
using std::sin;
using std::sqrt;
using std::tan;
using std::tanh;
using std::trunc;
#endif

template <typename T> DT_HD bool is_nan(T x) { return x != x; }
// True for bool, int32 and int64: the types where rounding ops are the identity and division
// follows integer rules.
template <typename T> inline constexpr bool kIsIntegerLike = T(0.5) == T(0) || T(2) == T(1);

// ---- float exp and tanh without libm calls ----
// libm's expf/tanhf are opaque calls, so a loop over them runs one element at a time; these are
// straight-line code with selects, which compilers vectorise. Cody-Waite range reduction and a
// degree-6 polynomial keep exp within 2 ulp (an exhaustive scan finds 1.02). tanh is
// x * P(x^2) / Q(x^2) below 8 and +-1 from there: a rational fit whose coefficients are all
// positive, so evaluating it loses nothing to cancellation; it stays within 6.2 ulp (an
// exhaustive scan finds 6.16; tests/runtime_test.cc checks), and costs about a third of the
// exp-based form, which matters because GELU's tanh dominates transformer MLPs. Both handle NaN,
// infinities, overflow and subnormal results.
DT_HD_ALWAYS_INLINE float exp_f32(float x) {
  // Clamped to [-104, 89] with compares that let NaN through. Past those bounds the scaling
  // below overflows to inf above 88.7228394 and rounds to 0 below -103.972077, exactly where
  // exp does (an exhaustive comparison over all 2^32 floats found no difference), and NaN flows
  // through the arithmetic, so no select on the result is needed.
  const float low = x < -104.0f ? -104.0f : x;
  const float clamped = low > 89.0f ? 89.0f : low;
  // Adding 1.5 * 2^23 rounds x / ln 2 to the nearest integer n and leaves n in the low bits of
  // the sum: no float-to-int conversion (undefined for NaN) and no floor.
  const float shifted = clamped * 1.44269504088896341f + 0x1.8p23f;
  const float n = shifted - 0x1.8p23f;
  const float r = clamped - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // 2^n in two normal factors, so results down to the subnormal range are exact scalings.
  const uint32_t k = BitCast<uint32_t>(shifted) - 0x4B400000u;
  const uint32_t half = static_cast<uint32_t>(static_cast<int32_t>(k) >> 1);
  const float a = BitCast<float>((half + 127u) << 23);
  const float b = BitCast<float>((k - half + 127u) << 23);
  return y * a * b;
}

DT_HD_ALWAYS_INLINE float tanh_f32(float x) {
  // Odd, so the fit runs on |x| and the sign goes back on at the end (bit operations, cheap
  // beside the compares and blends a clamp costs; the clamps dominated this function's time).
  // The fit stays <= 1 below 8.13 whether or not the compiler contracts its multiply-adds, and
  // tanh is within 3.8 ulp of 1 from 8 on, so one select past 8 gives exactly 1 there:
  // infinities included, and overflowing z (inf/inf) never reaches the result. NaN fails
  // `8 < ax` and flows through the fit; -0 keeps its sign through the final OR.
  const float ax = BitCast<float>(BitCast<uint32_t>(x) & 0x7fffffffu);
  const float z = ax * ax;
  float p = 1.3357626e-08f;
  p = p * z + 2.061126e-05f;
  p = p * z + 3.495722e-03f;
  p = p * z + 1.3381138e-01f;
  p = p * z + 1.0f;
  float q = 7.7777827e-07f;
  q = q * z + 3.2858527e-04f;
  q = q * z + 2.5877494e-02f;
  q = q * z + 4.6714455e-01f;
  q = q * z + 1.0f;
  const float magnitude = 8.0f < ax ? 1.0f : ax * p / q;
  return BitCast<float>(BitCast<uint32_t>(magnitude) | (BitCast<uint32_t>(x) & 0x80000000u));
}

// erf in two pieces, both straight-line code a loop vectorises (libm's erff is an opaque call,
// and GELU's erf dominated eager MLP training): x P(x^2) below 1, and 1 - exp(-x^2) Q(u) with
// u = (1/x - 0.625) / 0.375 from 1 to 4 (erf rounds to 1 in float from 3.92). P and Q are
// least-squares Chebyshev fits in double of erf(x)/x and erfc(x) exp(x^2) (relative errors
// 4.6e-9 and 6.6e-9); evaluated in float they stay within 2.5 ulp of erf (2.44 over every 61st
// float; tests/runtime_test.cc checks). Odd, so it runs on |x|; NaN flows through the small
// branch and infinities clamp to +-1.
// erf_f32's body. The large piece's exponential exp(-c^2) (c = |x| clamped to [1, 4]) is
// computed here, or, with `exp_given`, taken from `e`: it must then equal exp(-c^2) wherever
// 1 <= |x| <= 4 and be at most exp(-16) where |x| > 4 (erf rounds to +-1 either way); it is not
// read below 1. gelu_backward passes the normal density's exp(-x^2/2), that same exponential,
// and saves an exp per element. (A flag rather than computing e before the call: GCC then
// schedules erf_f32 as it did when it was one function, 5% faster than with e computed first.)
DT_HD_ALWAYS_INLINE float erf_f32_body(float x, bool exp_given, float e) {
  const float ax = BitCast<float>(BitCast<uint32_t>(x) & 0x7fffffffu);
  const float z = ax * ax;
  float p = 8.006874071e-05f;
  p = p * z - 8.053751102e-04f;
  p = p * z + 5.192957866e-03f;
  p = p * z - 2.685606957e-02f;
  p = p * z + 1.128363463e-01f;
  p = p * z - 3.761262977e-01f;
  p = p * z + 1.128379166e+00f;
  const float clamped = ax < 1.0f ? 1.0f : (ax > 4.0f ? 4.0f : ax);
  const float u = (1.0f / clamped - 0.625f) * 2.6666666667f;
  float q = -2.024715075e-06f;
  q = q * u + 3.723596829e-06f;
  q = q * u + 2.258554575e-06f;
  q = q * u - 2.788607310e-05f;
  q = q * u + 1.198238078e-04f;
  q = q * u - 3.482460314e-04f;
  q = q * u + 4.614941509e-04f;
  q = q * u + 2.308053577e-03f;
  q = q * u - 2.424302847e-02f;
  q = q * u + 1.433564123e-01f;
  q = q * u + 3.059529926e-01f;
  const float large = 1.0f - (exp_given ? e : exp_f32(-(clamped * clamped))) * q;
  const float magnitude = ax < 1.0f || ax != ax ? ax * p : large;
  return BitCast<float>(BitCast<uint32_t>(magnitude) | (BitCast<uint32_t>(x) & 0x80000000u));
}

DT_HD_ALWAYS_INLINE float erf_f32(float x) { return erf_f32_body(x, false, 0.0f); }

// ---- unary ----
template <typename T> DT_HD T neg(T x) { return -x; }
template <typename T> DT_HD T abs_(T x) { return x < T(0) ? -x : x; }
template <typename T> DT_HD T exp_(T x) { return exp(x); }
DT_HD_ALWAYS_INLINE float exp_(float x) { return exp_f32(x); }
template <typename T> DT_HD T exp2_(T x) { return exp2(x); }
template <typename T> DT_HD T log_(T x) { return log(x); }
template <typename T> DT_HD T log2_(T x) { return log2(x); }
template <typename T> DT_HD T log1p_(T x) { return log1p(x); }
template <typename T> DT_HD T expm1_(T x) { return expm1(x); }
template <typename T> DT_HD T sqrt_(T x) { return sqrt(x); }
template <typename T> DT_HD T rsqrt(T x) { return T(1) / sqrt(x); }
template <typename T> DT_HD T sin_(T x) { return sin(x); }
template <typename T> DT_HD T cos_(T x) { return cos(x); }
template <typename T> DT_HD T tan_(T x) { return tan(x); }
template <typename T> DT_HD T tanh_(T x) { return tanh(x); }
DT_HD_ALWAYS_INLINE float tanh_(float x) { return tanh_f32(x); }
template <typename T> DT_HD T erf_(T x) { return erf(x); }
DT_HD_ALWAYS_INLINE float erf_(float x) { return erf_f32(x); }
template <typename T> DT_HD T sigmoid(T x) { return T(1) / (T(1) + exp_(-x)); }
template <typename T> DT_HD T relu(T x) { return is_nan(x) ? x : (x > T(0) ? x : T(0)); }
template <typename T> DT_HD T gelu(T x) {
  return T(0.5) * x * (T(1) + erf_(x * T(0.70710678118654752440)));
}
template <typename T> DT_HD T gelu_tanh(T x) {
  const T inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
  return T(0.5) * x * (T(1) + tanh_(inner));
}
template <typename T> DT_HD T silu(T x) { return x / (T(1) + exp_(-x)); }

// Derivatives autograd applies in one pass (`g` is the incoming gradient; `x` the input, `y` the
// output): gelu's Φ(x) + x φ(x), silu's s (1 + x (1 - s)), sigmoid's y (1 - y), tanh's 1 - y².
template <typename T> DT_HD T gelu_backward(T g, T x) {
  const T cdf = T(0.5) * (T(1) + erf_(x * T(0.70710678118654752440)));
  const T pdf = exp_(T(-0.5) * x * x) * T(0.39894228040143267794);
  return g * (cdf + x * pdf);
}
// In float, φ's exponential exp(-y^2) (y = x / sqrt 2) is also the one erf(y) needs: computed
// once, which takes gelu_backward from 1.3 to 0.9 ns per element on the CPU.
DT_HD_ALWAYS_INLINE float gelu_backward(float g, float x) {
  const float y = x * 0.70710678118654752440f;
  const float e = exp_f32(-(y * y));
  const float cdf = 0.5f * (1.0f + erf_f32_body(y, true, e));
  return g * (cdf + x * (e * 0.39894228040143267794f));
}
template <typename T> DT_HD T silu_backward(T g, T x) {
  const T s = sigmoid(x);
  return g * s * (T(1) + x * (T(1) - s));
}
template <typename T> DT_HD T sigmoid_backward(T g, T y) { return g * y * (T(1) - y); }
template <typename T> DT_HD T tanh_backward(T g, T y) { return g * (T(1) - y * y); }
// Integers are already whole: rounding ops are the identity on them.
template <typename T> DT_HD T floor_(T x) { if constexpr (kIsIntegerLike<T>) return x; else return floor(x); }
template <typename T> DT_HD T ceil_(T x) { if constexpr (kIsIntegerLike<T>) return x; else return ceil(x); }
template <typename T> DT_HD T trunc_(T x) { if constexpr (kIsIntegerLike<T>) return x; else return trunc(x); }
// Half-to-even, like PyTorch and numpy.
template <typename T> DT_HD T round_(T x) { if constexpr (kIsIntegerLike<T>) return x; else return nearbyint(x); }
template <typename T> DT_HD T sign(T x) {
  if constexpr (kIsIntegerLike<T>) {
    return static_cast<T>((T(0) < x) - (x < T(0)));
  } else {
    return is_nan(x) ? x : static_cast<T>((T(0) < x) - (x < T(0)));
  }
}
template <typename T> DT_HD T reciprocal(T x) { return T(1) / x; }
template <typename T> DT_HD T square(T x) { return x * x; }
template <typename T> DT_HD bool logical_not(T x) { return !static_cast<bool>(x); }
// x - x is 0 for every finite x and NaN for infinities and NaN (integers are always finite).
template <typename T> DT_HD bool isnan_(T x) { return is_nan(x); }
template <typename T> DT_HD bool isinf_(T x) { return !is_nan(x) && is_nan(x - x); }
template <typename T> DT_HD bool isfinite_(T x) { return !is_nan(x - x); }

// ---- binary ----
template <typename T> DT_HD T add(T a, T b) { return a + b; }
template <typename T> DT_HD T sub(T a, T b) { return a - b; }
template <typename T> DT_HD T mul(T a, T b) { return a * b; }
template <typename T> DT_HD T div(T a, T b) { return a / b; }
// Python's floor division: the quotient rounded toward negative infinity.
template <typename T> DT_HD T floor_divide(T a, T b) {
  if constexpr (kIsIntegerLike<T>) {
    // The most negative value over -1 traps in hardware (SIGFPE on x86): negate with wrap-around
    // instead, as numpy does (PyTorch 1.13's CPU kernel crashes the process there).
    if (T(-1) < T(0) && b == T(-1)) return static_cast<T>(0ull - static_cast<unsigned long long>(a));
    T q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    if (b == T(0)) return a / b;
    T mod = fmod(a, b);
    T q = (a - mod) / b;
    if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) q -= T(1);
    if (q != T(0)) {
      T fq = floor(q);
      if (q - fq > T(0.5)) fq += T(1);
      return fq;
    }
    return (a / b) < T(0) ? T(-0.0) : T(0.0);
  }
}
// Python's modulo: the result has the divisor's sign.
template <typename T> DT_HD T remainder(T a, T b) {
  if constexpr (kIsIntegerLike<T>) {
    if (T(-1) < T(0) && b == T(-1)) return T(0);  // every integer is a multiple of -1 (no trap)
    T r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else {
    T r = fmod(a, b);
    if (r != T(0) && ((r < T(0)) != (b < T(0)))) r += b;
    return r;
  }
}
template <typename T> DT_HD T pow_(T a, T b) {
  if constexpr (kIsIntegerLike<T>) {
    // Exponentiation by squaring; callers reject negative exponents.
    T result = 1;
    T base = a;
    T e = b;
    while (e > 0) {
      if (e & 1) result *= base;
      base *= base;
      e >>= 1;
    }
    return result;
  } else {
    return pow(a, b);
  }
}
// NaN wins (a's when both are), as in PyTorch. One select on a mask, with no branch, so that
// loops (max reductions above all) vectorise instead of branching on random data.
template <typename T> DT_HD T maximum(T a, T b) { return ((a > b) | is_nan(a)) ? a : b; }
template <typename T> DT_HD T minimum(T a, T b) { return ((a < b) | is_nan(a)) ? a : b; }
template <typename T> DT_HD T atan2_(T a, T b) { return atan2(a, b); }
template <typename T> DT_HD bool eq(T a, T b) { return a == b; }
template <typename T> DT_HD bool ne(T a, T b) { return a != b; }
template <typename T> DT_HD bool lt(T a, T b) { return a < b; }
template <typename T> DT_HD bool le(T a, T b) { return a <= b; }
template <typename T> DT_HD bool gt(T a, T b) { return a > b; }
template <typename T> DT_HD bool ge(T a, T b) { return a >= b; }
template <typename T> DT_HD bool logical_and(T a, T b) { return static_cast<bool>(a) && static_cast<bool>(b); }
template <typename T> DT_HD bool logical_or(T a, T b) { return static_cast<bool>(a) || static_cast<bool>(b); }
template <typename T> DT_HD bool logical_xor(T a, T b) { return static_cast<bool>(a) != static_cast<bool>(b); }

// ---- ternary ----
template <typename T> DT_HD T where(bool c, T a, T b) { return c ? a : b; }

// ---- reduction combiners: acc = combine(acc, x), starting from the identity ----
template <typename T> DT_HD T reduce_sum(T acc, T x) { return acc + x; }
template <typename T> DT_HD T reduce_prod(T acc, T x) { return acc * x; }
template <typename T> DT_HD T reduce_max(T acc, T x) { return maximum(acc, x); }
template <typename T> DT_HD T reduce_min(T acc, T x) { return minimum(acc, x); }
template <typename T> DT_HD bool reduce_any(bool acc, T x) { return acc || static_cast<bool>(x); }
template <typename T> DT_HD bool reduce_all(bool acc, T x) { return acc && static_cast<bool>(x); }

// ---- orders shared by the CPU sorts and scans (graph/ops_sorting.cc) and the device kernels
// (runtime/index_kernels.cuh), so both give the same positions ----

// Stable sorts order NaN as the largest value, as PyTorch does: last ascending, first descending.
template <typename T> DT_HD bool sorts_before(T a, T b, bool descending) {
  const bool a_nan = is_nan(a), b_nan = is_nan(b);
  if (descending) return a_nan ? !b_nan : (!b_nan && a > b);
  return !a_nan && (b_nan || a < b);
}
// cummax/cummin as PyTorch: an element at least as large (small) as the running extreme takes
// its place, so ties move the index to the latest position; a NaN always does, and nothing
// replaces a NaN but a later NaN.
template <typename T> DT_HD bool takes_over(T x, T extreme, bool is_max) {
  if (is_nan(x)) return true;
  if (is_nan(extreme)) return false;
  return is_max ? x >= extreme : x <= extreme;
}
// log(exp(a) + exp(b)) without overflow: the larger plus log1p of the smaller's share. Equal
// values (infinities included) add log 2 directly, as inf - inf would be NaN.
DT_HD double log_add_exp(double a, double b) {
  if (is_nan(a) || is_nan(b)) return a + b;
  if (a == b) return a + log(2.0);
  const double high = a > b ? a : b, low = a > b ? b : a;
  return high + log1p(exp(low - high));
}

// ---- order keys: float max/min folded as integer max/min ----
// The NaN-aware select in `maximum` keeps compilers from vectorising a max reduction; integer
// max/min vectorise everywhere. order_key maps every non-NaN float to an integer with the same
// order (-0 just below +0) and from_order_key maps it back, so a row's max is
// from_order_key(max of keys) whenever the row holds no NaN. Callers detect NaN separately and
// fold such rows with reduce_max itself, so NaN still wins exactly as it does eagerly.
DT_HD int32_t order_key(float x) {
  const int32_t bits = BitCast<int32_t>(x);
  return bits ^ ((bits >> 31) & 0x7fffffff);
}
DT_HD int64_t order_key(double x) {
  const int64_t bits = BitCast<int64_t>(x);
  return bits ^ ((bits >> 63) & 0x7fffffffffffffffll);
}
DT_HD float from_order_key(int32_t key) { return BitCast<float>(key ^ ((key >> 31) & 0x7fffffff)); }
DT_HD double from_order_key(int64_t key) {
  return BitCast<double>(key ^ ((key >> 63) & 0x7fffffffffffffffll));
}
template <typename K> DT_HD K reduce_max_key(K acc, K key) { return acc > key ? acc : key; }
template <typename K> DT_HD K reduce_min_key(K acc, K key) { return acc < key ? acc : key; }

}  // namespace scalar
}  // namespace dt

#endif  // DYNTRACE_RUNTIME_SCALAR_MATH_H_

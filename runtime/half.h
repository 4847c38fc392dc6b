// runtime/half.h: IEEE-754 binary16 and bfloat16 storage types.
//
// Half is a 16-bit storage format only: arithmetic converts to float, computes, and rounds back
// (round-to-nearest-even), which is what PyTorch's CPU kernels do for float16 as well. The type is
// header-only and free of dependencies so the JIT can paste it into generated translation units,
// C++ for the host compiler and CUDA C++ for NVRTC alike (every member is DT_HD).
//
//   dt::Half h(1.5f);
//   float f = static_cast<float>(h);  // 1.5f
#ifndef DYNTRACE_RUNTIME_HALF_H_
#define DYNTRACE_RUNTIME_HALF_H_

#include "runtime/kernel_portability.h"

namespace dt {

struct Half {
  uint16_t bits = 0;

  Half() = default;
  DT_HD Half(float value) : bits(FromFloat(value)) {}  // NOLINT: implicit like a numeric type.
  DT_HD operator float() const { return ToFloat(bits); }  // NOLINT

  DT_HD static Half FromBits(uint16_t raw) {
    Half h;
    h.bits = raw;
    return h;
  }

  DT_HD static uint16_t FromFloat(float value) {
    const uint32_t f = BitCast<uint32_t>(value);
    const uint32_t sign = (f >> 16) & 0x8000u;
    const uint32_t abs = f & 0x7fffffffu;
    if (abs >= 0x7f800000u) {  // inf or nan: keep nan quiet and non-zero.
      return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    }
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
    if (abs < 0x38800000u) {  // result is subnormal (or zero) in half precision
      // Shift the 24-bit significand (with implicit one) into the 10-bit subnormal field.
      if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half of smallest subnormal
      const uint32_t exponent = abs >> 23;
      const uint32_t significand = (abs & 0x7fffffu) | 0x800000u;
      const uint32_t shift = 126u - exponent;  // value = significand * 2^(exponent - 150)
      uint32_t rounded = significand >> shift;
      const uint32_t rest = significand & ((1u << shift) - 1u);
      const uint32_t halfway = 1u << (shift - 1u);
      if (rest > halfway || (rest == halfway && (rounded & 1u))) ++rounded;
      return static_cast<uint16_t>(sign | rounded);
    }
    // Normal: rebias exponent (127 -> 15) and round the 13 dropped bits to nearest even.
    uint32_t result = ((abs - 0x38000000u) >> 13);
    const uint32_t rest = abs & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }

  DT_HD static float ToFloat(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t significand = h & 0x3ffu;
    uint32_t f;
    if (exponent == 0x1fu) {
      f = sign | 0x7f800000u | (significand << 13);
    } else if (exponent != 0) {
      f = sign | ((exponent + 112u) << 23) | (significand << 13);
    } else if (significand == 0) {
      f = sign;
    } else {  // subnormal: normalise
      uint32_t e = 113u;
      while ((significand & 0x400u) == 0) {
        significand <<= 1;
        --e;
      }
      f = sign | (e << 23) | ((significand & 0x3ffu) << 13);
    }
    return BitCast<float>(f);
  }
};

// bfloat16: the top 16 bits of a float32 (same exponent range, 8-bit significand). Like Half it
// is storage only; arithmetic happens in float. Rounding from float is to nearest even on the
// dropped 16 bits, NaN stays a (quiet) NaN, and overflow rounds to inf, as PyTorch's c10::BFloat16.
struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  DT_HD BFloat16(float value) : bits(FromFloat(value)) {}  // NOLINT: implicit like a numeric type.
  DT_HD operator float() const { return ToFloat(bits); }  // NOLINT

  DT_HD static BFloat16 FromBits(uint16_t raw) {
    BFloat16 b;
    b.bits = raw;
    return b;
  }

  DT_HD static uint16_t FromFloat(float value) {
    const uint32_t f = BitCast<uint32_t>(value);
    // Truncating a NaN could leave only zero significand bits, i.e. inf: force the quiet bit.
    if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);
    // Adding 0x7fff plus the kept lsb rounds to nearest even; a carry into the exponent is the
    // correct next binade (or inf when the largest finite value rounds up).
    const uint32_t rounded = f + 0x7fffu + ((f >> 16) & 1u);
    return static_cast<uint16_t>(rounded >> 16);
  }

  DT_HD static float ToFloat(uint16_t b) { return BitCast<float>(static_cast<uint32_t>(b) << 16); }
};

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_HALF_H_

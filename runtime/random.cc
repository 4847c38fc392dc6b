#include "runtime/random.h"

#include <algorithm>
#include <cmath>

#include "absl/synchronization/mutex.h"
#include "runtime/mersenne_twister.h"

namespace dt {
namespace {

absl::Mutex generator_mu(absl::kConstInit);

MersenneTwister64& Generator() ABSL_EXCLUSIVE_LOCKS_REQUIRED(generator_mu) {
  static auto* generator = new MersenneTwister64(0x5eed);
  return *generator;
}

struct PhiloxState {
  uint64_t seed = 0x5eed;
  uint64_t next = 0;
};
PhiloxState& DeviceGenerator() ABSL_EXCLUSIVE_LOCKS_REQUIRED(generator_mu) {
  static PhiloxState state;
  return state;
}

// 53 random bits -> [0, 1).
inline double Uniform(uint64_t word) { return static_cast<double>(word >> 11) * 0x1.0p-53; }

// Samples drawn per block of generator words: small enough to stay in L1.
constexpr int64_t kBlock = 256;

// Fills `t` with `sample(words)`, each sample taking `words_per_sample` consecutive generator
// words, in element order (the sequence does not depend on the block size).
template <int words_per_sample, typename Sample>
void FillWith(const Tensor& t, Sample sample) {
  if (t.is_meta()) return;
  absl::MutexLock lock(&generator_mu);
  MersenneTwister64& g = Generator();
  DT_DISPATCH_ALL(t.dtype(), [&] {
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double> ||
                  std::is_same_v<scalar_t, Half> || std::is_same_v<scalar_t, BFloat16>) {
      scalar_t* data = t.data_as<scalar_t>();
      uint64_t words[kBlock * words_per_sample];
      for (int64_t start = 0; start < t.numel(); start += kBlock) {
        const int64_t count = std::min(kBlock, t.numel() - start);
        g.Fill(words, count * words_per_sample);
        for (int64_t i = 0; i < count; ++i) {
          const double value = sample(words + i * words_per_sample);
          if constexpr (std::is_same_v<scalar_t, double>) data[start + i] = value;
          else data[start + i] = scalar_t(static_cast<float>(value));
        }
      }
    }
  });
}

}  // namespace

void ManualSeed(uint64_t seed) {
  absl::MutexLock lock(&generator_mu);
  Generator().Seed(seed);
  DeviceGenerator() = PhiloxState{seed, 0};
}

PhiloxDraw ReservePhiloxCounters(uint64_t counters) {
  absl::MutexLock lock(&generator_mu);
  PhiloxState& g = DeviceGenerator();
  const PhiloxDraw draw{g.seed, g.next};
  g.next += counters;
  return draw;
}

void FillUniform(const Tensor& t) {
  FillWith<1>(t, [](const uint64_t* words) {
    const double u = Uniform(words[0]);
    // Rounding to float can reach 1.0; keep the interval half-open.
    return static_cast<float>(u) >= 1.0f ? static_cast<double>(std::nextafter(1.0f, 0.0f)) : u;
  });
}

void FillNormal(const Tensor& t) {
  FillWith<2>(t, [](const uint64_t* words) {
    const double u1 = 1.0 - Uniform(words[0]);  // (0, 1]: log is finite
    const double u2 = Uniform(words[1]);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  });
}

}  // namespace dt

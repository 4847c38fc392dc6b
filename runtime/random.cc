#include "runtime/random.h"

#include <cmath>
#include <random>

#include "absl/synchronization/mutex.h"

namespace dt {
namespace {

absl::Mutex generator_mu(absl::kConstInit);

std::mt19937_64& Generator() ABSL_EXCLUSIVE_LOCKS_REQUIRED(generator_mu) {
  static std::mt19937_64* generator = new std::mt19937_64(0x5eed);
  return *generator;
}

// 53 random bits -> [0, 1).
double NextUniform(std::mt19937_64& g) { return static_cast<double>(g() >> 11) * 0x1.0p-53; }

template <typename Sample>
void FillWith(const Tensor& t, Sample sample) {
  if (t.is_meta()) return;
  absl::MutexLock lock(&generator_mu);
  std::mt19937_64& g = Generator();
  DT_DISPATCH_ALL(t.dtype(), [&] {
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double> ||
                  std::is_same_v<scalar_t, Half> || std::is_same_v<scalar_t, BFloat16>) {
      scalar_t* data = t.data_as<scalar_t>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        if constexpr (std::is_same_v<scalar_t, double>) data[i] = sample(g);
        else data[i] = scalar_t(static_cast<float>(sample(g)));
      }
    }
  });
}

}  // namespace

void ManualSeed(uint64_t seed) {
  absl::MutexLock lock(&generator_mu);
  Generator().seed(seed);
}

void FillUniform(const Tensor& t) {
  FillWith(t, [](std::mt19937_64& g) {
    double u = NextUniform(g);
    // Rounding to float can reach 1.0; keep the interval half-open.
    if (static_cast<float>(u) >= 1.0f) u = std::nextafter(1.0f, 0.0f);
    return u;
  });
}

void FillNormal(const Tensor& t) {
  FillWith(t, [](std::mt19937_64& g) {
    const double u1 = 1.0 - NextUniform(g);  // (0, 1]: log is finite
    const double u2 = NextUniform(g);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  });
}

}  // namespace dt

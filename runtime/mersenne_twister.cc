#include "runtime/mersenne_twister.h"

#include <algorithm>

namespace dt {
namespace {

// MT19937-64's parameters (Matsumoto and Nishimura, 2000).
constexpr int kShift = 156;  // m: the word each new word mixes in
constexpr uint64_t kMatrix = 0xB5026F5AA96619E9ull;
constexpr uint64_t kUpperMask = 0xFFFFFFFF80000000ull;
constexpr uint64_t kLowerMask = 0x7FFFFFFFull;
constexpr uint64_t kSeedMultiplier = 6364136223846793005ull;

inline uint64_t Mix(uint64_t upper_of, uint64_t lower_of, uint64_t shifted) {
  const uint64_t y = (upper_of & kUpperMask) | (lower_of & kLowerMask);
  return shifted ^ (y >> 1) ^ (kMatrix & (0 - (y & 1)));
}

inline uint64_t Temper(uint64_t z) {
  z ^= (z >> 29) & 0x5555555555555555ull;
  z ^= (z << 17) & 0x71D67FFFEDA60000ull;
  z ^= (z << 37) & 0xFFF7EEE000000000ull;
  z ^= z >> 43;
  return z;
}

}  // namespace

void MersenneTwister64::Seed(uint64_t seed) {
  state_[0] = seed;
  for (int i = 1; i < kStateWords; ++i) {
    state_[i] = kSeedMultiplier * (state_[i - 1] ^ (state_[i - 1] >> 62)) + static_cast<uint64_t>(i);
  }
  index_ = kStateWords;
}

void MersenneTwister64::Twist() {
  constexpr int n = kStateWords;
  // Word i reads words i and i+1 of the old state and word i+156: in the first half those are
  // all still old; in the second, i+156-312 = i-156 is new, written a half pass earlier. Neither
  // loop reads what it writes, so each vectorises.
  for (int i = 0; i < n - kShift; ++i) state_[i] = Mix(state_[i], state_[i + 1], state_[i + kShift]);
  for (int i = n - kShift; i < n - 1; ++i) state_[i] = Mix(state_[i], state_[i + 1], state_[i + kShift - n]);
  state_[n - 1] = Mix(state_[n - 1], state_[0], state_[kShift - 1]);
  index_ = 0;
}

void MersenneTwister64::Fill(uint64_t* out, int64_t count) {
  while (count > 0) {
    if (index_ == kStateWords) Twist();
    const int take = static_cast<int>(std::min<int64_t>(count, kStateWords - index_));
    const uint64_t* words = state_ + index_;
    for (int i = 0; i < take; ++i) out[i] = Temper(words[i]);
    index_ += take;
    out += take;
    count -= take;
  }
}

}  // namespace dt

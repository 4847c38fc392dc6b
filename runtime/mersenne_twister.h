// runtime/mersenne_twister.h: the 64-bit Mersenne Twister (MT19937-64), drawn in blocks.
//
// The same sequence as std::mt19937_64 for the same seed (tests/runtime_test.cc compares them),
// so a seed gives the numbers it always gave; what differs is the cost. std::mt19937_64 draws
// one word per call, tempering it behind a branch on the state index; rand() of a tensor paid
// about 13 ns per element that way. Fill() regenerates the 312-word state in whole passes and
// tempers a run of words in one loop the compiler vectorises.
//
//   MersenneTwister64 g(0x5eed);
//   uint64_t words[1000];
//   g.Fill(words, 1000);  // == 1000 calls of std::mt19937_64(0x5eed)()
#ifndef DYNTRACE_RUNTIME_MERSENNE_TWISTER_H_
#define DYNTRACE_RUNTIME_MERSENNE_TWISTER_H_

#include <cstdint>

namespace dt {

class MersenneTwister64 {
 public:
  static constexpr int kStateWords = 312;

  explicit MersenneTwister64(uint64_t seed) { Seed(seed); }

  void Seed(uint64_t seed);
  // Writes the next `count` outputs to `out`.
  void Fill(uint64_t* out, int64_t count);
  uint64_t Next() {
    uint64_t word;
    Fill(&word, 1);
    return word;
  }

 private:
  // Replaces the whole state with the next 312 untempered words.
  void Twist();

  uint64_t state_[kStateWords];
  int index_ = kStateWords;  // the next state word to temper; kStateWords: twist first
};

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_MERSENNE_TWISTER_H_

// runtime/index_kernels.cuh: the kernels behind indexing, gather/scatter, sorts, scans, arg
// reductions and searches on CUDA tensors (runtime/cuda_index_kernels.h launches them).
//
// Every launch is independent per-thread work over IxArgs' domain (a grid-stride loop): no
// __syncthreads, no shared memory, no warp shuffles. Steps that need the whole row (a sort
// network's stage, a scan's doubling step, a halving of an arg reduction) are one launch each,
// ordered by the stream. That keeps each kernel a plain function of one position, so
// tests/index_kernels_test.cc compiles this very file with the host compiler (under
// tests/index_kernels_shim.h: block and thread indices as thread-locals, atomics as plain
// read-modify-writes) and runs each launch as loops over blocks and threads on host memory.
//
// Functions here are device functions by NVRTC's default execution space; the `extern "C"`
// entry points at the end exist only under NVRTC. Typed kernels are templates over the stored
// element type T; a module instantiates them for one T (DT_IX_SCALAR).
#ifndef DYNTRACE_RUNTIME_INDEX_KERNELS_CUH_
#define DYNTRACE_RUNTIME_INDEX_KERNELS_CUH_

#include "runtime/convert.h"
#include "runtime/index_kernel_abi.h"
#include "runtime/scalar_math.h"

namespace dt::ix {

#define DT_IX_FOR_EACH(i, total)                                                   \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (total); \
       i += int64_t(gridDim.x) * blockDim.x)

inline void CopyElement(char* to, const char* from, int64_t itemsize) {
  switch (itemsize) {
    case 1: *to = *from; break;
    case 2: *reinterpret_cast<uint16_t*>(to) = *reinterpret_cast<const uint16_t*>(from); break;
    case 4: *reinterpret_cast<uint32_t*>(to) = *reinterpret_cast<const uint32_t*>(from); break;
    default: *reinterpret_cast<uint64_t*>(to) = *reinterpret_cast<const uint64_t*>(from); break;
  }
}

inline char* At(const IxOperand& o, int64_t element) { return o.data + element * o.itemsize; }

// ---- untyped: element bytes move, whatever their dtype ----

// param[0], param[1]: the valid range [low, high) of operand 0's values. Records the first
// position outside it (position + 1, atomic minimum: the lowest wins); with kIxCheckReadValue,
// one thread then copies that position's value into error[1].
inline void check(const IxArgs& a) {
  if (a.mode == kIxCheckReadValue) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && a.error[0] != ~0ull && a.error[0] != 0) {
      int64_t off[kIxMaxOperands];
      IxOffsets(a, static_cast<int64_t>(a.error[0] - 1), off);
      a.error[1] = static_cast<uint64_t>(IxReadIndex(a.op[0], off[0]));
    }
    return;
  }
  DT_IX_FOR_EACH(i, a.numel) {
    int64_t off[kIxMaxOperands];
    IxOffsets(a, i, off);
    const int64_t v = IxReadIndex(a.op[0], off[0]);
    if (v < a.param[0] || v >= a.param[1]) {
      atomicMin(reinterpret_cast<unsigned long long*>(a.error), static_cast<unsigned long long>(i + 1));
    }
  }
}

// out (operand 0) at each position = src (operand 1) at its indexed, remapped address.
inline void gather(const IxArgs& a) {
  DT_IX_FOR_EACH(i, a.numel) {
    int64_t off[kIxMaxOperands];
    if (IxOffsets(a, i, off)) CopyElement(At(a.op[0], off[0]), At(a.op[1], off[1]), a.op[0].itemsize);
  }
}

// Scatter by assignment keeps the last write in position order, as the CPU loop does: a first
// launch claims each destination for the highest position writing it (slots: operand
// param[0], an int64 per destination element counted from element offset param[1]), a second
// writes only the claimed ones.
inline unsigned long long* Slot(const IxArgs& a, const int64_t (&off)[kIxMaxOperands]) {
  return reinterpret_cast<unsigned long long*>(a.op[a.param[0]].data) + (off[0] - a.param[1]);
}

inline void claim(const IxArgs& a) {
  DT_IX_FOR_EACH(i, a.numel) {
    int64_t off[kIxMaxOperands];
    if (IxOffsets(a, i, off)) atomicMax(Slot(a, off), static_cast<unsigned long long>(i + 1));
  }
}

inline void put(const IxArgs& a) {
  DT_IX_FOR_EACH(i, a.numel) {
    int64_t off[kIxMaxOperands];
    if (IxOffsets(a, i, off) && *Slot(a, off) == static_cast<unsigned long long>(i + 1)) {
      CopyElement(At(a.op[0], off[0]), At(a.op[1], off[1]), a.op[0].itemsize);
    }
  }
}

// tril / triu / eye: the domain's last two dims are (row, column); out keeps src where
// param[0] <= column - row <= param[1] and is zero (all bits clear, zero in every dtype) elsewhere.
inline void band(const IxArgs& a) {
  const int64_t rows = a.sizes[a.rank - 2], cols = a.sizes[a.rank - 1];
  DT_IX_FOR_EACH(i, a.numel) {
    int64_t off[kIxMaxOperands];
    IxOffsets(a, i, off);
    const int64_t diagonal = i % cols - (i / cols) % rows;
    char* to = At(a.op[0], off[0]);
    if (diagonal >= a.param[0] && diagonal <= a.param[1]) {
      CopyElement(to, At(a.op[1], off[1]), a.op[0].itemsize);
    } else {
      for (int64_t b = 0; b < a.op[0].itemsize; ++b) to[b] = 0;
    }
  }
}

// ---- typed helpers ----

template <int Bytes> struct UnsignedOf;
template <> struct UnsignedOf<1> { using type = uint8_t; };
template <> struct UnsignedOf<2> { using type = uint16_t; };
template <> struct UnsignedOf<4> { using type = uint32_t; };
template <> struct UnsignedOf<8> { using type = uint64_t; };

// *p = f(*p) atomically. Elements narrower than 4 bytes are updated inside their aligned 32-bit
// word (compare-and-swap on the word, the neighbours' bytes kept), so every dtype works on
// every architecture.
template <typename T, typename F>
void AtomicUpdate(T* p, F f) {
  using U = typename UnsignedOf<sizeof(T)>::type;
  if constexpr (sizeof(T) == 8) {
    auto* word = reinterpret_cast<unsigned long long*>(p);
    unsigned long long seen = *word, expected;
    do {
      expected = seen;
      const T next = f(BitCast<T>(static_cast<U>(expected)));
      seen = atomicCAS(word, expected, static_cast<unsigned long long>(BitCast<U>(next)));
    } while (seen != expected);
  } else {
    const uint64_t address = reinterpret_cast<uint64_t>(p);
    auto* word = reinterpret_cast<unsigned int*>(address & ~uint64_t{3});
    const unsigned int shift = static_cast<unsigned int>(address & 3) * 8;
    const unsigned int mask = sizeof(T) == 4 ? ~0u : ((1u << (8 * sizeof(T))) - 1u) << shift;
    unsigned int seen = *word, expected;
    do {
      expected = seen;
      const T old = BitCast<T>(static_cast<U>((expected & mask) >> shift));
      const unsigned int bits = static_cast<unsigned int>(BitCast<U>(f(old))) << shift;
      seen = atomicCAS(word, expected, (expected & ~mask) | (bits & mask));
    } while (seen != expected);
  }
}

// One step of a fold in the compute type; amax/amin propagate NaN (graph/ops_indexing.cc's
// FoldStep).
template <typename C>
C FoldStep(int64_t mode, C acc, C x) {
  if (mode == kIxSum) return static_cast<C>(acc + x);
  if (mode == kIxProd) return static_cast<C>(acc * x);
  if (scalar::is_nan(acc) || scalar::is_nan(x)) return scalar::is_nan(acc) ? acc : x;
  if (mode == kIxMax) return x > acc ? x : acc;
  return x < acc ? x : acc;
}

template <typename C>
constexpr bool IsFloatLike() { return !(C(0.5) == C(0)) && !kSameType<C, bool>; }

// The value a fold starts from, so that a destination's first folded value replaces it.
template <typename T>
T FoldIdentity(int64_t mode) {
  using C = ComputeType<T>;
  if (mode == kIxSum) return static_cast<T>(C(0));
  if (mode == kIxProd) return static_cast<T>(C(1));
  if constexpr (IsFloatLike<C>()) {
    return static_cast<T>(mode == kIxMax ? -Infinity<C>() : Infinity<C>());
  } else if constexpr (kSameType<C, bool>) {
    return mode != kIxMax;
  } else {
    using U = typename UnsignedOf<sizeof(T)>::type;
    const bool is_signed = C(-1) < C(0);
    const U top = static_cast<U>(U(1) << (8 * sizeof(T) - 1));
    const U lowest = is_signed ? top : U(0), highest = is_signed ? static_cast<U>(top - 1) : static_cast<U>(~U(0));
    return BitCast<T>(mode == kIxMax ? lowest : highest);
  }
}

// ---- scatter with a fold ----

// dst (operand 0) at each indexed address folded with src (operand 1) times alpha; with
// param[2] set, counts each fold into slot operand param[0] (for a mean).
template <typename T>
void fold(const IxArgs& a) {
  using C = ComputeType<T>;
  DT_IX_FOR_EACH(i, a.numel) {
    int64_t off[kIxMaxOperands];
    if (!IxOffsets(a, i, off)) continue;
    C x = static_cast<C>(*reinterpret_cast<const T*>(At(a.op[1], off[1])));
    if (a.mode == kIxSum && a.alpha != 1.0) x = static_cast<C>(x * static_cast<C>(a.alpha));
    AtomicUpdate(reinterpret_cast<T*>(At(a.op[0], off[0])),
                 [&](T old) { return static_cast<T>(FoldStep<C>(a.mode, static_cast<C>(old), x)); });
    if (a.param[2] != 0) atomicAdd(Slot(a, off), 1ull);
  }
}

// scatter_reduce(include_self=False): each destination a fold reaches starts from the identity.
template <typename T>
void identity(const IxArgs& a) {
  DT_IX_FOR_EACH(i, a.numel) {
    int64_t off[kIxMaxOperands];
    if (IxOffsets(a, i, off)) *reinterpret_cast<T*>(At(a.op[0], off[0])) = FoldIdentity<T>(a.mode);
  }
}

// A folded sum divided by its count (operand 2, one per element of operand 0's domain, plus
// param[2] for the destination's own value); integers round down as floor division does.
template <typename T>
void mean(const IxArgs& a) {
  using C = ComputeType<T>;
  DT_IX_FOR_EACH(i, a.numel) {
    int64_t off[kIxMaxOperands];
    IxOffsets(a, i, off);
    const int64_t count = static_cast<int64_t>(reinterpret_cast<const uint64_t*>(a.op[2].data)[off[2]]) + a.param[2];
    if (count <= 1) continue;
    T* p = reinterpret_cast<T*>(At(a.op[0], off[0]));
    const C sum = static_cast<C>(*p);
    if constexpr (IsFloatLike<C>()) {
      *p = static_cast<T>(static_cast<C>(sum / static_cast<C>(count)));
    } else {
      const C q = static_cast<C>(sum / static_cast<C>(count));
      *p = static_cast<T>(sum % static_cast<C>(count) != 0 && sum < 0 ? static_cast<C>(q - 1) : q);
    }
  }
}

// ---- rows: sorts, scans, arg reductions over contiguous [rows, n] buffers ----
// Row kernels take param[0] = n (the row length) and address operands as flat arrays.

template <typename T> T* Elements(const IxOperand& o) { return reinterpret_cast<T*>(o.data); }


// nonzero's positions, in row-major order: operand 0 the [count, rank] int64 result, operand 1
// the flags (bool), operand 2 their running counts (int64, inclusive); the domain is the
// input's shape, whose coordinates each set flag writes into its row.
inline void compact(const IxArgs& a) {
  DT_IX_FOR_EACH(i, a.numel) {
    if (!Elements<const bool>(a.op[1])[i]) continue;
    int64_t* row = Elements<int64_t>(a.op[0]) + (Elements<const int64_t>(a.op[2])[i] - 1) * a.rank;
    int64_t rest = i;
    for (int64_t d = a.rank - 1; d >= 0; --d) {
      row[d] = rest % a.sizes[d];
      rest /= a.sizes[d];
    }
  }
}

// Sort buffers: operand 1 values, operand 2 int64 positions, rows padded to param[1] = P (a
// power of two). Padding has position >= n and sorts after everything, either direction.
template <typename T>
void sort_init(const IxArgs& a) {
  const int64_t n = a.param[0], padded = a.param[1];
  DT_IX_FOR_EACH(i, a.numel) {
    const int64_t row = i / padded, lane = i % padded;
    Elements<int64_t>(a.op[2])[i] = lane;
    if (lane < n && a.param[4] == 0) Elements<T>(a.op[1])[i] = Elements<const T>(a.op[0])[row * n + lane];
  }
}

// Whether element x goes before element y: by value in the sort's order, then by position,
// which makes the network's result the stable order. With param[4] = width set, the network
// sorts positions alone (unique's rows): x and y compare the rows of operand 0 ([n, width]) they
// point at, element by element.
template <typename T>
bool SortsBefore(const IxArgs& a, int64_t x, int64_t y) {
  using C = ComputeType<T>;
  const int64_t n = a.param[0], width = a.param[4];
  const int64_t px = Elements<int64_t>(a.op[2])[x], py = Elements<int64_t>(a.op[2])[y];
  if (px >= n || py >= n) return px < py;
  const T* rx = width == 0 ? Elements<T>(a.op[1]) + x : Elements<const T>(a.op[0]) + px * width;
  const T* ry = width == 0 ? Elements<T>(a.op[1]) + y : Elements<const T>(a.op[0]) + py * width;
  const bool descending = a.mode != 0;
  for (int64_t j = 0; j < (width == 0 ? 1 : width); ++j) {
    const C vx = static_cast<C>(rx[j]), vy = static_cast<C>(ry[j]);
    if (scalar::sorts_before(vx, vy, descending)) return true;
    if (scalar::sorts_before(vy, vx, descending)) return false;
  }
  return px < py;
}

// One compare-exchange stage of a bitonic network: param[2] = partner distance j, param[3] =
// the merge size k. Each thread owns the pair (lane, lane ^ j) where it is the lower lane.
template <typename T>
void sort_step(const IxArgs& a) {
  const int64_t padded = a.param[1], j = a.param[2], k = a.param[3];
  DT_IX_FOR_EACH(i, a.numel) {
    const int64_t lane = i % padded, partner = lane ^ j;
    if (partner <= lane) continue;
    const int64_t x = i, y = i - lane + partner;
    const bool ascending = (lane & k) == 0;
    if (ascending ? SortsBefore<T>(a, y, x) : SortsBefore<T>(a, x, y)) {
      if (a.param[4] == 0) {
        T* values = Elements<T>(a.op[1]);
        const T v = values[x];
        values[x] = values[y];
        values[y] = v;
      }
      int64_t* positions = Elements<int64_t>(a.op[2]);
      const int64_t p = positions[x];
      positions[x] = positions[y];
      positions[y] = p;
    }
  }
}

// The first param[2] = keep of each sorted row into operand 3 (values) and 4 (int64 positions).
template <typename T>
void sort_take(const IxArgs& a) {
  const int64_t padded = a.param[1], keep = a.param[2];
  DT_IX_FOR_EACH(i, a.numel) {
    const int64_t from = (i / keep) * padded + i % keep;
    Elements<T>(a.op[3])[i] = Elements<const T>(a.op[1])[from];
    Elements<int64_t>(a.op[4])[i] = Elements<const int64_t>(a.op[2])[from];
  }
}

// Scans accumulate in double (floating T) or int64 and round each running value once into the
// result (T, or int64), as graph/ops_sorting.cc does.
template <typename T>
constexpr bool ScansInDouble() { return IsFloatLike<ComputeType<T>>(); }
template <bool InDouble> struct AccumulatorOf { using type = int64_t; };
template <> struct AccumulatorOf<true> { using type = double; };


template <typename A>
A Combine(int64_t mode, A earlier, A later) {
  if constexpr (kSameType<A, double>) {
    if (mode == kIxLogSumExp) return scalar::log_add_exp(earlier, later);
  }
  return mode == kIxProd ? static_cast<A>(earlier * later) : static_cast<A>(earlier + later);
}

// Operand 0: the rows (T); operand 1: the accumulator buffer.
template <typename T>
void scan_init(const IxArgs& a) {
  DT_IX_FOR_EACH(i, a.numel) {
    const ComputeType<T> x = static_cast<ComputeType<T>>(Elements<const T>(a.op[0])[i]);
    if constexpr (ScansInDouble<T>()) {
      Elements<double>(a.op[1])[i] = static_cast<double>(x);
    } else {
      Elements<int64_t>(a.op[1])[i] = static_cast<int64_t>(x);
    }
  }
}

// One Hillis-Steele step: out (operand 1) = in (operand 0) combined with the value param[1]
// places earlier in the row, where there is one.
template <typename T>
void scan_step(const IxArgs& a) {
  using A = typename AccumulatorOf<ScansInDouble<T>()>::type;
  const int64_t n = a.param[0], step = a.param[1];
  DT_IX_FOR_EACH(i, a.numel) {
    const A* in = Elements<const A>(a.op[0]);
    Elements<A>(a.op[1])[i] = i % n >= step ? Combine<A>(a.mode, in[i - step], in[i]) : in[i];
  }
}

// Operand 0: the accumulators; operand 1: the result rows (T for floating T, else int64).
template <typename T>
void scan_store(const IxArgs& a) {
  DT_IX_FOR_EACH(i, a.numel) {
    if constexpr (ScansInDouble<T>()) {
      Elements<T>(a.op[1])[i] = static_cast<T>(Elements<const double>(a.op[0])[i]);
    } else {
      Elements<int64_t>(a.op[1])[i] = Elements<const int64_t>(a.op[0])[i];
    }
  }
}

// (value, position) pairs for cummax/cummin and argmax/argmin: operand 0 the rows, operands 1
// and 2 the pair buffers.
template <typename T>
void pair_init(const IxArgs& a) {
  const int64_t n = a.param[0];
  DT_IX_FOR_EACH(i, a.numel) {
    Elements<T>(a.op[1])[i] = Elements<const T>(a.op[0])[i];
    Elements<int64_t>(a.op[2])[i] = i % n;
  }
}


// One doubling step over pairs: in (operands 1, 2) -> out (operands 3, 4).
template <typename T>
void cumext_step(const IxArgs& a) {
  using C = ComputeType<T>;
  const int64_t n = a.param[0], step = a.param[1];
  DT_IX_FOR_EACH(i, a.numel) {
    const T* values = Elements<const T>(a.op[1]);
    const int64_t* positions = Elements<const int64_t>(a.op[2]);
    int64_t from = i;
    if (i % n >= step && !scalar::takes_over(static_cast<C>(values[i]), static_cast<C>(values[i - step]), a.mode == kIxMax)) {
      from = i - step;
    }
    Elements<T>(a.op[3])[i] = values[from];
    Elements<int64_t>(a.op[4])[i] = positions[from];
  }
}

// argmax/argmin: the first extreme, a NaN first of all. One halving step: the pair at lane
// (a multiple of 2 * param[1]) takes the one param[1] later when that is strictly better.
template <typename T>
void argext_step(const IxArgs& a) {
  using C = ComputeType<T>;
  const int64_t n = a.param[0], step = a.param[1];
  DT_IX_FOR_EACH(i, a.numel) {
    const int64_t lane = i % n;
    if (lane % (2 * step) != 0 || lane + step >= n) continue;
    T* values = Elements<T>(a.op[1]);
    int64_t* positions = Elements<int64_t>(a.op[2]);
    const C best = static_cast<C>(values[i]), other = static_cast<C>(values[i + step]);
    const bool better = !scalar::is_nan(best) &&
                        (scalar::is_nan(other) || (a.mode == kIxMax ? other > best : other < best));
    if (better) {
      values[i] = values[i + step];
      positions[i] = positions[i + step];
    }
  }
}

// searchsorted: operand 0 the int32/int64 result, operand 1 the values, operand 2 the sorted
// rows ([rows, n], T), operand 3 the sorter rows (int64) when param[3] is set; param[1] values
// per row; mode 1 searches right. PyTorch's bound tests (graph/ops_search.cc's Bound).
template <typename T>
void search(const IxArgs& a) {
  using C = ComputeType<T>;
  const int64_t n = a.param[0], per_row = a.param[1];
  DT_IX_FOR_EACH(i, a.numel) {
    const int64_t row = i / per_row;
    const T* sequence = Elements<const T>(a.op[2]) + row * n;
    const int64_t* order = a.param[3] != 0 ? Elements<const int64_t>(a.op[3]) + row * n : nullptr;
    const C v = static_cast<C>(Elements<const T>(a.op[1])[i]);
    int64_t low = 0, high = n;
    while (low < high) {
      const int64_t mid = low + (high - low) / 2;
      const C at = static_cast<C>(order != nullptr ? sequence[order[mid]] : sequence[mid]);
      if (a.mode != 0 ? !(at > v) : !(at >= v)) {
        low = mid + 1;
      } else {
        high = mid;
      }
    }
    if (a.op[0].itemsize == 8) {
      Elements<int64_t>(a.op[0])[i] = low;
    } else {
      Elements<int32_t>(a.op[0])[i] = static_cast<int32_t>(low);
    }
  }
}

// ---- unique: runs of equal rows in sorted order ----

// Operand 1 (bool) flags each sorted row that differs from the row before it, so each flag
// starts a run of equal rows: operand 2 holds the sorted positions of operand 0's rows
// ([n, param[4] = width]). NaN equals nothing, so each NaN is a run of its own, as
// graph/ops_sorting.cc's RowOrder::Equal has it.
template <typename T>
void run_starts(const IxArgs& a) {
  using C = ComputeType<T>;
  const int64_t width = a.param[4];
  DT_IX_FOR_EACH(i, a.numel) {
    bool starts = i == 0;
    if (!starts) {
      const int64_t* order = Elements<const int64_t>(a.op[2]);
      const T* row = Elements<const T>(a.op[0]) + order[i] * width;
      const T* previous = Elements<const T>(a.op[0]) + order[i - 1] * width;
      for (int64_t j = 0; j < width && !starts; ++j) {
        starts = !(static_cast<C>(row[j]) == static_cast<C>(previous[j]));
      }
    }
    Elements<bool>(a.op[1])[i] = starts;
  }
}

// The groups of those runs: from the sorted positions (operand 0), the run flags (operand 1)
// and their running counts (operand 2, int64, inclusive), each position's run (operand 3,
// indexed by position), each run's first position (operand 4) and its length (operand 5,
// zeroed before: a run's end is added and its start subtracted, two atomic adds per run, so no
// thread waits for another's result).
inline void runs(const IxArgs& a) {
  const int64_t n = a.numel;
  DT_IX_FOR_EACH(i, n) {
    const bool* starts = Elements<const bool>(a.op[1]);
    const int64_t run = Elements<const int64_t>(a.op[2])[i] - 1;
    const int64_t position = Elements<const int64_t>(a.op[0])[i];
    Elements<int64_t>(a.op[3])[position] = run;
    auto* length = reinterpret_cast<unsigned long long*>(Elements<int64_t>(a.op[5]) + run);
    if (starts[i]) {
      Elements<int64_t>(a.op[4])[run] = position;
      atomicAdd(length, static_cast<unsigned long long>(-i));
    }
    if (i + 1 == n || starts[i + 1]) atomicAdd(length, static_cast<unsigned long long>(i + 1));
  }
}

// ---- random numbers ----

// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011): four 32-bit words that are a bijective function of a 128-bit counter under a 64-bit
// key, so any element of a draw is computed on its own from (seed, counter).
struct IxPhiloxWords {
  uint32_t w[4];
};

inline IxPhiloxWords Philox(uint64_t counter, uint64_t seed) {
  uint32_t c[4] = {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0};
  uint32_t k[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c[0], p1 = uint64_t{0xCD9E8D57u} * c[2];
    const uint32_t next[4] = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
                              static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    for (int i = 0; i < 4; ++i) c[i] = next[i];
    k[0] += 0x9E3779B9u;
    k[1] += 0xBB67AE85u;
  }
  return IxPhiloxWords{{c[0], c[1], c[2], c[3]}};
}

// [0, 1) from `bits` of a word (24: exact in float) or 53 bits of two (exact in double).
inline float UnitFloat(uint32_t w, int bits = 24) {
  return static_cast<float>(w >> (32 - bits)) * (1.0f / static_cast<float>(1u << bits));
}
inline double UnitDouble(uint32_t hi, uint32_t lo) {
  return static_cast<double>((static_cast<uint64_t>(hi >> 5) << 26) | (lo >> 6)) * 0x1.0p-53;
}

// Element i of a draw into contiguous operand 0 (param[1] the seed, param[2] the first counter;
// where there is an operand 1 it holds {seed, counter base}, which param[2] is then added to: a
// CUDA graph replays the launch and advances the base on the device, kIxAdvanceCounters adding
// param[2] to the base of operand 0). A
// float-like element of a uniform draw takes one word, of a normal draw two; a double twice
// that. So element i uses counter first + i * words / 4, words (i * words) % 4 on.
// RandomCounters (runtime/cuda_random.h) is how many counters a draw uses.
template <typename T>
void random(const IxArgs& a) {
  using C = ComputeType<T>;
  if (a.mode == kIxAdvanceCounters) {
    DT_IX_FOR_EACH(i, a.numel) reinterpret_cast<uint64_t*>(a.op[0].data)[1] += static_cast<uint64_t>(a.param[2]);
    return;
  }
  if constexpr (IsFloatLike<C>()) {
    uint64_t seed = static_cast<uint64_t>(a.param[1]), first = static_cast<uint64_t>(a.param[2]);
    if (a.operands > 1) {
      const uint64_t* state = reinterpret_cast<const uint64_t*>(a.op[1].data);
      seed = state[0];
      first += state[1];
    }
    constexpr bool kWide = sizeof(C) == 8;
    const int words = (a.mode == kIxNormal ? 2 : 1) * (kWide ? 2 : 1);
    DT_IX_FOR_EACH(i, a.numel) {
      const int64_t at = i * words;
      const IxPhiloxWords r = Philox(first + static_cast<uint64_t>(at / 4), seed);
      const uint32_t* w = r.w + at % 4;
      C value;
      if constexpr (kWide) {
        const double u = UnitDouble(w[0], w[1]);
        value = a.mode == kIxNormal ? scalar::sqrt_(-2.0 * scalar::log_(1.0 - u)) *
                                          scalar::cos_(6.283185307179586 * UnitDouble(w[2], w[3]))
                                    : u;
      } else if (a.mode == kIxNormal) {
        const float u = UnitFloat(w[0]);
        value = static_cast<C>(scalar::sqrt_(-2.0f * scalar::log_(1.0f - u)) *
                               scalar::cos_(6.2831853f * UnitFloat(w[1])));
      } else {
        // As many bits as the type holds below 1, so no uniform rounds up to 1.
        value = static_cast<C>(UnitFloat(w[0], kSameType<T, BFloat16> ? 8 : kSameType<T, Half> ? 11 : 24));
      }
      Elements<T>(a.op[0])[i] = static_cast<T>(value);
    }
  }
}

// ---- ranges ----

// c + a * b with each operation rounded, as the host computes it (x86-64's baseline has no
// fused multiply-add): NVRTC would otherwise contract the two into one.
inline double MulAdd(double a, double b, double c) {
#if defined(__CUDACC_RTC__)
  return __dadd_rn(c, __dmul_rn(a, b));
#else
  return c + a * b;
#endif
}

// arange (kIxArange) and linspace (kIxLinspace) into contiguous operand 0, each element as
// graph/ops_creation.cc computes it. arange: integer types start + i * step in int64 (param[1],
// param[2]), the others in double (the bits of param[3], param[4]). linspace: doubles start,
// end and step (param[1..3]) and the step count (param[4]), filled from both ends as PyTorch
// does, so the last element is exactly `end`.
template <typename T>
void range(const IxArgs& a) {
  using C = ComputeType<T>;
  const auto real = [&](int k) { return BitCast<double>(a.param[k]); };
  DT_IX_FOR_EACH(i, a.numel) {
    T* out = Elements<T>(a.op[0]) + i;
    if constexpr (!IsFloatLike<C>()) {
      if (a.mode == kIxArange) {  // unsigned: wraps as the host's int64 does, without overflow
        const uint64_t v = static_cast<uint64_t>(a.param[1]) + static_cast<uint64_t>(i) * static_cast<uint64_t>(a.param[2]);
        *out = static_cast<T>(static_cast<int64_t>(v));
        continue;
      }
    }
    const int64_t steps = a.param[4];
    double v = 0;
    if (a.mode == kIxArange) {
      v = MulAdd(static_cast<double>(i), real(4), real(3));
    } else if (steps == 1) {
      v = real(1);
    } else {
      v = i < steps / 2 ? MulAdd(real(3), static_cast<double>(i), real(1))
                        : MulAdd(-real(3), static_cast<double>(steps - 1 - i), real(2));
    }
    if constexpr (IsFloatLike<C>()) {
      *out = static_cast<T>(static_cast<C>(v));
    } else if constexpr (kSameType<T, bool>) {
      *out = v != 0;
    } else {  // through int64, as the CPU does: CUDA would saturate what x86 wraps
      *out = static_cast<T>(static_cast<int64_t>(v));
    }
  }
}

// ---- integer pointwise ops that check their operands ----

// floor_divide, remainder (Python's rounding) and pow of integers: operand 0 the result,
// operands 1 and 2 the arguments, broadcast by their strides. A zero divisor or a negative
// exponent yields 0 and records its position (+ 1, the lowest wins) in the error word, and the
// op raises as the CPU does. Other types do nothing (the host never launches them).
template <typename T>
void int_binary(const IxArgs& a) {
  using C = ComputeType<T>;
  DT_IX_FOR_EACH(i, a.numel) {
    if constexpr (scalar::kIsIntegerLike<C> && !kSameType<C, bool>) {
      int64_t off[kIxMaxOperands];
      IxOffsets(a, i, off);
      const C x = static_cast<C>(Elements<const T>(a.op[1])[off[1]]);
      const C y = static_cast<C>(Elements<const T>(a.op[2])[off[2]]);
      C r = C(0);
      if (a.mode == kIxPower ? y < C(0) : y == C(0)) {
        atomicMin(reinterpret_cast<unsigned long long*>(a.error), static_cast<unsigned long long>(i + 1));
      } else if (a.mode == kIxFloorDivide) {
        r = scalar::floor_divide(x, y);
      } else if (a.mode == kIxRemainder) {
        r = scalar::remainder(x, y);
      } else {
        r = scalar::pow_(x, y);
      }
      Elements<T>(a.op[0])[off[0]] = static_cast<T>(r);
    }
  }
}

#undef DT_IX_FOR_EACH

}  // namespace dt::ix

#endif  // DYNTRACE_RUNTIME_INDEX_KERNELS_CUH_

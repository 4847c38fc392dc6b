// Uses one symbol from each Abseil component the project relies on, plus
// dlpack, CBLAS and gmock, so a missing library shows up as a link error here.
#include <cblas.h>
#include <dlpack/dlpack.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/debugging/stacktrace.h"
#include "absl/debugging/symbolize.h"
#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

absl::StatusOr<int> ParsePositive(int v) {
  if (v <= 0) return absl::InvalidArgumentError(absl::StrFormat("bad %d", v));
  return v;
}

int Sum(absl::Span<const int> values) {
  int total = 0;
  for (int v : values) total += v;
  return total;
}

TEST(Absl, StatusAndStrings) {
  EXPECT_EQ(*ParsePositive(3), 3);
  absl::StatusOr<int> bad = ParsePositive(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "bad -1");

  // Payloads are stored as Cords, which pulls in the cord libraries.
  absl::Status status = bad.status();
  status.SetPayload("type.example/detail", absl::Cord("extra"));
  EXPECT_EQ(std::string(*status.GetPayload("type.example/detail")), "extra");

  EXPECT_EQ(absl::StrCat("a", 1, "b"), "a1b");
  std::vector<std::string> parts = absl::StrSplit("x,y,z", ',');
  EXPECT_THAT(parts, testing::ElementsAre("x", "y", "z"));
  EXPECT_EQ(absl::StrJoin(parts, "-"), "x-y-z");
}

TEST(Absl, Containers) {
  absl::flat_hash_map<std::string, int> map;
  absl::flat_hash_set<int64_t> set;
  for (int i = 0; i < 100; ++i) {
    map[absl::StrCat("k", i)] = i;
    set.insert(i * 7);
  }
  EXPECT_EQ(map.at("k42"), 42);
  EXPECT_TRUE(set.contains(49));

  absl::InlinedVector<int, 4> small = {1, 2, 3};
  small.push_back(4);
  small.push_back(5);  // Spills to the heap.
  EXPECT_EQ(Sum(small), 15);
}

TEST(Absl, SynchronizationAndTime) {
  absl::Mutex mu;
  int counter = 0;
  absl::Notification done;
  std::thread worker([&] {
    for (int i = 0; i < 1000; ++i) {
      absl::MutexLock lock(&mu);
      ++counter;
    }
    done.Notify();
  });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  worker.join();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(counter, 1000);
  EXPECT_LT(absl::Now() - absl::UnixEpoch(), absl::Hours(24 * 365 * 1000));
  EXPECT_EQ(absl::FormatDuration(absl::Milliseconds(1500)), "1.5s");
}

TEST(Absl, Int128AndDebugging) {
  absl::uint128 big = absl::MakeUint128(1, 0) * 3;
  std::ostringstream out;
  out << big;
  EXPECT_EQ(out.str(), "55340232221128654848");

  void* frames[8];
  EXPECT_GT(absl::GetStackTrace(frames, 8, 0), 0);
  char name[256];
  absl::Symbolize(frames[0], name, sizeof(name));  // Best effort: no assert.
}

TEST(Dlpack, ManagedTensorDeleter) {
  static float data[6] = {0, 1, 2, 3, 4, 5};
  static int64_t shape[2] = {2, 3};
  static bool deleted = false;
  DLManagedTensor tensor{};
  tensor.dl_tensor.data = data;
  tensor.dl_tensor.device = {kDLCPU, 0};
  tensor.dl_tensor.ndim = 2;
  tensor.dl_tensor.dtype = {kDLFloat, 32, 1};
  tensor.dl_tensor.shape = shape;
  tensor.deleter = [](DLManagedTensor*) { deleted = true; };
  EXPECT_EQ(tensor.dl_tensor.shape[1], 3);
  tensor.deleter(&tensor);
  EXPECT_TRUE(deleted);
}

TEST(OpenBlas, Sgemm2x2) {
  const float a[4] = {1, 2, 3, 4};
  const float b[4] = {5, 6, 7, 8};
  float c[4] = {};
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2,
              b, 2, 0.0f, c, 2);
  EXPECT_FLOAT_EQ(c[0], 19);
  EXPECT_FLOAT_EQ(c[1], 22);
  EXPECT_FLOAT_EQ(c[2], 43);
  EXPECT_FLOAT_EQ(c[3], 50);
}

}  // namespace

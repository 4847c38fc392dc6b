// runtime/cuda_attention: which operands the fused attention kernel takes, and its source
// compiling with NVRTC for every element type, mask kind and a spread of head dims. Its results
// are checked on the emulated device (tests/python/test_cuda_emulated.py).
#include "runtime/cuda_attention.h"

#include <cstdlib>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/nvrtc.h"

namespace dt {
namespace {

Tensor Meta(Dims sizes, DType dtype = DType::kFloat32) { return Tensor::Empty(sizes, dtype, Device::Meta()); }

TEST(AttentionKernelMisfit, TakesWhatTheKernelHandles) {
  const Tensor q = Meta({2, 12, 128, 64}), k = Meta({2, 12, 100, 64}), v = Meta({2, 12, 100, 32});
  EXPECT_EQ(AttentionKernelMisfit(q, k, v, nullptr, nullptr, {}), "");
  // Broadcast batch dims, a [L, S] bool mask, no batch dims at all.
  const Tensor keep = Meta({128, 100}, DType::kBool);
  EXPECT_EQ(AttentionKernelMisfit(q, Meta({1, 12, 100, 64}), v, &keep, nullptr, {.mask_kind = kAttentionKeepWhereTrue}), "");
  EXPECT_EQ(AttentionKernelMisfit(Meta({5, 8}), Meta({7, 8}), Meta({7, 3}), nullptr, nullptr, {}), "");
  const Tensor add = Meta({2, 1, 128, 100}, DType::kFloat16);
  EXPECT_EQ(AttentionKernelMisfit(Meta({2, 12, 128, 64}, DType::kFloat16), Meta({2, 12, 100, 64}, DType::kFloat16),
                                  Meta({2, 12, 100, 32}, DType::kFloat16), &add, nullptr, {.mask_kind = kAttentionAddMask}),
            "");
}

TEST(AttentionKernelMisfit, SaysWhyItDoesNotTakeTheRest) {
  const Tensor q = Meta({2, 12, 128, 64}), k = Meta({2, 12, 100, 64}), v = Meta({2, 12, 100, 32});
  EXPECT_NE(AttentionKernelMisfit(Meta({2, 2, 12, 128, 64}), k, v, nullptr, nullptr, {}).find("3 batch dims"),
            std::string::npos);
  EXPECT_NE(AttentionKernelMisfit(Meta({2, 12, 128, 160}), Meta({2, 12, 100, 160}), v, nullptr, nullptr, {})
                .find("head dims 160 and 32"),
            std::string::npos);
  EXPECT_NE(AttentionKernelMisfit(Meta({2, 12, 128, 64}, DType::kFloat64), Meta({2, 12, 100, 64}, DType::kFloat64),
                                  Meta({2, 12, 100, 32}, DType::kFloat64), nullptr, nullptr, {})
                .find("float64"),
            std::string::npos);
  EXPECT_NE(AttentionKernelMisfit(q, k, Meta({2, 12, 100, 32}, DType::kFloat16), nullptr, nullptr, {}).find("float16"),
            std::string::npos);
  EXPECT_NE(AttentionKernelMisfit(q, Meta({2, 12, 100, 63}), v, nullptr, nullptr, {}).find("are not"), std::string::npos);
  const Tensor float_mask = Meta({128, 100});
  EXPECT_NE(AttentionKernelMisfit(q, k, v, &float_mask, nullptr, {.mask_kind = kAttentionKeepWhereTrue}).find("float32 mask"),
            std::string::npos);
  const Tensor wide = Meta({128, 101}, DType::kBool);
  EXPECT_NE(AttentionKernelMisfit(q, k, v, &wide, nullptr, {.mask_kind = kAttentionDropWhereTrue}).find("does not broadcast"),
            std::string::npos);
  EXPECT_NE(AttentionKernelMisfit(q, k, v, nullptr, nullptr, {.mask_kind = kAttentionAddMask}).find("disagree"),
            std::string::npos);
  EXPECT_EQ(AttentionKernelMisfit(q, Meta({2, 12, 0, 64}), Meta({2, 12, 0, 32}), nullptr, nullptr, {}), "no keys");
}

TEST(AttentionKernelMisfit, DropoutKeepsAreBoolAndScoreShaped) {
  const Tensor q = Meta({2, 12, 128, 64}), k = Meta({2, 12, 100, 64}), v = Meta({2, 12, 100, 32});
  const Tensor keep = Meta({2, 12, 128, 100}, DType::kBool), mask = Meta({128, 100}, DType::kBool);
  EXPECT_EQ(AttentionKernelMisfit(q, k, v, nullptr, &keep, {}), "");
  EXPECT_EQ(AttentionKernelMisfit(q, k, v, &mask, &keep, {.mask_kind = kAttentionDropWhereTrue}), "");
  const Tensor float_keep = Meta({2, 12, 128, 100});
  EXPECT_NE(AttentionKernelMisfit(q, k, v, nullptr, &float_keep, {}).find("a float32 dropout keep mask"),
            std::string::npos);
  const Tensor short_keep = Meta({2, 12, 127, 100}, DType::kBool);
  EXPECT_NE(AttentionKernelMisfit(q, k, v, nullptr, &short_keep, {}).find("does not broadcast"), std::string::npos);
  const Tensor three_batch = Meta({3, 2, 12, 128, 100}, DType::kBool);
  EXPECT_NE(AttentionKernelMisfit(q, k, v, nullptr, &three_batch, {}).find("3 batch dims"), std::string::npos);
}

// Where CI has NVRTC (tools/test.sh sets DYNTRACE_REQUIRE_NVRTC=1), a missing NVRTC fails.
TEST(AttentionKernelSource, CompilesWithNvrtc) {
  if (!ProbeNvrtc().available) {
    const char* required = std::getenv("DYNTRACE_REQUIRE_NVRTC");
    if (required != nullptr && std::string_view(required) == "1") FAIL() << ProbeNvrtc().reason;
    GTEST_SKIP() << "CUDA's NVRTC was not found: " << ProbeNvrtc().reason;
  }
  struct Variant {
    int head, value_head;
    AttentionMask mask;
    bool causal, dropout;
  };
  // GPT-2's 64, the widest (128), a narrow pair, odd sizes that leave partial float4 chunks; two
  // with dropout.
  const Variant variants[] = {{64, 64, kAttentionKeepWhereTrue, false, false},
                              {128, 128, kAttentionAddMask, true, false},
                              {16, 8, kAttentionDropWhereTrue, false, true},
                              {80, 97, kAttentionNoMask, true, false},
                              {64, 64, kAttentionNoMask, true, true}};
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (const Variant& v : variants) {
      const std::string name = absl::StrCat("attention_", DTypeName(dtype), "_", v.head, "_", v.value_head,
                                            v.dropout ? "_dropout" : "");
      absl::StatusOr<std::string> cubin = CompileCudaToCubin(
          AttentionKernelSource(dtype, v.head, v.value_head, v.mask, v.causal, v.dropout), name, 90);
      ASSERT_TRUE(cubin.ok()) << name << ": " << cubin.status();
      EXPECT_EQ(cubin->substr(0, 4), "\x7f" "ELF") << name;
      EXPECT_NE(cubin->find(std::string("\0dt_att_forward\0", 16)), std::string::npos) << name;
    }
  }
}

}  // namespace
}  // namespace dt

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
  EXPECT_EQ(AttentionKernelMisfit(q, k, v, nullptr, {}), "");
  // Broadcast batch dims, a [L, S] bool mask, no batch dims at all.
  const Tensor keep = Meta({128, 100}, DType::kBool);
  EXPECT_EQ(AttentionKernelMisfit(q, Meta({1, 12, 100, 64}), v, &keep, {.mask_kind = kAttentionKeepWhereTrue}), "");
  EXPECT_EQ(AttentionKernelMisfit(Meta({5, 8}), Meta({7, 8}), Meta({7, 3}), nullptr, {}), "");
  const Tensor add = Meta({2, 1, 128, 100}, DType::kFloat16);
  EXPECT_EQ(AttentionKernelMisfit(Meta({2, 12, 128, 64}, DType::kFloat16), Meta({2, 12, 100, 64}, DType::kFloat16),
                                  Meta({2, 12, 100, 32}, DType::kFloat16), &add, {.mask_kind = kAttentionAddMask}),
            "");
}

TEST(AttentionKernelMisfit, SaysWhyItDoesNotTakeTheRest) {
  const Tensor q = Meta({2, 12, 128, 64}), k = Meta({2, 12, 100, 64}), v = Meta({2, 12, 100, 32});
  EXPECT_NE(AttentionKernelMisfit(Meta({2, 2, 12, 128, 64}), k, v, nullptr, {}).find("3 batch dims"),
            std::string::npos);
  EXPECT_NE(AttentionKernelMisfit(Meta({2, 12, 128, 160}), Meta({2, 12, 100, 160}), v, nullptr, {})
                .find("head dims 160 and 32"),
            std::string::npos);
  EXPECT_NE(AttentionKernelMisfit(Meta({2, 12, 128, 64}, DType::kFloat64), Meta({2, 12, 100, 64}, DType::kFloat64),
                                  Meta({2, 12, 100, 32}, DType::kFloat64), nullptr, {})
                .find("float64"),
            std::string::npos);
  EXPECT_NE(AttentionKernelMisfit(q, k, Meta({2, 12, 100, 32}, DType::kFloat16), nullptr, {}).find("float16"),
            std::string::npos);
  EXPECT_NE(AttentionKernelMisfit(q, Meta({2, 12, 100, 63}), v, nullptr, {}).find("are not"), std::string::npos);
  const Tensor float_mask = Meta({128, 100});
  EXPECT_NE(AttentionKernelMisfit(q, k, v, &float_mask, {.mask_kind = kAttentionKeepWhereTrue}).find("float32 mask"),
            std::string::npos);
  const Tensor wide = Meta({128, 101}, DType::kBool);
  EXPECT_NE(AttentionKernelMisfit(q, k, v, &wide, {.mask_kind = kAttentionDropWhereTrue}).find("does not broadcast"),
            std::string::npos);
  EXPECT_NE(AttentionKernelMisfit(q, k, v, nullptr, {.mask_kind = kAttentionAddMask}).find("disagree"),
            std::string::npos);
  EXPECT_EQ(AttentionKernelMisfit(q, Meta({2, 12, 0, 64}), Meta({2, 12, 0, 32}), nullptr, {}), "no keys");
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
    bool causal;
  };
  // GPT-2's 64, the widest (128), a narrow pair, odd sizes that leave partial float4 chunks.
  const Variant variants[] = {{64, 64, kAttentionKeepWhereTrue, false},
                              {128, 128, kAttentionAddMask, true},
                              {16, 8, kAttentionDropWhereTrue, false},
                              {80, 97, kAttentionNoMask, true}};
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (const Variant& v : variants) {
      const std::string name = absl::StrCat("attention_", DTypeName(dtype), "_", v.head, "_", v.value_head);
      absl::StatusOr<std::string> cubin =
          CompileCudaToCubin(AttentionKernelSource(dtype, v.head, v.value_head, v.mask, v.causal), name, 90);
      ASSERT_TRUE(cubin.ok()) << name << ": " << cubin.status();
      EXPECT_EQ(cubin->substr(0, 4), "\x7f" "ELF") << name;
      EXPECT_NE(cubin->find(std::string("\0dt_att_forward\0", 16)), std::string::npos) << name;
    }
  }
}

}  // namespace
}  // namespace dt

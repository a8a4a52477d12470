#include "quench/attention/attention_kernel_selection.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "harness/fake_attention_kernel.h"
#include "harness/log_capture.h"
#include "quench/attention/reference_attention_kernel.h"
#include "quench/core/error.h"

namespace quench {
namespace {

using testing_support::FakeKernelSpec;
using testing_support::LogCapture;
using testing_support::make_fake_kernel;
using Kind = AttentionKernelOverride::Kind;

AttentionConfig llama_like(int32_t compute_capability, DType kv_dtype) {
  AttentionConfig c;
  c.compute_capability = compute_capability;
  c.num_q_heads = 32;
  c.num_kv_heads = 8;
  c.kv_dtype = kv_dtype;
  return c;
}

SupportCheck must_not_fn(const AttentionConfig&, AttentionPhase) {
  return SupportCheck::must_not("Fake must-not reason.");
}
SupportCheck must_fn(const AttentionConfig&, AttentionPhase) {
  return SupportCheck::must("Has attention sinks.");
}

FakeKernelSpec spec(const char* name, int32_t priority) {
  FakeKernelSpec s;
  s.name = name;
  s.priority = priority;
  return s;
}

AttentionKernelOverride use(const char* name) {
  return {Kind::kUse, name};
}
AttentionKernelOverride avoid(const char* name) {
  return {Kind::kAvoid, name};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(AttentionKernelSelection, AutoPicksHighestPriorityMay) {
  AttentionKernelRegistry r;
  r.add(make_fake_kernel(spec("slow", 1)));
  r.add(make_fake_kernel(spec("fast", 5)));
  LogCapture log;
  const auto s = AttentionBackendSelection::decide(llama_like(0, DType::kBF16), {}, {}, r);
  EXPECT_EQ(s.prefill().kernel->name(), "fast");
  EXPECT_EQ(s.decode().kernel->name(), "fast");
  EXPECT_TRUE(s.prefill().override_honoured);
  EXPECT_TRUE(contains(s.prefill().reason, "Preferred over slow")) << s.prefill().reason;
  EXPECT_EQ(s.prefill().candidates.size(), 2u);
  EXPECT_EQ(log.count(LogLevel::kInfo), 2);
  EXPECT_EQ(log.count(LogLevel::kWarning), 0);
  EXPECT_TRUE(contains(log.text(LogLevel::kInfo), "Attention prefill kernel: fast"));
}

TEST(AttentionKernelSelection, AutoPrefersMustOverHigherPriorityMay) {
  AttentionKernelRegistry r;
  r.add(make_fake_kernel(spec("fast", 9)));
  FakeKernelSpec sinks = spec("sinks_kernel", 1);
  sinks.check = must_fn;
  r.add(make_fake_kernel(sinks));
  LogCapture log;
  const auto s = AttentionBackendSelection::decide(llama_like(0, DType::kBF16), {}, {}, r);
  EXPECT_EQ(s.decode().kernel->name(), "sinks_kernel");
  EXPECT_EQ(s.decode().reason, "Has attention sinks.");
  EXPECT_EQ(log.count(LogLevel::kWarning), 0);
}

TEST(AttentionKernelSelection, AutoSkipsMustNot) {
  AttentionKernelRegistry r;
  FakeKernelSpec bad = spec("bad", 9);
  bad.check = must_not_fn;
  r.add(make_fake_kernel(bad));
  r.add(make_fake_kernel(spec("good", 1)));
  const auto s = AttentionBackendSelection::decide(llama_like(0, DType::kBF16), {}, {}, r);
  EXPECT_EQ(s.prefill().kernel->name(), "good");
  EXPECT_EQ(s.prefill().reason, "fake");  // the must-not kernel is not a "may" rival
}

TEST(AttentionKernelSelection, NoKernelListsEveryCandidateAndReason) {
  AttentionKernelRegistry r;
  FakeKernelSpec bad = spec("bad", 9);
  bad.check = must_not_fn;
  r.add(make_fake_kernel(bad));
  register_reference_attention_kernel(r);
  try {
    AttentionBackendSelection::decide(llama_like(90, DType::kFP8E4M3), {}, {}, r);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "No attention kernel can serve prefill for sm_90")) << m;
    EXPECT_TRUE(contains(m, "bad (q bf16): must not: Fake must-not reason.")) << m;
    EXPECT_TRUE(contains(m, "reference (q bf16): must not: The CPU reference reads host memory"))
        << m;
    EXPECT_TRUE(contains(m, "Registered kernels: bad, reference.")) << m;
    EXPECT_TRUE(contains(m, "\nNo attention kernel can serve decode for sm_90")) << m;
  }
}

TEST(AttentionKernelSelection, NoKernelServesPhase) {
  AttentionKernelRegistry r;
  FakeKernelSpec prefill_only = spec("prefill_only", 1);
  prefill_only.decode = false;
  r.add(make_fake_kernel(prefill_only));
  try {
    AttentionBackendSelection::decide(llama_like(0, DType::kBF16), {}, {}, r);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "serve decode")) << e.what();
    EXPECT_TRUE(contains(e.what(), "No registered kernel serves this phase.")) << e.what();
  }
}

TEST(AttentionKernelSelection, ForcedKernelHonouredLogsInfo) {
  AttentionKernelRegistry r;
  r.add(make_fake_kernel(spec("fast", 9)));
  r.add(make_fake_kernel(spec("slow", 1)));
  LogCapture log;
  const auto s = AttentionBackendSelection::decide(llama_like(0, DType::kBF16), use("slow"), {}, r);
  EXPECT_EQ(s.prefill().kernel->name(), "slow");
  EXPECT_EQ(s.decode().kernel->name(), "fast");  // overrides are per phase
  EXPECT_TRUE(s.prefill().override_honoured);
  EXPECT_EQ(s.prefill().reason, "Forced by override. fake");
  EXPECT_EQ(log.count(LogLevel::kWarning), 0);
  EXPECT_TRUE(contains(log.text(LogLevel::kInfo), "Attention prefill kernel: slow"));
}

TEST(AttentionKernelSelection, ForcedMustNotKernelWarnsAndFallsBack) {
  AttentionKernelRegistry r;
  FakeKernelSpec bad = spec("bad", 9);
  bad.check = must_not_fn;
  r.add(make_fake_kernel(bad));
  r.add(make_fake_kernel(spec("good", 1)));
  LogCapture log;
  const auto s = AttentionBackendSelection::decide(llama_like(0, DType::kBF16), use("bad"), {}, r);
  EXPECT_EQ(s.prefill().kernel->name(), "good");
  EXPECT_FALSE(s.prefill().override_honoured);
  ASSERT_EQ(log.count(LogLevel::kWarning), 1);
  EXPECT_EQ(log.text(LogLevel::kWarning),
            "Attention prefill kernel: good (q bf16, KV bf16, out bf16). Cannot use attention "
            "kernel 'bad' for prefill: Fake must-not reason. Using 'good': fake\n");
  EXPECT_EQ(log.count(LogLevel::kInfo), 1);  // decode
}

TEST(AttentionKernelSelection, ForcedKernelLosesToRequiredKernel) {
  AttentionKernelRegistry r;
  r.add(make_fake_kernel(spec("plain", 9)));
  FakeKernelSpec sinks = spec("sinks_kernel", 1);
  sinks.check = must_fn;
  r.add(make_fake_kernel(sinks));
  LogCapture log;
  const auto s =
      AttentionBackendSelection::decide(llama_like(0, DType::kBF16), {}, use("plain"), r);
  EXPECT_EQ(s.decode().kernel->name(), "sinks_kernel");
  EXPECT_FALSE(s.decode().override_honoured);
  EXPECT_TRUE(contains(log.text(LogLevel::kWarning),
                       "Cannot use attention kernel 'plain' for decode: 'sinks_kernel' is "
                       "required: Has attention sinks."))
      << log.text(LogLevel::kWarning);
}

TEST(AttentionKernelSelection, ForcedKernelOfOtherPhaseWarns) {
  AttentionKernelRegistry r;
  FakeKernelSpec prefill_only = spec("prefill_only", 9);
  prefill_only.decode = false;
  r.add(make_fake_kernel(prefill_only));
  r.add(make_fake_kernel(spec("both", 1)));
  LogCapture log;
  const auto s =
      AttentionBackendSelection::decide(llama_like(0, DType::kBF16), {}, use("prefill_only"), r);
  EXPECT_EQ(s.decode().kernel->name(), "both");
  EXPECT_TRUE(contains(log.text(LogLevel::kWarning),
                       "Cannot use attention kernel 'prefill_only' for decode: it does not serve "
                       "decode."))
      << log.text(LogLevel::kWarning);
}

TEST(AttentionKernelSelection, ForcedMustNotWithoutAlternativeFails) {
  AttentionKernelRegistry r;
  FakeKernelSpec bad = spec("bad", 9);
  bad.check = must_not_fn;
  r.add(make_fake_kernel(bad));
  EXPECT_THROW(
      AttentionBackendSelection::decide(llama_like(0, DType::kBF16), use("bad"), use("bad"), r),
      Error);
}

TEST(AttentionKernelSelection, AvoidedKernelHonoured) {
  AttentionKernelRegistry r;
  r.add(make_fake_kernel(spec("fast", 9)));
  r.add(make_fake_kernel(spec("slow", 1)));
  LogCapture log;
  const auto s =
      AttentionBackendSelection::decide(llama_like(0, DType::kBF16), avoid("fast"), {}, r);
  EXPECT_EQ(s.prefill().kernel->name(), "slow");
  EXPECT_TRUE(s.prefill().override_honoured);
  EXPECT_EQ(s.prefill().reason, "Override excludes 'fast'. fake");
  EXPECT_EQ(log.count(LogLevel::kWarning), 0);
}

TEST(AttentionKernelSelection, AvoidingRequiredKernelWarnsAndUsesIt) {
  AttentionKernelRegistry r;
  r.add(make_fake_kernel(spec("plain", 9)));
  FakeKernelSpec sinks = spec("sinks_kernel", 1);
  sinks.check = must_fn;
  r.add(make_fake_kernel(sinks));
  LogCapture log;
  const auto s =
      AttentionBackendSelection::decide(llama_like(0, DType::kBF16), {}, avoid("sinks_kernel"), r);
  EXPECT_EQ(s.decode().kernel->name(), "sinks_kernel");
  EXPECT_FALSE(s.decode().override_honoured);
  EXPECT_TRUE(contains(log.text(LogLevel::kWarning),
                       "Cannot avoid attention kernel 'sinks_kernel' for decode: Has attention "
                       "sinks."))
      << log.text(LogLevel::kWarning);
}

TEST(AttentionKernelSelection, AvoidingOnlyKernelWarnsAndUsesIt) {
  AttentionKernelRegistry r;
  r.add(make_fake_kernel(spec("only", 1)));
  LogCapture log;
  const auto s =
      AttentionBackendSelection::decide(llama_like(0, DType::kBF16), avoid("only"), {}, r);
  EXPECT_EQ(s.prefill().kernel->name(), "only");
  EXPECT_TRUE(contains(log.text(LogLevel::kWarning),
                       "Cannot avoid attention kernel 'only' for prefill: no other kernel can "
                       "serve it."))
      << log.text(LogLevel::kWarning);
}

TEST(AttentionKernelSelection, AvoidingOnlyKernelThatCannotServeFails) {
  AttentionKernelRegistry r;
  FakeKernelSpec bad = spec("bad", 1);
  bad.check = must_not_fn;
  r.add(make_fake_kernel(bad));
  EXPECT_THROW(AttentionBackendSelection::decide(llama_like(0, DType::kBF16), avoid("bad"), {}, r),
               Error);
}

TEST(AttentionKernelSelection, KernelAskingFp8QueryIsRejectedWhenQuantizationDisabled) {
  AttentionKernelRegistry r;
  FakeKernelSpec dishonest = spec("always_fp8", 9);
  dishonest.query_dtype = [](const AttentionConfig&, AttentionPhase) { return DType::kFP8E4M3; };
  r.add(make_fake_kernel(dishonest));
  r.add(make_fake_kernel(spec("bf16_q", 1)));
  AttentionConfig c = llama_like(0, DType::kFP8E4M3);
  c.allow_fp8_query = false;
  const auto s = AttentionBackendSelection::decide(c, {}, {}, r);
  EXPECT_EQ(s.prefill().kernel->name(), "bf16_q");
  EXPECT_EQ(s.prefill().q_dtype, DType::kBF16);
  EXPECT_EQ(s.prefill().candidates[0].check.reason,
            "Needs a fp8_e4m3 query, but query quantization is disabled.");
}

// vLLM's SM90 dtype matrix (SPEC §1.1), with stand-ins for the GPU kernels.
struct MatrixRow {
  DType kv;
  bool allow_fp8_query;
  DType prefill_q;
};

TEST(AttentionKernelSelection, Sm90DtypeMatrix) {
  AttentionKernelRegistry r;
  register_reference_attention_kernel(r);
  testing_support::register_gpu_standin_kernels(r);
  const MatrixRow rows[] = {{DType::kBF16, true, DType::kBF16},
                            {DType::kFP8E4M3, true, DType::kFP8E4M3},
                            {DType::kFP8E4M3, false, DType::kBF16}};
  for (const MatrixRow& row : rows) {
    AttentionConfig c = llama_like(90, row.kv);
    c.allow_fp8_query = row.allow_fp8_query;
    const auto s = AttentionBackendSelection::decide(c, {}, {}, r);
    EXPECT_EQ(s.prefill().kernel->name(), "prefill_hopper") << c.describe();
    EXPECT_EQ(s.prefill().q_dtype, row.prefill_q) << c.describe();
    EXPECT_EQ(s.prefill().kv_dtype, row.kv);
    EXPECT_EQ(s.prefill().out_dtype, DType::kBF16);
    EXPECT_EQ(s.decode().kernel->name(), "decode_gqa") << c.describe();
    EXPECT_EQ(s.decode().q_dtype, DType::kBF16) << c.describe();
  }
}

TEST(AttentionKernelSelection, Sm80FallsBackToMmaPrefillWithReason) {
  AttentionKernelRegistry r;
  register_reference_attention_kernel(r);
  testing_support::register_gpu_standin_kernels(r);
  LogCapture log;
  const auto s = AttentionBackendSelection::decide(llama_like(80, DType::kFP8E4M3),
                                                   use("prefill_hopper"), {}, r);
  EXPECT_EQ(s.prefill().kernel->name(), "prefill_mma");
  EXPECT_EQ(s.prefill().q_dtype, DType::kBF16);
  EXPECT_TRUE(contains(log.text(LogLevel::kWarning),
                       "Cannot use attention kernel 'prefill_hopper' for prefill: Requires SM90; "
                       "sm_80 is not supported for prefill."))
      << log.text(LogLevel::kWarning);
}

TEST(AttentionKernelOverride, ParsesAutoNameAndExclusion) {
  AttentionKernelRegistry r;
  register_reference_attention_kernel(r);
  EXPECT_EQ(AttentionKernelOverride::parse("auto", r).kind, Kind::kAuto);
  const auto named = AttentionKernelOverride::parse("reference", r);
  EXPECT_EQ(named.kind, Kind::kUse);
  EXPECT_EQ(named.kernel, "reference");
  const auto excluded = AttentionKernelOverride::parse("!reference", r);
  EXPECT_EQ(excluded.kind, Kind::kAvoid);
  EXPECT_EQ(excluded.text(), "!reference");
  try {
    AttentionKernelOverride::parse("flash", r);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "'flash'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "kernels: reference")) << e.what();
  }
  EXPECT_THROW(AttentionKernelOverride::parse("!", r), Error);
}

TEST(AttentionKernelRegistry, RejectsDuplicateAndReservedNames) {
  AttentionKernelRegistry r;
  r.add(make_fake_kernel(spec("a", 1)));
  EXPECT_THROW(r.add(make_fake_kernel(spec("a", 2))), Error);
  EXPECT_THROW(r.add(make_fake_kernel(spec("auto", 2))), Error);
  EXPECT_THROW(r.add(make_fake_kernel(spec("!b", 2))), Error);
  EXPECT_EQ(r.names(), "a");
}

TEST(AttentionKernelRegistry, BuiltinHoldsReference) {
  const AttentionKernel* reference = AttentionKernelRegistry::builtin().find("reference");
  ASSERT_NE(reference, nullptr);
  EXPECT_TRUE(reference->serves(AttentionPhase::kPrefill));
  EXPECT_TRUE(reference->serves(AttentionPhase::kDecode));
  EXPECT_EQ(reference->memory_space(), MemorySpace::kHost);
}

TEST(ReferenceAttentionKernel, SupportCheckBranches) {
  const AttentionKernel& k = *AttentionKernelRegistry::builtin().find("reference");
  const auto check = [&](const AttentionConfig& c) { return k.check(c, AttentionPhase::kPrefill); };
  AttentionConfig ok = llama_like(0, DType::kFP8E5M2);
  ok.out_dtype = DType::kNVFP4;
  EXPECT_EQ(check(ok).level, SupportLevel::kMay);
  EXPECT_EQ(k.query_dtype(ok, AttentionPhase::kPrefill), DType::kBF16);

  AttentionConfig c = ok;
  c.compute_capability = 89;
  EXPECT_EQ(check(c).reason, "The CPU reference reads host memory; it cannot serve sm_89.");
  c = ok;
  c.num_kv_heads = 5;
  EXPECT_EQ(check(c).reason,
            "num_q_heads 32 is not supported with num_kv_heads 5 (a positive multiple of "
            "num_kv_heads >= 1).");
  c = ok;
  c.head_dim_vo = 64;
  EXPECT_EQ(check(c).level, SupportLevel::kMustNot);
  c = ok;
  c.head_dim_qk = c.head_dim_vo = 96;
  EXPECT_EQ(check(c).reason, "head_dim 96 is not supported (64, 128, 256).");
  c = ok;
  c.page_size = 8;
  EXPECT_EQ(check(c).level, SupportLevel::kMustNot);
  c = ok;
  c.q_dtype = DType::kFP8E4M3;
  EXPECT_EQ(check(c).level, SupportLevel::kMay);
  c.kv_dtype = DType::kBF16;
  EXPECT_EQ(check(c).reason, "An FP8 query needs an FP8 KV cache.");
  c = ok;
  c.kv_dtype = DType::kF16;
  EXPECT_EQ(check(c).level, SupportLevel::kMustNot);
  c = ok;
  c.out_dtype = DType::kF32;
  EXPECT_EQ(check(c).level, SupportLevel::kMustNot);
}

// Values no kernel can honour are refused by name, not read as "off" (a negative window or
// soft-cap) or passed on (no q heads, an infinite soft-cap that makes every score NaN).
TEST(ReferenceAttentionKernel, SupportCheckRefusesNonsenseHeadsWindowAndSoftCap) {
  const AttentionKernel& k = *AttentionKernelRegistry::builtin().find("reference");
  const auto reason = [&](const AttentionConfig& c) {
    const SupportCheck check = k.check(c, AttentionPhase::kPrefill);
    EXPECT_EQ(check.level, SupportLevel::kMustNot) << check.reason;
    return check.reason;
  };
  const AttentionConfig ok = llama_like(0, DType::kBF16);
  AttentionConfig c = ok;
  c.num_q_heads = 0;
  EXPECT_EQ(reason(c),
            "num_q_heads 0 is not supported with num_kv_heads 8 (a positive multiple "
            "of num_kv_heads >= 1).");
  c.num_q_heads = -8;
  EXPECT_NE(reason(c).find("num_q_heads -8"), std::string::npos);
  c = ok;
  c.sliding_window = -5;
  EXPECT_EQ(reason(c), "sliding_window -5 is not supported (0 = none, or >= 1 tokens).");
  c = ok;
  c.logit_soft_cap = -1.0f;
  EXPECT_EQ(reason(c), "logit_soft_cap -1 is not supported (0 = none, or finite and > 0).");
  c.logit_soft_cap = INFINITY;
  EXPECT_EQ(reason(c), "logit_soft_cap inf is not supported (0 = none, or finite and > 0).");
  c.logit_soft_cap = NAN;
  EXPECT_NE(reason(c).find("logit_soft_cap nan"), std::string::npos);
}

}  // namespace
}  // namespace quench

// Whole-model invariants on generated tiny models: prefill == decode, naive == absorbed MLA,
// paged == contiguous, thread-count independence, dtype tolerances, sharding, and exact KV bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/amx_tile_model.h"
#include "kernels/cpu/amx_pair_gemm.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kv/kv_cache.h"
#include "model/checkpoint_writer.h"
#include "model/model.h"
#include "model/quantize.h"
#include "model/safetensors.h"
#include "model/synthetic.h"
#include "model/test_models.h"
#include "runtime/generator.h"

namespace mlarun {
namespace {

struct RunOptions {
  int64_t chunk = 0;  // 0: whole sequence in one pass
  MlaPath path = MlaPath::kAuto;
  int block_size = 16;
  int threads = 2;
  DType kv_dtype = DType::kF32;
  std::string policy = "full";
  Isa isa = BestIsa();
  const KernelTable* table = nullptr;  // non-null: these kernels instead of isa's
  ScratchArena* scratch = nullptr;     // null: each forward pass uses a fresh arena
};

std::vector<int32_t> TestIds(int n) {
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids.push_back((i * 37 + 11) % 500);
  return ids;
}

// Returns logits [n, vocab] of `ids` and the cache's used bytes at the end.
std::vector<float> RunLogits(const Model& model, const std::vector<int32_t>& ids,
                             const RunOptions& o, size_t* kv_bytes = nullptr) {
  ThreadPool pool(o.threads);
  Exec exec{pool, o.table != nullptr ? *o.table : GetKernelTable(o.isa), o.scratch};
  KvCache cache(model.MakeKvLayout(o.kv_dtype), {.block_size = o.block_size,
                                                 .budget_bytes = 64 << 20,
                                                 .policy = ParseKvPolicy(o.policy),
                                                 .model_window = model.model_window()});
  const int32_t seq = cache.AddSequence();
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t vocab = model.config().vocab_size;
  const int64_t chunk = o.chunk > 0 ? o.chunk : n;
  std::vector<float> logits(static_cast<size_t>(n * vocab));
  for (int64_t begin = 0; begin < n; begin += chunk) {
    std::vector<BatchToken> batch;
    for (int64_t i = begin; i < std::min(n, begin + chunk); ++i) {
      batch.push_back(
          {.token = ids[static_cast<size_t>(i)], .seq = seq, .pos = i, .want_logits = true});
    }
    ReserveOrThrow(cache, seq, static_cast<int64_t>(batch.size()));
    model.Forward(exec, cache, batch, {.mla_path = o.path}, logits.data() + begin * vocab);
  }
  if (kv_bytes != nullptr) *kv_bytes = cache.UsedBytes();
  return logits;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Mean |diff| over all logits and the median over positions of the per-position max |diff|.
struct DiffStats {
  double mean = 0;
  float median_max = 0;
};
DiffStats Compare(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab) {
  DiffStats stats;
  std::vector<float> worst;
  for (size_t t = 0; t < a.size() / static_cast<size_t>(vocab); ++t) {
    float w = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const float d = std::fabs(a[t * vocab + v] - b[t * vocab + v]);
      stats.mean += d;
      w = std::max(w, d);
    }
    worst.push_back(w);
  }
  stats.mean /= static_cast<double>(a.size());
  std::sort(worst.begin(), worst.end());
  stats.median_max = worst[worst.size() / 2];
  return stats;
}

// The number of positions whose logits [n, vocab] have their largest value at the same index.
int SameArgmax(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab) {
  int same = 0;
  for (size_t begin = 0; begin < a.size(); begin += static_cast<size_t>(vocab)) {
    const auto row_a = a.begin() + static_cast<std::ptrdiff_t>(begin);
    const auto row_b = b.begin() + static_cast<std::ptrdiff_t>(begin);
    same += std::max_element(row_a, row_a + vocab) - row_a ==
            std::max_element(row_b, row_b + vocab) - row_b;
  }
  return same;
}

// Logits `b` against `a` from kernels that round differently: prints `what`'s mean and median
// per-position max differences, and expects them above 0 (the kernels under test ran) and below
// the bounds, and the argmax equal at min_same_argmax positions or more (0: not checked).
struct CloseBounds {
  double mean = 0;
  float median_max = 0;
  int min_same_argmax = 0;
};
void ExpectClose(const char* what, const std::vector<float>& a, const std::vector<float>& b,
                 int64_t vocab, const CloseBounds& bounds) {
  const DiffStats stats = Compare(a, b, vocab);
  std::printf("%s: mean %.2e median max %.2e\n", what, stats.mean, stats.median_max);
  EXPECT_GT(stats.mean, 0.0) << what;
  EXPECT_LT(stats.mean, bounds.mean) << what;
  EXPECT_LT(stats.median_max, bounds.median_max) << what;
  if (bounds.min_same_argmax > 0) {
    EXPECT_GE(SameArgmax(a, b, vocab), bounds.min_same_argmax) << what;
  }
}

class ModelInvariantTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelInvariantTest, PrefillEqualsTokenByTokenDecode) {
  const auto model = Model::Load(testing::MakeTestModel(GetParam()));
  const auto ids = TestIds(20);
  for (MlaPath path : {MlaPath::kNaive, MlaPath::kAbsorbed}) {
    const auto prefill = RunLogits(*model, ids, {.path = path});
    const auto decode = RunLogits(*model, ids, {.chunk = 1, .path = path});
    const auto chunked = RunLogits(*model, ids, {.chunk = 7, .path = path});
    EXPECT_LT(MaxAbsDiff(prefill, decode), 1e-5);
    EXPECT_LT(MaxAbsDiff(prefill, chunked), 1e-5);
  }
}

TEST_P(ModelInvariantTest, PagedEqualsContiguousAndThreadsDoNotMatter) {
  const auto model = Model::Load(testing::MakeTestModel(GetParam()));
  const auto ids = TestIds(30);
  const auto contiguous = RunLogits(*model, ids, {.chunk = 3, .block_size = 4096, .threads = 1});
  const auto paged = RunLogits(*model, ids, {.chunk = 3, .block_size = 4, .threads = 1});
  const auto paged_threads = RunLogits(*model, ids, {.chunk = 3, .block_size = 4, .threads = 3});
  EXPECT_EQ(contiguous, paged);
  EXPECT_EQ(paged, paged_threads);
  // Whole prefill chunks: the row-wise work (norms, RoPE, routing, MoE gathers and sums) is split
  // over the threads from kParallelRowsMin tokens on, each row by one thread.
  EXPECT_EQ(RunLogits(*model, ids, {.chunk = 15, .threads = 1}),
            RunLogits(*model, ids, {.chunk = 15, .threads = 3}));
  // Token by token: one query's attention spread over the threads by context piece and, where the
  // pieces leave threads idle, by kv head (tiny-llama-gqa's 2 on 3 or 5 threads).
  const auto decode = RunLogits(*model, ids, {.chunk = 1, .block_size = 4, .threads = 1});
  EXPECT_EQ(decode, RunLogits(*model, ids, {.chunk = 1, .block_size = 4, .threads = 3}));
  EXPECT_EQ(decode, RunLogits(*model, ids, {.chunk = 1, .block_size = 4, .threads = 5}));
}

TEST_P(ModelInvariantTest, WindowCoveringTheSequenceEqualsFull) {
  const auto model = Model::Load(testing::MakeTestModel(GetParam()));
  const auto ids = TestIds(24);
  // Absorbed MLA (and GQA) read the same rows through the same kernel either way: bitwise.
  const auto full = RunLogits(*model, ids, {.chunk = 5, .path = MlaPath::kAbsorbed});
  const auto windowed = RunLogits(
      *model, ids, {.chunk = 5, .path = MlaPath::kAbsorbed, .policy = "window:24,sinks:2"});
  const auto narrow =
      RunLogits(*model, ids, {.chunk = 5, .path = MlaPath::kAbsorbed, .policy = "window:6"});
  EXPECT_EQ(full, windowed);
  EXPECT_GT(MaxAbsDiff(full, narrow), 1e-3);  // a real window changes the result
  // Naive MLA under the full policy takes dense GEMM tiles, under a window the row kernel.
  const auto naive_full = RunLogits(*model, ids, {.chunk = 5, .path = MlaPath::kNaive});
  const auto naive_windowed =
      RunLogits(*model, ids, {.chunk = 5, .path = MlaPath::kNaive, .policy = "window:24,sinks:2"});
  EXPECT_LT(MaxAbsDiff(naive_full, naive_windowed), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Presets, ModelInvariantTest,
                         ::testing::Values("tiny-v2-lite", "tiny-v2", "tiny-v3", "tiny-llama-gqa",
                                           "tiny-qwen2"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(ModelTest, AbsorbedMlaMatchesNaiveMla) {
  for (const char* preset : {"tiny-v2-lite", "tiny-v2", "tiny-v3"}) {
    const auto model = Model::Load(testing::MakeTestModel(preset));
    const auto ids = TestIds(24);
    const auto naive = RunLogits(*model, ids, {.chunk = 4, .path = MlaPath::kNaive});
    const auto absorbed = RunLogits(*model, ids, {.chunk = 4, .path = MlaPath::kAbsorbed});
    EXPECT_LT(MaxAbsDiff(naive, absorbed), 1e-5) << preset;
  }
  // A context the naive path expands in pieces of 512 positions (1,100 tokens in chunks of 550:
  // one, two and three pieces, the last ones short).
  const auto model = Model::Load(testing::MakeTestModel("tiny-v2-lite"));
  const auto ids = TestIds(1100);
  EXPECT_LT(MaxAbsDiff(RunLogits(*model, ids, {.chunk = 550, .path = MlaPath::kNaive}),
                       RunLogits(*model, ids, {.chunk = 550, .path = MlaPath::kAbsorbed})),
            1e-5);
}

// Exec::meter (what `mlarun bench` reports as the products' and attention's shares of a decode):
// one decoded token's weight products read every matrix of the forward pass once (the routed
// experts: num_experts_per_tok of them), i.e. the bench's weight bytes per decoded token less the
// embedding row, which is looked up, not multiplied; absorbed MLA reads the per-head W_uk^T copies
// instead of kv_b_proj's W_uk rows (the same bytes but for Q8's column padding, which the tiny
// models' 16-wide heads show). Products and attention take part of the forward pass's time,
// never more than all of it, and the products by shape add up to them. Both MLA paths, dense and
// MoE layers, GQA, bf16 and int8 weights.
TEST(ModelTest, ExecMeterCountsEachWeightOncePerDecodedToken) {
  for (const auto& [preset, format] : {std::pair{"tiny-v2-lite", WeightFormat::kAsLoaded},
                                       {"tiny-v3", WeightFormat::kAsLoaded},
                                       {"tiny-llama-gqa", WeightFormat::kAsLoaded},
                                       {"tiny-v2-lite", WeightFormat::kInt8}}) {
    const auto model = Model::Load(testing::MakeTestModel(preset), {.weights = format});
    const ModelConfig& c = model->config();
    const int64_t expected =
        model->WeightBytesPerDecodedToken() - WeightBytes(model->weights().embed_tokens, 0, 1);
    int64_t absorbed_change = 0;  // W_uk^T copies less kv_b_proj's W_uk rows
    for (const LayerWeights& layer : model->weights().layers) {
      for (size_t h = 0; h < layer.mla.w_uk_t.size(); ++h) {
        const int64_t row = static_cast<int64_t>(h) * (c.qk_nope_head_dim + c.v_head_dim);
        absorbed_change += WeightBytes(layer.mla.w_uk_t[h], 0, layer.mla.w_uk_t[h].rows) -
                           WeightBytes(layer.mla.kv_b_proj, row, row + c.qk_nope_head_dim);
      }
    }
    for (MlaPath path : {MlaPath::kNaive, MlaPath::kAbsorbed}) {
      ThreadPool pool(2);
      Exec exec{pool, GetKernelTable(BestIsa())};
      KvCache cache(model->MakeKvLayout(DType::kF32), {.block_size = 16, .budget_bytes = 16 << 20});
      const int32_t seq = cache.AddSequence();
      std::vector<float> logits(static_cast<size_t>(c.vocab_size));
      ExecMeter meter{.by_shape = true};
      double seconds = 0.0;
      for (int32_t pos = 0; pos < 6; ++pos) {
        if (pos == 5) exec.meter = &meter;
        const BatchToken token{.token = 7 * pos + 3, .seq = seq, .pos = pos, .want_logits = true};
        ReserveOrThrow(cache, seq, 1);
        const auto start = std::chrono::steady_clock::now();
        model->Forward(exec, cache, std::span<const BatchToken>(&token, 1), {.mla_path = path},
                       logits.data());
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
      const bool absorbed = path == MlaPath::kAbsorbed && c.family == ArchFamily::kDeepseek;
      EXPECT_EQ(meter.product_weight_bytes, expected + (absorbed ? absorbed_change : 0)) << preset;
      EXPECT_GT(meter.product_batches, 0) << preset;
      EXPECT_GT(meter.product_seconds, 0.0) << preset;
      EXPECT_GT(meter.attention_seconds, 0.0) << preset;
      EXPECT_LE(meter.product_seconds + meter.attention_seconds, seconds) << preset;
      // By shape (bench --products): the same calls, bytes and time, split; absorbed MLA's W_uk^T
      // products are one call of n_head jobs of [kv_lora_rank, qk_nope_head_dim].
      int64_t calls = 0;
      int64_t bytes = 0;
      double shape_seconds = 0.0;
      bool w_uk_t_batch = false;
      for (const ExecMeter::ProductShape& s : meter.shapes) {
        calls += s.calls;
        bytes += s.calls * s.weight_bytes;
        shape_seconds += s.seconds;
        EXPECT_GE(s.tokens, 1) << preset;  // naive MLA re-expands all 6 cache rows
        w_uk_t_batch |= s.jobs == c.num_attention_heads && s.rows == c.kv_lora_rank &&
                        s.cols == c.qk_nope_head_dim;
      }
      EXPECT_EQ(calls, meter.product_batches) << preset;
      EXPECT_EQ(bytes, meter.product_weight_bytes) << preset;
      EXPECT_NEAR(shape_seconds, meter.product_seconds, 1e-9) << preset;
      EXPECT_EQ(w_uk_t_batch, absorbed) << preset;
    }
  }
}

// Weights copied into huge-page memory instead of mapped, and forward-pass temporaries kept in
// one arena across calls (naive MLA prefill in chunks, then absorbed decode), give bitwise the
// logits of a mapped model with a fresh arena per call.
TEST(ModelTest, CopiedWeightsAndReusedScratchGiveIdenticalLogits) {
  const std::string dir = testing::MakeTestModel("tiny-v3");
  const auto mapped = Model::Load(dir);
  const auto copied = Model::Load(dir, {.file_load = FileLoad::kCopy});
  const std::vector<int32_t> ids = TestIds(48);  // a 32-token naive chunk, then 16 absorbed
  const std::vector<float> reference = RunLogits(*mapped, ids, {.chunk = 32});
  ScratchArena scratch;
  for (int pass = 0; pass < 2; ++pass) {
    EXPECT_EQ(RunLogits(*copied, ids, {.chunk = 32, .scratch = &scratch}), reference) << pass;
  }
  EXPECT_GT(scratch.capacity(), 0u);  // the naive path's K/V expansion went through the arena
}

TEST(ModelTest, KvBytesEqualLatentFormula) {
  const auto model = Model::Load(testing::MakeTestModel("tiny-v3"));
  const ModelConfig& c = model->config();
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    size_t bytes = 0;
    RunLogits(*model, TestIds(21), {.chunk = 4, .kv_dtype = dtype}, &bytes);
    // (kv_lora_rank + qk_rope_head_dim) x layers x tokens x dtype size.
    EXPECT_EQ(bytes, static_cast<size_t>(c.kv_lora_rank + c.qk_rope_head_dim) *
                         c.num_hidden_layers * 21 * DTypeSize(dtype));
  }
}

TEST(ModelTest, LowPrecisionWeightsStayCloseToF32) {
  // Same random model stored in f32, bf16 and fp8 (128x128 block scales). Statistics over 16
  // positions (logits up to ~4), because a flipped expert choice moves single positions a lot.
  // Measured: bf16 mean 0.011, median max 0.042; fp8 (3 mantissa bits) mean 0.26, median max
  // 0.83. Bounds are about twice that.
  const auto ids = TestIds(16);
  const auto f32 = RunLogits(*Model::Load(testing::MakeTestModel("tiny-v3")), ids, {});
  const auto bf16 =
      RunLogits(*Model::Load(testing::MakeTestModel("tiny-v3", DType::kBF16)), ids, {});
  const auto fp8 =
      RunLogits(*Model::Load(testing::MakeTestModel("tiny-v3", DType::kF8E4M3)), ids, {});
  const DiffStats bf16_stats = Compare(f32, bf16, 512);
  const DiffStats fp8_stats = Compare(f32, fp8, 512);
  std::printf("bf16 vs f32: mean %.4f median max %.4f; fp8 vs f32: mean %.4f median max %.4f\n",
              bf16_stats.mean, bf16_stats.median_max, fp8_stats.mean, fp8_stats.median_max);
  EXPECT_GT(bf16_stats.mean, 0.0);
  EXPECT_LT(bf16_stats.mean, 0.025);
  EXPECT_LT(bf16_stats.median_max, 0.1);
  EXPECT_GT(fp8_stats.mean, bf16_stats.mean);
  EXPECT_LT(fp8_stats.mean, 0.5);
  EXPECT_LT(fp8_stats.median_max, 1.6);
}

// `--weights bf16`: the streamed matrices of an f32 or f16 checkpoint rounded to bf16 at load
// give bitwise the logits of a checkpoint holding those matrices rounded to bf16 by this test
// (F32ToBF16 of each value; embedding, router and vectors left as stored); a bf16 checkpoint
// stays mapped in place; a packing load frees the conversion's buffer; Q8 files are refused.
TEST(ModelTest, Bf16WeightsRoundOtherMatricesAtLoad) {
  const auto ids = TestIds(12);
  for (DType stored : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(DTypeName(stored));
    const std::string dir = testing::MakeTestModel("tiny-v3", stored);
    const std::string rounded_dir = dir + "_rounded_bf16";
    std::filesystem::create_directories(rounded_dir);
    std::filesystem::copy_file(dir + "/config.json", rounded_dir + "/config.json",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(dir + "/model.safetensors", rounded_dir + "/model.safetensors",
                               std::filesystem::copy_options::overwrite_existing);
    int rounded_tensors = 0;
    testing::RewriteTensors(rounded_dir, [&](std::vector<TensorToWrite>& tensors) {
      for (TensorToWrite& t : tensors) {
        const bool streamed = t.shape.size() == 2 && t.name != "model.embed_tokens.weight" &&
                              !t.name.ends_with("mlp.gate.weight");
        if (!streamed) continue;
        const size_t n = t.data.size() / DTypeSize(t.dtype);
        std::vector<uint8_t> out(n * 2);
        for (size_t i = 0; i < n; ++i) {
          float v = 0.0f;
          if (t.dtype == DType::kF32) {
            std::memcpy(&v, t.data.data() + 4 * i, 4);
          } else {
            uint16_t h = 0;
            std::memcpy(&h, t.data.data() + 2 * i, 2);
            v = F16ToF32(h);
          }
          const uint16_t b = F32ToBF16(v);
          std::memcpy(out.data() + 2 * i, &b, 2);
        }
        t.dtype = DType::kBF16;
        t.data = std::move(out);
        ++rounded_tensors;
      }
    });
    EXPECT_GT(rounded_tensors, 20);
    const auto converted = Model::Load(dir, {.weights = WeightFormat::kBf16});
    const ModelWeights& w = converted->weights();
    EXPECT_EQ(w.layers[1].moe.experts[0].down_proj.dtype, DType::kBF16);
    EXPECT_EQ(w.lm_head.dtype, DType::kBF16);
    EXPECT_EQ(w.layers[1].moe.gate.dtype, stored);  // the router stays exact
    EXPECT_EQ(w.embed_tokens.dtype, stored);
    const auto logits = RunLogits(*converted, ids, {});
    EXPECT_EQ(logits, RunLogits(*Model::Load(rounded_dir), ids, {}));
    EXPECT_NE(logits, RunLogits(*Model::Load(dir), ids, {}));  // the rounding took place
    // `mlarun quantize --weights bf16`: the converted checkpoint loads to the same logits.
    const std::string written = dir + "_written_bf16";
    WriteConvertedCheckpoint(dir, written, {.weights = WeightFormat::kBf16});
    EXPECT_EQ(RunLogits(*Model::Load(written), ids, {}), logits);
    // With packing (--load copy): converted straight into the packed layout, in one buffer (no
    // row-major copy in between); kv_b_proj's W_uk^T read back from it exactly.
    const auto packed = Model::Load(dir, {.weights = WeightFormat::kBf16, .pack_16bit = true});
    const ModelWeights& pw = packed->weights();
    ASSERT_FALSE(pw.owned_pages.empty());
    for (const WeightMatrix* m :
         {&pw.lm_head, &pw.layers[1].moe.experts[0].down_proj, &pw.layers[0].mla.kv_b_proj}) {
      EXPECT_EQ(m->dtype, DType::kBF16);
      EXPECT_EQ(m->layout16, Layout16::kPacked16);
      const auto* p = static_cast<const uint8_t*>(m->data);
      const HugePageBuffer& first = pw.owned_pages.front();
      EXPECT_TRUE(p >= first.data() && p < first.data() + first.size());
    }
    {
      const WeightMatrix& a = w.layers[1].mla.w_uk_t[3];
      const WeightMatrix& b = pw.layers[1].mla.w_uk_t[3];
      std::vector<float> ra(static_cast<size_t>(a.cols)), rb(ra.size());
      for (int64_t r = 0; r < a.rows; ++r) {
        a.DecodeRow(r, ra.data());
        b.DecodeRow(r, rb.data());
        ASSERT_EQ(ra, rb) << r;
      }
    }
    EXPECT_LT(MaxAbsDiff(RunLogits(*packed, ids, {}), logits), 1e-4);
  }
  // FP8 files (128 x 128 block scales): each value is F32ToBF16 of the dequantised one.
  {
    const std::string fp8_dir = testing::MakeTestModel("tiny-v3", DType::kF8E4M3);
    const auto fp8 = Model::Load(fp8_dir);
    const auto converted = Model::Load(fp8_dir, {.weights = WeightFormat::kBf16});
    const ModelWeights& a = fp8->weights();
    const ModelWeights& b = converted->weights();
    const std::string written = fp8_dir + "_written_bf16";
    WriteConvertedCheckpoint(fp8_dir, written, {.weights = WeightFormat::kBf16});
    const auto reloaded = Model::Load(written);
    EXPECT_FALSE(reloaded->config().q8_weights);
    EXPECT_EQ(reloaded->weights().layers[0].mla.o_proj.dtype, DType::kBF16);
    EXPECT_EQ(RunLogits(*reloaded, ids, {}), RunLogits(*converted, ids, {}));
    for (const auto& [from, to] :
         {std::pair{&a.layers[0].mla.o_proj, &b.layers[0].mla.o_proj},
          {&a.layers[1].moe.experts[2].down_proj, &b.layers[1].moe.experts[2].down_proj},
          {&a.layers[1].moe.shared.up_proj, &b.layers[1].moe.shared.up_proj}}) {
      ASSERT_EQ(from->dtype, DType::kF8E4M3);
      ASSERT_EQ(to->dtype, DType::kBF16);
      std::vector<float> row(static_cast<size_t>(from->cols));
      int64_t mismatches = 0;
      for (int64_t r = 0; r < from->rows; ++r) {
        from->DecodeRow(r, row.data());
        const auto* got = static_cast<const uint16_t*>(to->data) + r * to->cols;
        for (int64_t c = 0; c < from->cols; ++c)
          mismatches += got[c] != F32ToBF16(row[static_cast<size_t>(c)]) ? 1 : 0;
      }
      EXPECT_EQ(mismatches, 0);
    }
  }
  // bf16 files: nothing converted, nothing copied.
  const auto bf16 = Model::Load(testing::MakeTestModel("tiny-v3", DType::kBF16),
                                {.weights = WeightFormat::kBf16});
  EXPECT_TRUE(bf16->weights().owned_pages.empty());
  EXPECT_EQ(bf16->weights().lm_head.dtype, DType::kBF16);
  // Q8 files: refused, naming the option.
  const std::string dir = testing::MakeTestModel("tiny-v3");
  const auto int8 = Model::Load(dir, {.weights = WeightFormat::kInt8});
  const std::string q8_dir = dir + "_q8_for_bf16";
  WriteConvertedCheckpoint(dir, q8_dir);
  try {
    Model::Load(q8_dir, {.weights = WeightFormat::kBf16});
    ADD_FAILURE() << "a Q8 checkpoint loaded with --weights bf16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--weights bf16"), std::string::npos) << e.what();
  }
}

TEST(ModelTest, Int8WeightsStayCloseToF32AndQuantizedFilesLoadIdentically) {
  // Closeness on a dense model (MoE routing flips make single positions of the random MoE presets
  // jump): measured on tiny-llama-gqa, 16 positions, logits up to ~4.
  {
    const std::string dir = testing::MakeTestModel("tiny-llama-gqa");
    const auto ids = TestIds(16);
    const auto f32 = RunLogits(*Model::Load(dir), ids, {});
    const auto int8 = RunLogits(*Model::Load(dir, {.weights = WeightFormat::kInt8}), ids, {});
    const DiffStats stats = Compare(f32, int8, 512);
    const int same_argmax = SameArgmax(f32, int8, 512);
    std::printf(
        "int8 vs f32 weights (tiny-llama-gqa): mean %.4f median max %.4f, argmax equal %d/16\n",
        stats.mean, stats.median_max, same_argmax);
    EXPECT_GT(stats.mean, 0.0);
    EXPECT_LT(stats.mean, 0.03);
    EXPECT_GE(same_argmax, 15);
  }
  // `mlarun quantize` output loads to bitwise the same logits, and every ISA agrees closely.
  const std::string dir = testing::MakeTestModel("tiny-v3");
  const auto ids = TestIds(16);
  const auto int8_model = Model::Load(dir, {.weights = WeightFormat::kInt8});
  const auto int8 = RunLogits(*int8_model, ids, {});
  // Matrices quantised at load live in the huge-page chunks, not on the heap.
  const ModelWeights& w8 = int8_model->weights();
  for (const void* data :
       {w8.lm_head.data, w8.layers[0].mla.o_proj.data, w8.layers[0].mla.w_uk_t[0].data}) {
    const auto* p = static_cast<const uint8_t*>(data);
    EXPECT_TRUE(std::any_of(w8.q8_pages.begin(), w8.q8_pages.end(), [&](const HugePageBuffer& b) {
      return p >= b.data() && p < b.data() + b.size();
    }));
  }
  // Packed (mapped in place) and row-major (packed at load) files alike.
  const std::string q8_dir = dir + "_q8";
  WriteConvertedCheckpoint(dir, q8_dir);
  const auto packed = Model::Load(q8_dir);
  EXPECT_TRUE(packed->config().q8_packed);
  EXPECT_EQ(RunLogits(*packed, ids, {}), int8);
  const std::string row_major_dir = dir + "_q8_row_major";
  WriteConvertedCheckpoint(dir, row_major_dir, {.layout = Q8Layout::kRowMajor});
  const auto row_major = Model::Load(row_major_dir);
  EXPECT_FALSE(row_major->config().q8_packed);
  EXPECT_EQ(RunLogits(*row_major, ids, {}), int8);
  // The packed file maps the weights in place: fewer packed copies than the row-major one (whose
  // matrices are all packed at load; the packed model packs only the derived W_uk^T).
  EXPECT_GT(packed->weights().q8_bytes, 0u);
  EXPECT_LT(packed->weights().q8_bytes, row_major->weights().q8_bytes / 2);
  // Every ISA's int8 kernels agree closely. On the absorbed path: the rounding tables' bf16
  // prefill attention (FastIsaBf16PrefillAttentionStaysCloseToF32) would add its own error, and
  // one routing flip of this MoE model moves a position's logits by ~2.
  const auto int8_absorbed = RunLogits(*int8_model, ids, {.path = MlaPath::kAbsorbed});
  for (Isa isa : SupportedIsas()) {
    EXPECT_LT(MaxAbsDiff(RunLogits(*int8_model, ids, {.path = MlaPath::kAbsorbed, .isa = isa}),
                         int8_absorbed),
              1e-3)
        << IsaName(isa);
    // Quantised at load by this ISA's kernels: the same bytes, so bitwise the same logits.
    const auto by_isa =
        Model::Load(dir, {.weights = WeightFormat::kInt8, .kernels = &GetKernelTable(isa)});
    EXPECT_EQ(RunLogits(*by_isa, ids, {}), int8) << IsaName(isa);
  }
}

TEST(ModelTest, ShardedCheckpointEqualsSingleFile) {
  const auto ids = TestIds(12);
  const auto single = RunLogits(*Model::Load(testing::MakeTestModel("tiny-v2")), ids, {});
  const auto sharded =
      RunLogits(*Model::Load(testing::MakeTestModel("tiny-v2", DType::kF32, 200000)), ids, {});
  EXPECT_EQ(single, sharded);
}

TEST(ModelTest, Int8KvCacheStaysCloseToBf16) {
  // Measured on tiny-v3, 40 tokens decoded one by one (logits up to ~4): mean |diff| 0.021,
  // median per-position max |diff| 0.030, as with the RoPE part in bf16 (with its 8 values in one
  // int8 group instead of two: 0.053 and 0.054); a routing flip can move single positions by ~1.
  const auto model = Model::Load(testing::MakeTestModel("tiny-v3"));
  const auto ids = TestIds(40);
  const auto bf16 = RunLogits(*model, ids, {.chunk = 1, .kv_dtype = DType::kBF16});
  const auto int8 = RunLogits(*model, ids, {.chunk = 1, .kv_dtype = DType::kI8});
  const DiffStats stats = Compare(bf16, int8, model->config().vocab_size);
  std::printf("int8 vs bf16 KV: mean %.4f median max %.4f\n", stats.mean, stats.median_max);
  EXPECT_GT(stats.mean, 0.0);
  EXPECT_LT(stats.mean, 0.05);
  EXPECT_LT(stats.median_max, 0.1);
}

// The AVX512-BF16 table where the CPU has it (whether or not FastestIsa picks it), else the best
// exact one.
Isa Bf16DotIsa() { return IsaSupported(Isa::kAvx512Bf16) ? Isa::kAvx512Bf16 : BestIsa(); }

TEST(ModelTest, FastIsaBf16PrefillAttentionStaysCloseToF32) {
  // `--isa fast` runs the naive prefill attention as bf16 GEMMs (K, V, queries and probabilities
  // rounded to bf16). f32 weights, so only the attention differs from the exact tables. 1,201
  // tokens in chunks of 400: several query tiles, odd context lengths, depths over one panel,
  // contexts expanded in one, two and three pieces of 512 positions (the last one odd).
  const Isa fast = Bf16DotIsa();
  if (GetKernelTable(fast).gemm_bf16_pairs == nullptr) GTEST_SKIP() << "no bf16 GEMM here";
  const auto model = Model::Load(testing::MakeTestModel("tiny-v2-lite"));
  const auto ids = TestIds(1201);
  const int64_t vocab = model->config().vocab_size;
  const auto exact = RunLogits(*model, ids, {.chunk = 400, .path = MlaPath::kNaive});
  const auto rounded = RunLogits(*model, ids, {.chunk = 400, .path = MlaPath::kNaive, .isa = fast});
  ExpectClose("bf16 vs f32 prefill attention", exact, rounded, vocab,
              {.mean = 0.01, .median_max = 0.05});
  // Each tile is one thread's work: the thread count does not change the result.
  EXPECT_EQ(
      RunLogits(*model, ids, {.chunk = 400, .path = MlaPath::kNaive, .threads = 1, .isa = fast}),
      rounded);
}

// An odd qk_nope_head_dim (15; no preset has one): the prefill's layouts gather each block of
// positions as [nope ; rope] before pairing (a pair straddles the two parts), and the RoPE part
// starts at an odd offset. The naive path, with its context expanded in pieces of 512, against
// the absorbed one on the exact tables, and the bf16 tiles against the exact naive path.
TEST(ModelTest, OddNopeHeadDimNaivePrefillMatchesAbsorbedAndBf16StaysClose) {
  const std::string dir = ::testing::TempDir() + "/mlarun_odd_nope_" + std::to_string(::getpid());
  WriteSyntheticModel({.preset = "tiny-v2-lite", .config_patch = R"({"qk_nope_head_dim": 15})"},
                      dir);
  {
    const auto model = Model::Load(dir);
    ASSERT_EQ(model->config().qk_nope_head_dim, 15);
    const auto ids = TestIds(1100);
    const int64_t vocab = model->config().vocab_size;
    const auto naive = RunLogits(*model, ids, {.chunk = 550, .path = MlaPath::kNaive});
    EXPECT_LT(MaxAbsDiff(naive, RunLogits(*model, ids, {.chunk = 550, .path = MlaPath::kAbsorbed})),
              1e-5);
    const Isa fast = Bf16DotIsa();
    if (GetKernelTable(fast).gemm_bf16_pairs != nullptr) {
      ExpectClose("odd nope, bf16 vs f32 prefill attention", naive,
                  RunLogits(*model, ids, {.chunk = 550, .path = MlaPath::kNaive, .isa = fast}),
                  vocab, {.mean = 0.01, .median_max = 0.05});
    }
  }
  std::filesystem::remove_all(dir);
}

// The same through the AMX pair GEMM's blocking on any CPU: this CPU's best table with the
// GEMM on the tile model (so the bf16 tiled attention runs here even without AVX512-BF16).
TEST(ModelTest, AmxTilePrefillAttentionOnTheTileModelStaysCloseToF32) {
  KernelTable table = GetKernelTable(BestIsa());
  if (table.round_to_bf16 == nullptr) {  // the kernel's definition (kernel_table.h)
    table.round_to_bf16 = [](const float* x, int64_t n, uint16_t* out) {
      for (int64_t i = 0; i < n; ++i) out[i] = F32ToBF16(x[i]);
    };
  }
  // gemm_bf16_pairs as the AMX table runs it, on the software model of the tiles.
  table.gemm_bf16_pairs = amx::GemmBf16PairsOn<test::EmulatedTiles>;
  const auto model = Model::Load(testing::MakeTestModel("tiny-v2-lite"));
  const auto ids = TestIds(301);
  const auto exact = RunLogits(*model, ids, {.chunk = 150, .path = MlaPath::kNaive});
  const auto rounded =
      RunLogits(*model, ids, {.chunk = 150, .path = MlaPath::kNaive, .table = &table});
  ExpectClose("bf16 (AMX tile model) vs f32 prefill attention", exact, rounded,
              model->config().vocab_size, {.mean = 0.01, .median_max = 0.05});
  EXPECT_EQ(RunLogits(*model, ids,
                      {.chunk = 150, .path = MlaPath::kNaive, .threads = 1, .table = &table}),
            rounded);
}

// Loads `dir` with pack_16bit: its 16-bit matrices are copied into 16-row groups of column pairs
// (packed_bf16.h), but not the embedding table, which is read by row.
std::unique_ptr<Model> LoadPacked(const std::string& dir) {
  auto packed = Model::Load(dir, {.pack_16bit = true});
  const LayerWeights& layer = packed->weights().layers[1];
  EXPECT_EQ(layer.mla.kv_b_proj.layout16, Layout16::kPacked16);
  EXPECT_EQ(layer.moe.experts[0].down_proj.layout16, Layout16::kPacked16);
  EXPECT_EQ(packed->weights().lm_head.layout16, Layout16::kPacked16);
  EXPECT_EQ(packed->weights().embed_tokens.layout16, Layout16::kRowMajor);
  return packed;
}

// The exact tables read packed rows in float32 (decoded per row, or widened in registers where
// packed_bf16_fastest): the row-major model's logits up to float32 rounding, and whatever the
// thread count or the batch (whole prefill chunks of 8 against one token at a time).
void ExpectPackedMatchesRowMajor(const Model& packed, const Model& row_major,
                                 const std::vector<int32_t>& ids, Isa isa) {
  SCOPED_TRACE(IsaName(isa));
  const auto exact_packed = RunLogits(packed, ids, {.chunk = 8, .isa = isa});
  EXPECT_LT(MaxAbsDiff(exact_packed, RunLogits(row_major, ids, {.chunk = 8, .isa = isa})), 1e-4);
  EXPECT_EQ(RunLogits(packed, ids, {.chunk = 8, .threads = 1, .isa = isa}), exact_packed);
  EXPECT_LT(MaxAbsDiff(RunLogits(packed, ids, {.chunk = 1, .isa = isa}), exact_packed), 1e-5);
}

TEST(ModelTest, PackedBf16WeightsMatchRowMajor) {
  const std::string dir = testing::MakeTestModel("tiny-v3", DType::kBF16);
  const auto row_major = Model::Load(dir);
  const auto packed = LoadPacked(dir);
  const auto ids = TestIds(40);
  ExpectPackedMatchesRowMajor(*packed, *row_major, ids, BestIsa());
  const Isa fast = Bf16DotIsa();
  if (GetKernelTable(fast).matmul_rows_bf16 == nullptr) GTEST_SKIP() << "no bf16 kernels here";
  // The AVX512-BF16 kernels: products of bf16 values are exact in float32, so only the order of
  // the sums differs (one chain of pair products per output instead of 16 lane sums). But these
  // tables round every matmul's input to bf16, and a float32-rounding difference moves a value
  // that lies near a bf16 rounding boundary by a whole bf16 step (2^-8 relative): a few such
  // flips per run are expected (~40k values rounded, each flipping with odds ~2^-16), and each
  // reaches the later positions through the cache. Measured on the Zen 5 VM: mean 1.2e-3, median
  // max 2.0e-3, 21 of 40 positions past the first flip; a wiring error (a layout read wrongly)
  // moves every position by ~0.1 or more. And they do not depend on the thread count.
  const auto fast_packed = RunLogits(*packed, ids, {.chunk = 8, .isa = fast});
  const auto fast_row_major = RunLogits(*row_major, ids, {.chunk = 8, .isa = fast});
  ExpectClose("packed vs row-major bf16 (fast kernels)", fast_packed, fast_row_major,
              packed->config().vocab_size,
              {.mean = 5e-3, .median_max = 0.02, .min_same_argmax = 38});
  EXPECT_EQ(RunLogits(*packed, ids, {.chunk = 8, .threads = 1, .isa = fast}), fast_packed);
}

TEST(ModelTest, PackedF16WeightsMatchRowMajor) {
  // f16 matrices are packed too (each column pair of a 16-row group as two runs of 16 halves,
  // widened by F16C in the SIMD tables, decoded per row by the scalar one).
  const std::string dir = testing::MakeTestModel("tiny-v3", DType::kF16);
  const auto row_major = Model::Load(dir);
  const auto packed = LoadPacked(dir);
  const auto ids = TestIds(40);
  for (const Isa isa : {Isa::kScalar, BestIsa()}) {
    ExpectPackedMatchesRowMajor(*packed, *row_major, ids, isa);
  }
}

TEST(ModelTest, FastIsaFp8WeightsStayCloseToExact) {
  // An FP8 checkpoint (128 x 128 block scales) on the AVX512-BF16 table: its FP8 products round
  // each activation to bf16 after the block scale (matmul_rows_f8_bf16) where the exact tables
  // round the scaled weight to float32, and the other bf16-input kernels of that table do their
  // part (attention). Measured on the Zen 5 VM: mean 1.3e-2, median max 3.3e-2 (the bf16
  // checkpoint of the same model on the same two tables: 2.5e-2 and 2.8e-2; the f32 one, where
  // only the attention differs, 1.8e-3 and 6.3e-3), argmax the same at 38+ of 40 positions; a
  // wrong scale or widening moves the logits by ~0.1 or more. Not thread-dependent.
  const Isa fast = Bf16DotIsa();
  if (GetKernelTable(fast).matmul_rows_f8_bf16 == nullptr) GTEST_SKIP() << "no FP8 bf16 kernel";
  const auto model = Model::Load(testing::MakeTestModel("tiny-v3", DType::kF8E4M3));
  const auto ids = TestIds(40);
  const auto exact = RunLogits(*model, ids, {.chunk = 8});
  const auto rounded = RunLogits(*model, ids, {.chunk = 8, .isa = fast});
  ExpectClose("fp8 fast vs exact", exact, rounded, model->config().vocab_size,
              {.mean = 0.03, .median_max = 0.08, .min_same_argmax = 38});
  EXPECT_EQ(RunLogits(*model, ids, {.chunk = 8, .threads = 1, .isa = fast}), rounded);
}

TEST(ModelTest, PackedFp8WeightsMatchRowMajor) {
  // A copying load for a table with the packed FP8 kernel packs FP8 matrices (16-row groups of
  // column pairs, packed_bf16.h), and the checkpoint's bf16 ones (the lm_head) as usual. The
  // exact tables decode packed FP8 rows to the same float32 values: the scalar table's logits are
  // bitwise the row-major model's, the SIMD ones' differ by the packed bf16 matrices' float32
  // rounding (ExpectPackedMatchesRowMajor). The packed kernel rounds x to bf16 before the block
  // scales where the row-major one rounds 256 s x: against the exact logits both stay as close
  // as FastIsaFp8WeightsStayCloseToExact asks. Measured on the Zen 5 VM: mean 1.6e-2, median max
  // 3.8e-2 (row-major 1.3e-2 and 3.3e-2); a byte read from the wrong place moves every position
  // by ~0.1 or more. Not thread-dependent.
  const Isa fast = Bf16DotIsa();
  if (GetKernelTable(fast).matmul_rows_f8_packed == nullptr) GTEST_SKIP() << "no packed FP8 kernel";
  const std::string dir = testing::MakeTestModel("tiny-v3", DType::kF8E4M3);
  const auto row_major = Model::Load(dir);
  const auto packed = Model::Load(
      dir, {.file_load = FileLoad::kCopy, .pack_16bit = true, .kernels = &GetKernelTable(fast)});
  for (const WeightMatrix* m : {&packed->weights().layers[1].mla.kv_b_proj,
                                &packed->weights().layers[1].moe.experts[0].down_proj,
                                &packed->weights().layers[0].mlp.gate_proj}) {
    EXPECT_EQ(m->dtype, DType::kF8E4M3);
    EXPECT_EQ(m->layout16, Layout16::kPacked16);
  }
  const auto ids = TestIds(40);
  const auto exact = RunLogits(*row_major, ids, {.chunk = 8, .isa = Isa::kScalar});
  EXPECT_EQ(RunLogits(*packed, ids, {.chunk = 8, .isa = Isa::kScalar}), exact);
  ExpectPackedMatchesRowMajor(*packed, *row_major, ids, BestIsa());
  const auto fast_packed = RunLogits(*packed, ids, {.chunk = 8, .isa = fast});
  ExpectClose("packed fp8 fast vs exact", exact, fast_packed, packed->config().vocab_size,
              {.mean = 0.03, .median_max = 0.08, .min_same_argmax = 38});
  EXPECT_EQ(RunLogits(*packed, ids, {.chunk = 8, .threads = 1, .isa = fast}), fast_packed);
}

TEST(ModelTest, Int8QuantisationReportsEachReplacedMatrixButATiedEmbedding) {
  // Model::Load releases the mapped pages QuantizeWeightsQ8 reports: exactly the quantised
  // matrices' former bytes, never the embedding table a tied lm_head shares (still read).
  for (const char* preset : {"tiny-v3", "tiny-qwen2"}) {
    const std::string dir = testing::MakeTestModel(preset);
    const ModelConfig config = LoadModelConfig(dir);
    const SafetensorsArchive archive = SafetensorsArchive::Open(dir);
    ModelWeights weights;
    LoadWeights(config, archive, dir, weights);
    std::set<std::pair<const void*, size_t>> expected;
    ForEachTensor(config, weights, [&](const TensorSlot& slot) {
      if (slot.matrix != nullptr && !KeepsLoadedDtype(slot.name)) {
        const WeightMatrix& m = *slot.matrix;
        expected.emplace(m.data, static_cast<size_t>(m.rows * m.cols) * DTypeSize(m.dtype));
      }
    });
    const void* embedding = weights.embed_tokens.data;
    EXPECT_EQ(weights.lm_head.data == embedding, config.tie_word_embeddings) << preset;
    std::set<std::pair<const void*, size_t>> reported;
    ThreadPool pool(2);
    QuantizeWeightsQ8(pool, GetKernelTable(Isa::kScalar), config, weights,
                      [&](const void* data, size_t bytes) {
                        EXPECT_TRUE(reported.emplace(data, bytes).second) << preset;
                      });
    EXPECT_EQ(reported, expected) << preset;
    EXPECT_EQ(weights.lm_head.dtype, DType::kI8) << preset;
    EXPECT_EQ(weights.embed_tokens.data, embedding) << preset;
  }
}

TEST(ModelTest, CopyLoadPutsEveryStreamedMatrixInHugePageCopies) {
  // With --load copy and packing the files are mapped; the matrices that are not packed (here
  // all: f32 weights) are copied as they are, so the logits are bitwise those of a mapped load.
  const std::string dir = testing::MakeTestModel("tiny-v3", DType::kF32);
  const auto mapped = Model::Load(dir);
  const auto copied = Model::Load(dir, {.file_load = FileLoad::kCopy, .pack_16bit = true});
  const ModelWeights& w = copied->weights();
  auto in_copies = [&](const WeightMatrix& m) {
    const auto* p = static_cast<const uint8_t*>(m.data);
    for (const HugePageBuffer& b : w.owned_pages) {
      if (p >= b.data() && p < b.data() + b.size()) return true;
    }
    return false;
  };
  EXPECT_TRUE(in_copies(w.layers[1].mla.kv_b_proj));
  EXPECT_TRUE(in_copies(w.layers[1].moe.experts[0].down_proj));
  EXPECT_TRUE(in_copies(w.layers[0].mlp.up_proj));
  EXPECT_TRUE(in_copies(w.lm_head));
  EXPECT_FALSE(in_copies(w.embed_tokens));
  const auto ids = TestIds(20);
  EXPECT_EQ(RunLogits(*copied, ids, {.chunk = 8}), RunLogits(*mapped, ids, {.chunk = 8}));
}

}  // namespace
}  // namespace mlarun

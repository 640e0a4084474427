// kv-report arithmetic on the published configs.
#include "model/kv_report.h"

#include <gtest/gtest.h>

#include "core/mapped_file.h"

namespace mlarun {
namespace {

ModelConfig Load(const std::string& name) {
  const std::string path = "tests/testdata/configs/" + name;
  return ParseModelConfig(ReadFileToString(path), path);
}

const KvReportRow& Row(const std::vector<KvReportRow>& rows, const std::string& name) {
  for (const KvReportRow& r : rows) {
    if (r.name == name) return r;
  }
  static KvReportRow missing;
  ADD_FAILURE() << "no row " << name;
  return missing;
}

TEST(KvReportTest, DeepseekV2LiteBf16) {
  const auto rows = BuildKvReport(Load("deepseek-v2-lite.config.json"), {.context = 1000});
  EXPECT_EQ(rows[0].name, "model");
  EXPECT_EQ(rows[0].bytes_per_token, 31104);  // (512 + 64) * 2 bytes * 27 layers
  EXPECT_EQ(Row(rows, "MLA").bytes_per_token, 31104);
  EXPECT_EQ(Row(rows, "MHA").bytes_per_token, 276480);  // 16 * (192 + 128) * 2 * 27
  EXPECT_EQ(Row(rows, "GQA-4").bytes_per_token, 276480 / 4);
  EXPECT_EQ(Row(rows, "MQA").bytes_per_token, 276480 / 16);
  // int8 latent row: 512 int8 + 4 f32 group scales + 64 int8 RoPE values + their 2 f32 scales.
  EXPECT_EQ(Row(rows, "MLA+int8").bytes_per_token, (512 + 4 * 4 + 64 + 2 * 4) * 27);
  EXPECT_EQ(Row(rows, "MLA+int8").bytes_per_token, 600 * 27);
  EXPECT_EQ(Row(rows, "MHA").total_bytes, 276480LL * 1000);
}

TEST(KvReportTest, PolicyRowUsesThePolicyFormula) {
  const ModelConfig c = Load("deepseek-v3.config.json");
  const auto rows = BuildKvReport(
      c,
      {.context = 100000, .policy = ParseKvPolicy("window:4096,sinks:4"), .kv_dtype = DType::kI8});
  EXPECT_EQ(rows[0].bytes_per_token, 600 * 61);
  EXPECT_EQ(rows[0].rows_held, 4100);
  EXPECT_EQ(rows[0].total_bytes, 600LL * 61 * 4100);
  // int8 per-head rows: 128 * (192 + 128) values + one f32 scale per 128 values.
  EXPECT_EQ(Row(rows, "MHA").bytes_per_token, (128LL * (192 + 128) + 4 * 320) * 61);
  // With an int8 cache the MLA comparison row appears once.
  int mla_int8_rows = 0;
  for (const KvReportRow& r : rows) mla_int8_rows += r.name == "MLA+int8" ? 1 : 0;
  EXPECT_EQ(mla_int8_rows, 1);
}

TEST(KvReportTest, PolicyRowsHeldHandComputed) {
  EXPECT_EQ(PolicyRowsHeld({}, 0, 123), 123);
  EXPECT_EQ(PolicyRowsHeld(ParseKvPolicy("window:10,sinks:2"), 10, 5), 5);
  EXPECT_EQ(PolicyRowsHeld(ParseKvPolicy("window:10,sinks:2"), 10, 500), 12);
  // m = 100 - 2 - 10 = 88 out-of-window tokens: 22 summaries of 4, 0 pending.
  EXPECT_EQ(PolicyRowsHeld(ParseKvPolicy("window:10,sinks:2,compress:4"), 10, 100), 12 + 22);
  // m = 89: 22 summaries + 1 pending raw token.
  EXPECT_EQ(PolicyRowsHeld(ParseKvPolicy("window:10,sinks:2,compress:4"), 10, 101), 12 + 23);
}

}  // namespace
}  // namespace mlarun

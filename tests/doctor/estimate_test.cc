// hvrun estimate-memory against hand-computed values (docs/gpu-facts.md's BERT-large check).
#include <gtest/gtest.h>

#include <sstream>

#include "launcher/estimate/byte_size.h"
#include "launcher/estimate/estimate_command.h"
#include "launcher/estimate/memory_model.h"
#include "launcher/estimate/model_presets.h"

namespace hvrun::estimate {
namespace {

double line(const MemoryEstimate& e, const std::string& name) {
  for (const MemoryLine& l : e.lines)
    if (l.component == name) return l.bytes;
  ADD_FAILURE() << "no line " << name;
  return -1;
}

TrainingSetup bert_large(Precision p, int batch = 32) {
  TrainingSetup s;
  s.model = *find_preset("bert-large");
  s.batch_per_gpu = batch;
  s.precision = p;
  s.optimizer = Optimizer::kAdam;
  return s;
}

constexpr double kBertLargeParams = 335141888;  // 335 M, not 300 M
constexpr double kSbh = 512.0 * 32 * 1024;      // s·b·h at seq 512, batch 32
constexpr double kAs2b = 16.0 * 512 * 512 * 32; // a·s²·b

TEST(MemoryModel, BytesPerParameterFollowTheZeroPaper) {
  auto total = [](Precision p, Optimizer o) {
    BytesPerParam b = bytes_per_param(p, o);
    return b.weights + b.gradients + b.optimizer;
  };
  EXPECT_EQ(total(Precision::kMixed, Optimizer::kAdam), 16);   // 2 + 2 + 12
  EXPECT_EQ(total(Precision::kFp32, Optimizer::kAdam), 16);    // 4 + 4 + 8
  EXPECT_EQ(total(Precision::kFp32, Optimizer::kMomentum), 12);
  EXPECT_EQ(total(Precision::kFp32, Optimizer::kSgd), 8);
  EXPECT_EQ(bytes_per_param(Precision::kMixed, Optimizer::kAdam).optimizer, 12);
}

TEST(MemoryModel, BertLargeFp32MatchesTheHandComputation) {
  auto e = estimate_memory(bert_large(Precision::kFp32));
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_DOUBLE_EQ(line(*e, "weights"), kBertLargeParams * 4);  // 1.34 GB
  EXPECT_NEAR(line(*e, "weights") / 1e9, 1.34, 0.005);
  double states = line(*e, "weights") + line(*e, "gradients") + line(*e, "optimizer state");
  EXPECT_DOUBLE_EQ(states, kBertLargeParams * 16);  // 5.4 GB
  EXPECT_NEAR(states / 1e9, 5.36, 0.005);
  const double activations = 24 * (66 * kSbh + 9 * kAs2b);
  EXPECT_DOUBLE_EQ(line(*e, "activations"), activations);
  EXPECT_NEAR(activations / 1e9, 55.6, 0.05);
  EXPECT_NEAR((states + activations) / 1e9, 61, 0.1);  // "about 61 GB, far over 16 GB"
  EXPECT_DOUBLE_EQ(line(*e, "logits"), 32.0 * 512 * 30522 * 4);
  EXPECT_EQ(line(*e, "NCCL buffers"), 0);  // one GPU
  const double tensors = states + activations + line(*e, "logits");
  EXPECT_DOUBLE_EQ(line(*e, "allocator slack"), 0.15 * tensors);
  EXPECT_DOUBLE_EQ(e->total_bytes, tensors * 1.15 + 500e6);
}

TEST(MemoryModel, BertLargeMixedPrecision) {
  auto e = estimate_memory(bert_large(Precision::kMixed));
  ASSERT_TRUE(e.is_ok());
  EXPECT_DOUBLE_EQ(line(*e, "weights"), kBertLargeParams * 2);
  EXPECT_DOUBLE_EQ(line(*e, "optimizer state"), kBertLargeParams * 12);
  EXPECT_DOUBLE_EQ(line(*e, "activations"), 24 * (34 * kSbh + 5 * kAs2b));
  EXPECT_NEAR(line(*e, "activations") / 1e9, 29.8, 0.05);
  EXPECT_DOUBLE_EQ(line(*e, "logits"), 32.0 * 512 * 30522 * 2);
}

TEST(MemoryModel, FlashAttentionSelectiveAndFullRecomputation) {
  TrainingSetup s = bert_large(Precision::kMixed);
  s.attention = Attention::kFlash;
  EXPECT_DOUBLE_EQ(line(*estimate_memory(s), "activations"), 24 * 34 * kSbh);
  s.attention = Attention::kMaterialised;
  s.recompute = Recompute::kSelective;
  EXPECT_DOUBLE_EQ(line(*estimate_memory(s), "activations"), 24 * 34 * kSbh);
  s.recompute = Recompute::kFull;  // 2·s·b·h per layer kept + one layer rebuilt at a time
  EXPECT_DOUBLE_EQ(line(*estimate_memory(s), "activations"),
                   24 * 2 * kSbh + (34 * kSbh + 5 * kAs2b));
  s.precision = Precision::kFp32;
  EXPECT_DOUBLE_EQ(line(*estimate_memory(s), "activations"),
                   24 * 4 * kSbh + (66 * kSbh + 9 * kAs2b));
}

TEST(MemoryModel, ZeroStagesPartitionOverTheDataParallelRanks) {
  TrainingSetup s = bert_large(Precision::kMixed);
  s.gpus = 4;
  const double p = kBertLargeParams;
  s.zero_stage = 1;
  auto e = *estimate_memory(s);
  EXPECT_DOUBLE_EQ(line(e, "optimizer state"), p * 12 / 4);
  EXPECT_DOUBLE_EQ(line(e, "gradients"), p * 2);
  s.zero_stage = 2;
  e = *estimate_memory(s);
  EXPECT_DOUBLE_EQ(line(e, "gradients"), p * 2 / 4);
  EXPECT_DOUBLE_EQ(line(e, "weights"), p * 2);
  s.zero_stage = 3;
  e = *estimate_memory(s);
  EXPECT_DOUBLE_EQ(line(e, "weights"), p * 2 / 4);
  EXPECT_EQ(e.data_parallel, 4);
  EXPECT_DOUBLE_EQ(line(e, "NCCL buffers"), 256.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(line(e, "fusion buffer"), 128.0 * 1024 * 1024);
}

TEST(MemoryModel, TensorParallelismSplitsStatesAndActivations) {
  TrainingSetup s = bert_large(Precision::kMixed);
  s.gpus = 4;
  s.tensor_parallel = 2;
  s.zero_stage = 1;
  auto e = *estimate_memory(s);
  EXPECT_EQ(e.data_parallel, 2);
  EXPECT_DOUBLE_EQ(line(e, "weights"), kBertLargeParams / 2 * 2);
  EXPECT_DOUBLE_EQ(line(e, "optimizer state"), kBertLargeParams / 2 * 12 / 2);
  EXPECT_DOUBLE_EQ(line(e, "activations"), 24 * (34 * kSbh + 5 * kAs2b) / 2);
  s.tensor_parallel = 3;
  EXPECT_FALSE(estimate_memory(s).is_ok());  // 3 does not divide 4
}

TEST(MemoryModel, UserPerSampleActivationsAndLargestBatch) {
  TrainingSetup s;
  s.model.params = 1e9;  // fp32 Adam: 16 GB of model states
  s.activation_bytes_per_sample = 1e9;
  s.cuda_context_bytes = 0;
  s.allocator_slack = 0;
  s.batch_per_gpu = 3;
  auto e = estimate_memory(s);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_DOUBLE_EQ(line(*e, "activations"), 3e9);
  EXPECT_DOUBLE_EQ(e->total_bytes, 19e9);
  EXPECT_EQ(*largest_batch_that_fits(s, 24e9), 8);      // 16 + 8 = 24 fits exactly
  EXPECT_EQ(*largest_batch_that_fits(s, 24e9 - 1), 7);
  EXPECT_EQ(*largest_batch_that_fits(s, 16.5e9), 0);    // not even one sample
  EXPECT_EQ(*largest_batch_that_fits(s, 1e15), 999984);
}

TEST(MemoryModel, MissingShapeIsAnErrorThatSaysWhatToGive) {
  TrainingSetup s;
  s.model.params = 3e8;
  auto e = estimate_memory(s);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("--activation-per-sample"), std::string::npos);
}

TEST(ByteSize, ParsesCountsAndSizes) {
  EXPECT_DOUBLE_EQ(*parse_count("335M"), 335e6);
  EXPECT_DOUBLE_EQ(*parse_count("7B"), 7e9);
  EXPECT_DOUBLE_EQ(*parse_count("1.5k"), 1500);
  EXPECT_DOUBLE_EQ(*parse_bytes("24GB"), 24e9);
  EXPECT_DOUBLE_EQ(*parse_bytes("24GiB"), 24.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(*parse_bytes("512 MiB"), 512.0 * (1 << 20));
  EXPECT_FALSE(parse_bytes("24XB").is_ok());
  EXPECT_FALSE(parse_count("lots").is_ok());
  EXPECT_EQ(format_bytes(1340567552), "1.34 GB");
  EXPECT_EQ(format_count(kBertLargeParams), "335.1 M");
}

TEST(EstimateCommand, FreeParametersOfTheIssue) {
  auto r = parse_estimate_args({"--params", "300M", "--layers", "24", "--hidden", "1024", "--heads",
                                "16", "--seq", "512", "--batch", "32", "--precision", "fp32",
                                "--optimizer", "adam", "--gpus", "2"});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->setup.model.params, 300e6);
  EXPECT_EQ(r->setup.model.layers, 24);
  EXPECT_EQ(r->setup.gpus, 2);
  EXPECT_EQ(r->setup.batch_per_gpu, 32);
  EXPECT_EQ(r->setup.precision, Precision::kFp32);
  // Shape without --params: 12·L·h² + V·h.
  r = parse_estimate_args({"--layers", "24", "--hidden", "1024", "--vocab", "30522"});
  ASSERT_TRUE(r.is_ok());
  EXPECT_DOUBLE_EQ(r->setup.model.params, 12.0 * 24 * 1024 * 1024 + 30522.0 * 1024);
}

TEST(EstimateCommand, BadInputNamesTheOption) {
  auto r = parse_estimate_args({"--model", "bert-huge"});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("bert-large"), std::string::npos);  // lists the presets
  r = parse_estimate_args({"--precision", "fp8"});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("accepted values are"), std::string::npos);
  EXPECT_FALSE(parse_estimate_args({"--zero", "4"}).is_ok());
  EXPECT_FALSE(parse_estimate_args({"--batch"}).is_ok());
  std::ostringstream out, err;
  EXPECT_EQ(run_estimate_memory({"--bogus"}, out, err), 2);
  EXPECT_NE(err.str().find("unknown option '--bogus'"), std::string::npos);
}

TEST(EstimateCommand, TableAndLargestBatch) {
  std::ostringstream out, err;
  int code = run_estimate_memory({"--model", "bert-large", "--batch", "32", "--gpu-memory", "16GB"},
                                 out, err);
  EXPECT_EQ(code, 0) << err.str();
  const std::string text = out.str();
  EXPECT_NE(text.find("55.57 GB"), std::string::npos) << text;
  EXPECT_NE(text.find("fits in 16.00 GB: no"), std::string::npos) << text;
  EXPECT_NE(text.find("largest batch per GPU that fits in 16.00 GB:"), std::string::npos);
}

TEST(EstimateCommand, JsonHasEveryComponentAndTheAnswer) {
  std::ostringstream out, err;
  ASSERT_EQ(run_estimate_memory({"--model", "gpt2", "--precision", "bf16", "--gpu-memory", "24GiB",
                                 "--json"}, out, err), 0) << err.str();
  const std::string j = out.str();
  for (const char* key : {"\"weights\"", "\"gradients\"", "\"optimizer state\"", "\"activations\"",
                          "\"logits\"", "\"CUDA context\"", "\"NCCL buffers\"", "\"allocator slack\"",
                          "\"total_bytes\"", "\"max_batch_per_gpu\"", "\"precision\":\"mixed\""})
    EXPECT_NE(j.find(key), std::string::npos) << key << " in " << j;
}

}  // namespace
}  // namespace hvrun::estimate

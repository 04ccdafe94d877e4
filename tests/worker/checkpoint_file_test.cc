// Checkpoint files: round trip, newest-good selection, and every way a file can be unusable
// (killed mid-write, corrupt, truncated, another run / world size / state layout).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "tests/support/temp_dir.h"
#include "worker_lib/checkpoint/checkpoint_file.h"

namespace hvrun::detail {
namespace {

namespace fs = std::filesystem;

class CheckpointFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_.resize(1000);
    std::iota(weights_.begin(), weights_.end(), 0.5f);
    identity_ = {"train", 2, {{"weights", weights_.size() * sizeof(float)}, {"step", 8}}};
  }
  Result<std::string> save(int64_t step, float bias = 0) {
    for (float& w : weights_) w += bias;
    std::vector<CheckpointPayload> payloads{
        {"weights", std::as_bytes(std::span<const float>(weights_))},
        {"step", std::as_bytes(std::span<const int64_t>(&step, 1))}};
    return write_checkpoint_atomically(dir_, step, identity_, payloads);
  }

  std::optional<int64_t> newest(std::vector<std::string>* skipped = nullptr) {
    auto loaded = load_newest_checkpoint(dir_, identity_, skipped);
    EXPECT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    if (!loaded.is_ok() || !*loaded) return std::nullopt;
    return (*loaded)->step;
  }

  const test::TempDir temp_{"ckpt-test"};
  const std::string dir_ = temp_.path();
  std::vector<float> weights_;
  CheckpointIdentity identity_;
};

TEST_F(CheckpointFileTest, RoundTripsTheState) {
  auto path = save(10);
  ASSERT_TRUE(path.is_ok()) << path.status().to_string();
  EXPECT_EQ(fs::path(*path).filename(), "ckpt-000000000010.hvckpt");
  auto loaded = read_checkpoint(*path, identity_);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->step, 10);
  ASSERT_EQ(loaded->payloads.size(), 2u);
  ASSERT_EQ(loaded->payloads[0].size(), weights_.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(loaded->payloads[0].data(), weights_.data(), loaded->payloads[0].size()), 0);
  int64_t step = 0;
  std::memcpy(&step, loaded->payloads[1].data(), 8);
  EXPECT_EQ(step, 10);
}

TEST_F(CheckpointFileTest, NoDirectoryOrNoFileMeansNoCheckpoint) {
  fs::remove_all(dir_);
  EXPECT_EQ(newest(), std::nullopt);
}

TEST_F(CheckpointFileTest, PicksTheNewestAndPrunesToKeep) {
  for (int64_t s : {10, 20, 30, 40}) ASSERT_TRUE(save(s).is_ok());
  EXPECT_EQ(newest(), 40);
  ASSERT_TRUE(prune_checkpoints(dir_, 2).is_ok());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"ckpt-000000000030.hvckpt",
                                             "ckpt-000000000040.hvckpt"}));
}

TEST_F(CheckpointFileTest, AWriterKilledMidWriteLeavesNothingLoadable) {
  ASSERT_TRUE(save(10).is_ok());
  weights_.assign(4 << 20, 1.0f);  // 16 MiB: far past the file size limit below
  identity_.buffers[0].second = weights_.size() * sizeof(float);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The kernel kills this writer with SIGXFSZ once the file passes 1 MiB: a death in the
    // middle of the payload, at a point no test timing decides.
    rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    rlimit limit{1 << 20, 1 << 20};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    (void)save(20);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the writer should have been killed mid-write";
  EXPECT_EQ(WTERMSIG(status), SIGXFSZ);
  EXPECT_FALSE(fs::exists(fs::path(dir_) / checkpoint_file_name(20)));
  bool temp_left = false;
  for (const auto& e : fs::directory_iterator(dir_))
    temp_left |= e.path().filename().string().find(".tmp-") != std::string::npos;
  EXPECT_TRUE(temp_left) << "the killed writer's partial file should be there (and ignored)";
  // The partial file is never loaded: the last complete checkpoint is step 10, whose layout
  // the restarted job still has.
  identity_.buffers[0].second = 1000 * sizeof(float);
  EXPECT_EQ(newest(), 10);
  ASSERT_TRUE(prune_checkpoints(dir_, 3).is_ok());  // the dead writer's temporary goes
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST_F(CheckpointFileTest, ACorruptCheckpointFallsBackToThePreviousOne) {
  ASSERT_TRUE(save(10).is_ok());
  auto path = save(20, 1.0f);
  ASSERT_TRUE(path.is_ok());
  {
    std::fstream f(*path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    char c = 0;
    f.read(&c, 1);
    f.seekp(200);
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
  std::vector<std::string> skipped;
  EXPECT_EQ(newest(&skipped), 10);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("checksum"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[0].find("ckpt-000000000020"), std::string::npos) << skipped[0];
}

TEST_F(CheckpointFileTest, ATruncatedFileUnderTheFinalNameIsRefused) {
  ASSERT_TRUE(save(10).is_ok());
  auto path = save(20);
  ASSERT_TRUE(path.is_ok());
  fs::resize_file(*path, fs::file_size(*path) / 2);
  std::vector<std::string> skipped;
  EXPECT_EQ(newest(&skipped), 10);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("truncated"), std::string::npos) << skipped[0];
}

TEST_F(CheckpointFileTest, AnotherRunsOrWorldSizesCheckpointIsRefused) {
  ASSERT_TRUE(save(10).is_ok());
  CheckpointIdentity other_size = identity_;
  other_size.world_size = 3;
  auto r = read_checkpoint(fs::path(dir_) / checkpoint_file_name(10), other_size);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("another job"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("2 ranks"), std::string::npos) << r.status().message();

  CheckpointIdentity other_run = identity_;
  other_run.run_name = "eval";
  EXPECT_FALSE(read_checkpoint(fs::path(dir_) / checkpoint_file_name(10), other_run).is_ok());

  CheckpointIdentity other_layout = identity_;
  other_layout.buffers[0].second += 4;
  std::vector<std::string> skipped;
  auto loaded = load_newest_checkpoint(dir_, other_layout, &skipped);
  ASSERT_TRUE(loaded.is_ok());
  EXPECT_FALSE(loaded->has_value());
  EXPECT_EQ(skipped.size(), 1u);
}

TEST_F(CheckpointFileTest, FileNamesParseBack) {
  EXPECT_EQ(checkpoint_step_of(checkpoint_file_name(0)), 0);
  EXPECT_EQ(checkpoint_step_of(checkpoint_file_name(123456789)), 123456789);
  EXPECT_EQ(checkpoint_step_of("ckpt-00000000001x.hvckpt"), std::nullopt);
  EXPECT_EQ(checkpoint_step_of(".ckpt-000000000010.hvckpt.tmp-12"), std::nullopt);
  EXPECT_EQ(checkpoint_step_of("notes.txt"), std::nullopt);
}

}  // namespace
}  // namespace hvrun::detail

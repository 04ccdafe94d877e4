// The raw backend: a Gloo context bootstrapped without hvrun's coordinator, the floor that
// hvrun's stack is measured against. Ranks come from the environment hvrun sets (HVRUN_RANK,
// HVRUN_SIZE, HVRUN_DATA_ADDR); the ranks meet through a gloo::rendezvous::FileStore in a
// directory named after HVRUN_JOB_ID (one per job), removed once the mesh is connected.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace gloo {
class Context;
}

namespace hvrun::bench {

struct RawGlooOptions {
  int rank = 0;
  int size = 1;
  std::string data_address = "127.0.0.1";
  std::string store_dir;  // shared by every rank of this job, on one host
  std::chrono::milliseconds timeout{60000};
};

class RawGloo {
 public:
  // Connects the full mesh; on failure returns null and sets *error to what went wrong.
  static std::unique_ptr<RawGloo> connect(const RawGlooOptions& options, std::string* error);
  // Options from HVRUN_RANK, HVRUN_SIZE, HVRUN_DATA_ADDR and HVRUN_JOB_ID (store under
  // $TMPDIR or /tmp). Sets *error and returns false when a variable is missing.
  static bool options_from_environment(RawGlooOptions* options, std::string* error);

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Calls every rank makes in the same order, as with any Gloo context. Throw gloo's
  // exceptions on failure (a benchmark stops there).
  void allreduce_sum(float* data, size_t count);
  void allgather(const float* input, float* output, size_t count_per_rank);
  void broadcast(float* data, size_t count, int root);
  void barrier();

 private:
  RawGloo(std::shared_ptr<gloo::Context> context, int rank, int size,
          std::chrono::milliseconds timeout);
  uint32_t next_tag() { return tag_++ & 0x7fffffffu; }

  std::shared_ptr<gloo::Context> context_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  uint32_t tag_ = 1;
};

}  // namespace hvrun::bench

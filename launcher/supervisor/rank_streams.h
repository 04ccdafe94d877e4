// hvrun's side of the ranks' output: two rank-tagged streams per rank (output_mux.h) onto
// hvrun's stdout and stderr, each copied raw under --output-filename's directory
// (DIR/rank.N/stdout, DIR/rank.N/stderr), and the last stderr lines kept for the summary.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launcher/process/output_mux.h"
#include "launcher/supervisor/children.h"

namespace hvrun::launcher {

struct RankStreamsConfig {
  std::string output_dir;  // --output-filename; empty: no copies
  bool tag_output = true;
  bool timestamps = false;  // each line starts with the time it arrived
};

class RankStreams final : public RankOutput {
 public:
  // `say` reports a copy that cannot be written.
  RankStreams(RankStreamsConfig config, OutputSink& out, OutputSink& err,
              std::function<void(const std::string&)> say);

  // Opens the rank's two streams (once) and points its record at its stderr.
  void begin(WorkerRecord& record) override;
  void write(int rank, int stream, std::string_view bytes) override;
  void end(int rank, int stream) override;

 private:
  TaggedStream* find(int rank, int stream);
  int open_copy_file(int rank, const char* which);

  RankStreamsConfig config_;
  OutputSink& out_;
  OutputSink& err_;
  std::function<void(const std::string&)> say_;
  std::vector<std::array<std::unique_ptr<TaggedStream>, 2>> streams_;  // by rank
};

}  // namespace hvrun::launcher

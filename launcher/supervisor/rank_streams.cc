#include "launcher/supervisor/rank_streams.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace hvrun::launcher {
namespace {
constexpr size_t kStderrLinesKept = 10;  // for the failure summary
}  // namespace

RankStreams::RankStreams(RankStreamsConfig config, OutputSink& out, OutputSink& err,
                         std::function<void(const std::string&)> say)
    : config_(std::move(config)), out_(out), err_(err), say_(std::move(say)) {}

void RankStreams::begin(WorkerRecord& record) {
  if (record.rank < 0) return;
  const size_t rank = static_cast<size_t>(record.rank);
  if (streams_.size() <= rank) streams_.resize(rank + 1);
  auto& pair = streams_[rank];
  const char* names[2] = {"stdout", "stderr"};
  for (size_t k = 0; k < 2; ++k) {
    if (pair[k]) continue;
    std::string tag =
        config_.tag_output ? "[" + std::to_string(record.rank) + "]<" + names[k] + ">:" : "";
    pair[k] = std::make_unique<TaggedStream>(tag, k == 0 ? out_ : err_,
                                             open_copy_file(record.rank, names[k]),
                                             k == 1 ? kStderrLinesKept : 0, config_.timestamps);
  }
  record.err_stream = pair[1].get();
}

TaggedStream* RankStreams::find(int rank, int stream) {
  if (rank < 0 || static_cast<size_t>(rank) >= streams_.size() || (stream != 1 && stream != 2))
    return nullptr;
  return streams_[static_cast<size_t>(rank)][static_cast<size_t>(stream - 1)].get();
}

void RankStreams::write(int rank, int stream, std::string_view bytes) {
  if (TaggedStream* s = find(rank, stream)) s->feed(bytes);
}

void RankStreams::end(int rank, int stream) {
  if (TaggedStream* s = find(rank, stream)) s->finish();
}

int RankStreams::open_copy_file(int rank, const char* which) {
  if (config_.output_dir.empty()) return -1;
  std::filesystem::path dir =
      std::filesystem::path(config_.output_dir) / ("rank." + std::to_string(rank));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string path = (dir / which).string();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) say_("cannot write " + path + ": " + std::strerror(errno));
  return fd;
}

}  // namespace hvrun::launcher

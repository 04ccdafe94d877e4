#include <unistd.h>

#include <climits>
#include <cstring>
#include <filesystem>

#include "common/logging.h"
#include "hvrun/checkpoint.h"
#include "worker_lib/checkpoint/checkpoint_file.h"

namespace hvrun {
namespace {

std::string program_name() {
  char path[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return "hvrun-job";
  path[n] = '\0';
  return std::filesystem::path(path).filename().string();
}

}  // namespace

Checkpointer::Checkpointer(Worker& worker, CheckpointOptions options)
    : worker_(worker), options_(std::move(options)) {
  if (options_.run_name.empty()) options_.run_name = program_name();
  if (options_.keep < 1) options_.keep = 1;
}

Status Checkpointer::add(const std::string& name, void* data, size_t bytes) {
  if (name.empty()) return invalid_argument("checkpoint: a state buffer needs a name");
  if (data == nullptr && bytes > 0)
    return invalid_argument("checkpoint: state buffer '" + name + "' has no memory");
  for (const Entry& e : entries_)
    if (e.name == name) return already_exists("checkpoint: '" + name + "' is registered twice");
  entries_.push_back(Entry{name, data, bytes});
  return Status::ok();
}

Result<std::string> Checkpointer::save_if_due(int64_t step) {
  if (!enabled() || options_.every <= 0 || step % options_.every != 0) return std::string();
  return save(step);
}

Result<std::string> Checkpointer::save(int64_t step) {
  if (!enabled() || worker_.rank() != 0) return std::string();
  detail::CheckpointIdentity identity{options_.run_name, worker_.size(), {}};
  std::vector<detail::CheckpointPayload> payloads;
  for (const Entry& e : entries_) {
    identity.buffers.emplace_back(e.name, e.bytes);
    payloads.push_back({e.name, {static_cast<const std::byte*>(e.data), e.bytes}});
  }
  HVRUN_ASSIGN_OR_RETURN(std::string path, detail::write_checkpoint_atomically(
                                               options_.directory, step, identity, payloads));
  HVRUN_RETURN_IF_ERROR(detail::prune_checkpoints(options_.directory, options_.keep));
  SPDLOG_INFO("checkpoint of step {} saved to {}", step, path);
  return path;
}

Result<std::optional<int64_t>> Checkpointer::restore() {
  if (!enabled()) return std::optional<int64_t>();
  const std::string prefix = "hvrun.checkpoint." + std::to_string(restores_++) + ".";
  int64_t step = -1;
  if (worker_.rank() == 0) {
    detail::CheckpointIdentity identity{options_.run_name, worker_.size(), {}};
    for (const Entry& e : entries_) identity.buffers.emplace_back(e.name, e.bytes);
    std::vector<std::string> skipped;
    HVRUN_ASSIGN_OR_RETURN(auto loaded, detail::load_newest_checkpoint(options_.directory,
                                                                       identity, &skipped));
    for (const std::string& why : skipped) SPDLOG_WARN("checkpoint not used: {}", why);
    if (loaded) {
      for (size_t i = 0; i < entries_.size(); ++i)
        if (entries_[i].bytes > 0)
          std::memcpy(entries_[i].data, loaded->payloads[i].data(), entries_[i].bytes);
      step = loaded->step;
      SPDLOG_INFO("restoring step {} from {}", step, loaded->path);
    } else {
      SPDLOG_INFO("no usable checkpoint in {}; starting from the beginning", options_.directory);
    }
  }
  TensorView step_view{&step, DataType::kInt64, {1}};
  HVRUN_RETURN_IF_ERROR(worker_.broadcast(prefix + "step", step_view, 0));
  if (step < 0) return std::optional<int64_t>();
  for (const Entry& e : entries_) {
    TensorView view{e.data, DataType::kUInt8, {static_cast<int64_t>(e.bytes)}};
    HVRUN_RETURN_IF_ERROR(worker_.broadcast(prefix + e.name, view, 0));
  }
  return std::optional<int64_t>(step);
}

}  // namespace hvrun

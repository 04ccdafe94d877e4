// One checkpoint on disk: what it holds, how it is written so that no reader ever sees half of
// it, and how a reader tells a good file from a torn, corrupt or foreign one.
//
// Layout (little-endian): "HVRUNCKP", u32 format version, u32 world size, i64 step,
// str run name, u32 buffer count, then per buffer str name + u64 bytes; the payloads in that
// order; u32 CRC-32 of everything before it; "HVCKPEND". str = u32 length + bytes.
// Files are named ckpt-<step, 12 digits>.hvckpt; a writer's temporary is
// .ckpt-<step>.hvckpt.tmp-<pid>, renamed into place only after fsync.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace hvrun::detail {

// What a checkpoint must match to be loaded: the same run, world size and registered state.
struct CheckpointIdentity {
  std::string run_name;
  int world_size = 1;
  std::vector<std::pair<std::string, uint64_t>> buffers;  // name, bytes; registration order
};

struct CheckpointPayload {
  std::string name;
  std::span<const std::byte> bytes;
};

std::string checkpoint_file_name(int64_t step);
// The step of a file named by checkpoint_file_name, or nullopt for any other name.
std::optional<int64_t> checkpoint_step_of(const std::string& file_name);

// Writes the checkpoint under a temporary name in `directory`, fsyncs it, renames it into place
// and fsyncs the directory. On any failure nothing but (at worst) the temporary file remains.
// Returns the final path.
Result<std::string> write_checkpoint_atomically(const std::string& directory, int64_t step,
                                                const CheckpointIdentity& identity,
                                                std::span<const CheckpointPayload> payloads);

// Reads and validates one file against `expected`; on success, the payloads in registration
// order. Errors say what is wrong with the file (truncated, checksum, another run, ...).
struct LoadedCheckpoint {
  int64_t step = 0;
  std::string path;
  std::vector<std::vector<std::byte>> payloads;
};
Result<LoadedCheckpoint> read_checkpoint(const std::string& path,
                                         const CheckpointIdentity& expected);

// The newest checkpoint in `directory` that reads back valid; every newer file that did not is
// described in `skipped` ("<path>: <why>"). nullopt when there is none (or no directory).
Result<std::optional<LoadedCheckpoint>> load_newest_checkpoint(
    const std::string& directory, const CheckpointIdentity& expected,
    std::vector<std::string>* skipped);

// Keeps the `keep` newest checkpoints, removes older ones and temporaries whose writer is gone.
Status prune_checkpoints(const std::string& directory, int keep);

}  // namespace hvrun::detail

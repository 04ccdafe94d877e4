#include "worker_lib/checkpoint/checkpoint_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace hvrun::detail {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'H', 'V', 'R', 'U', 'N', 'C', 'K', 'P'};
constexpr char kEndMagic[8] = {'H', 'V', 'C', 'K', 'P', 'E', 'N', 'D'};
constexpr uint32_t kFormatVersion = 1;
constexpr const char* kPrefix = "ckpt-";
constexpr const char* kSuffix = ".hvckpt";
constexpr const char* kTempMarker = ".hvckpt.tmp-";
constexpr size_t kStepDigits = 12;

std::string errno_text() { return std::strerror(errno); }

// Header bytes, little-endian (every platform hvrun builds for is).
class HeaderWriter {
 public:
  void bytes(const void* p, size_t n) {
    auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void u32(uint32_t v) { bytes(&v, sizeof v); }
  void u64(uint64_t v) { bytes(&v, sizeof v); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
  const std::vector<std::byte>& data() const { return out_; }

 private:
  std::vector<std::byte> out_;
};

class HeaderReader {
 public:
  explicit HeaderReader(std::span<const std::byte> in) : in_(in) {}
  bool bytes(void* p, size_t n) {
    if (in_.size() - pos_ < n) return false;
    std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool u32(uint32_t& v) { return bytes(&v, sizeof v); }
  bool u64(uint64_t& v) { return bytes(&v, sizeof v); }
  bool str(std::string& s) {
    uint32_t n = 0;
    if (!u32(n) || in_.size() - pos_ < n) return false;
    s.assign(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  size_t position() const { return pos_; }

 private:
  std::span<const std::byte> in_;
  size_t pos_ = 0;
};

uLong crc_update(uLong crc, const void* p, size_t n) {
  return crc32_z(crc, static_cast<const Bytef*>(p), n);
}

Status write_all(int fd, const void* p, size_t n, const std::string& path) {
  auto* b = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return internal_error("checkpoint: writing " + path + " failed: " + errno_text());
    b += w;
    n -= static_cast<size_t>(w);
  }
  return Status::ok();
}

Status fsync_directory(const std::string& directory) {
  int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return internal_error("checkpoint: cannot open " + directory + ": " + errno_text());
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (rc != 0)
    return internal_error("checkpoint: fsync of " + directory + " failed: " + std::strerror(e));
  return Status::ok();
}

std::string describe_identity(const CheckpointIdentity& id) {
  std::string s = "run '" + id.run_name + "', " + std::to_string(id.world_size) + " ranks, state [";
  for (size_t i = 0; i < id.buffers.size(); ++i) {
    if (i) s += ", ";
    s += id.buffers[i].first + ":" + std::to_string(id.buffers[i].second) + "B";
  }
  return s + "]";
}

// Step files in `directory`, newest first.
std::vector<std::pair<int64_t, fs::path>> list_checkpoints(const std::string& directory) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(directory, ec)) {
    auto step = checkpoint_step_of(entry.path().filename().string());
    if (step) found.emplace_back(*step, entry.path());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return found;
}

}  // namespace

std::string checkpoint_file_name(int64_t step) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%0*lld", static_cast<int>(kStepDigits),
                static_cast<long long>(step));
  return std::string(kPrefix) + digits + kSuffix;
}

std::optional<int64_t> checkpoint_step_of(const std::string& name) {
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (name.size() != prefix.size() + kStepDigits + suffix.size()) return std::nullopt;
  if (name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return std::nullopt;
  int64_t step = 0;
  for (size_t i = prefix.size(); i < prefix.size() + kStepDigits; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

Result<std::string> write_checkpoint_atomically(const std::string& directory, int64_t step,
                                                const CheckpointIdentity& identity,
                                                std::span<const CheckpointPayload> payloads) {
  if (payloads.size() != identity.buffers.size())
    return internal_error("checkpoint: payload count does not match the registered state");
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec)
    return failed_precondition("checkpoint: cannot create directory " + directory + ": " +
                               ec.message() + " (check --checkpoint-dir)");

  HeaderWriter header;
  header.bytes(kMagic, sizeof kMagic);
  header.u32(kFormatVersion);
  header.u32(static_cast<uint32_t>(identity.world_size));
  header.u64(static_cast<uint64_t>(step));
  header.str(identity.run_name);
  header.u32(static_cast<uint32_t>(identity.buffers.size()));
  for (const auto& [name, bytes] : identity.buffers) {
    header.str(name);
    header.u64(bytes);
  }

  const std::string final_path = (fs::path(directory) / checkpoint_file_name(step)).string();
  const std::string temp_path =
      (fs::path(directory) / ("." + checkpoint_file_name(step).substr(0, std::strlen(kPrefix) +
                                                                       kStepDigits) +
                              kTempMarker + std::to_string(::getpid())))
          .string();
  int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return failed_precondition("checkpoint: cannot create " + temp_path + ": " + errno_text() +
                               " (check --checkpoint-dir and free space)");
  auto fail = [&](Status s) {
    ::close(fd);
    ::unlink(temp_path.c_str());
    return s;
  };
  uLong crc = crc32_z(0L, Z_NULL, 0);
  crc = crc_update(crc, header.data().data(), header.data().size());
  if (Status s = write_all(fd, header.data().data(), header.data().size(), temp_path); !s.is_ok())
    return fail(s);
  for (size_t i = 0; i < payloads.size(); ++i) {
    if (payloads[i].bytes.size() != identity.buffers[i].second)
      return fail(internal_error("checkpoint: buffer '" + payloads[i].name + "' changed size"));
    crc = crc_update(crc, payloads[i].bytes.data(), payloads[i].bytes.size());
    if (Status s = write_all(fd, payloads[i].bytes.data(), payloads[i].bytes.size(), temp_path);
        !s.is_ok())
      return fail(s);
  }
  const uint32_t crc32v = static_cast<uint32_t>(crc);
  if (Status s = write_all(fd, &crc32v, sizeof crc32v, temp_path); !s.is_ok()) return fail(s);
  if (Status s = write_all(fd, kEndMagic, sizeof kEndMagic, temp_path); !s.is_ok()) return fail(s);
  if (::fsync(fd) != 0)
    return fail(internal_error("checkpoint: fsync of " + temp_path + " failed: " + errno_text()));
  if (::close(fd) != 0) {
    ::unlink(temp_path.c_str());
    return internal_error("checkpoint: closing " + temp_path + " failed: " + errno_text());
  }
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    Status s = internal_error("checkpoint: renaming " + temp_path + " to " + final_path +
                              " failed: " + errno_text());
    ::unlink(temp_path.c_str());
    return s;
  }
  HVRUN_RETURN_IF_ERROR(fsync_directory(directory));
  return final_path;
}

Result<LoadedCheckpoint> read_checkpoint(const std::string& path,
                                         const CheckpointIdentity& expected) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return not_found("cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return internal_error("cannot stat: " + errno_text());
  }
  std::vector<std::byte> file(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < file.size()) {
    ssize_t r = ::read(fd, file.data() + got, file.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  if (got != file.size()) return data_loss("short read (" + std::to_string(got) + " bytes)");

  constexpr size_t kTrailer = sizeof(uint32_t) + sizeof kEndMagic;
  if (file.size() < sizeof kMagic + kTrailer || std::memcmp(file.data(), kMagic, sizeof kMagic) != 0)
    return data_loss("not an hvrun checkpoint (bad magic or truncated)");
  if (std::memcmp(file.data() + file.size() - sizeof kEndMagic, kEndMagic, sizeof kEndMagic) != 0)
    return data_loss("truncated (no end marker): the writer was interrupted");
  uint32_t stored_crc = 0;
  std::memcpy(&stored_crc, file.data() + file.size() - kTrailer, sizeof stored_crc);
  const size_t body = file.size() - kTrailer;
  uLong crc = crc_update(crc32_z(0L, Z_NULL, 0), file.data(), body);
  if (static_cast<uint32_t>(crc) != stored_crc) return data_loss("checksum mismatch: corrupt");

  HeaderReader in(std::span<const std::byte>(file.data(), body));
  char magic[8];
  uint32_t version = 0, world = 0, count = 0;
  uint64_t step = 0;
  CheckpointIdentity found;
  if (!in.bytes(magic, sizeof magic) || !in.u32(version) || !in.u32(world) || !in.u64(step) ||
      !in.str(found.run_name) || !in.u32(count))
    return data_loss("header truncated");
  if (version != kFormatVersion)
    return failed_precondition("format version " + std::to_string(version) + ", this hvrun reads " +
                               std::to_string(kFormatVersion));
  found.world_size = static_cast<int>(world);
  for (uint32_t i = 0; i < count; ++i) {
    std::string name;
    uint64_t bytes = 0;
    if (!in.str(name) || !in.u64(bytes)) return data_loss("header truncated");
    found.buffers.emplace_back(std::move(name), bytes);
  }
  if (found.run_name != expected.run_name || found.world_size != expected.world_size ||
      found.buffers != expected.buffers)
    return failed_precondition("written by another job: it holds " + describe_identity(found) +
                               ", this job has " + describe_identity(expected));

  LoadedCheckpoint loaded;
  loaded.step = static_cast<int64_t>(step);
  loaded.path = path;
  size_t pos = in.position();
  for (const auto& [name, bytes] : found.buffers) {
    if (body - pos < bytes) return data_loss("payload truncated");
    loaded.payloads.emplace_back(file.begin() + static_cast<std::ptrdiff_t>(pos),
                                 file.begin() + static_cast<std::ptrdiff_t>(pos + bytes));
    pos += bytes;
  }
  if (pos != body) return data_loss("unexpected bytes after the payload");
  return loaded;
}

Result<std::optional<LoadedCheckpoint>> load_newest_checkpoint(
    const std::string& directory, const CheckpointIdentity& expected,
    std::vector<std::string>* skipped) {
  for (const auto& [step, path] : list_checkpoints(directory)) {
    auto loaded = read_checkpoint(path.string(), expected);
    if (loaded.is_ok()) return std::optional<LoadedCheckpoint>(std::move(loaded).value());
    if (skipped) skipped->push_back(path.string() + ": " + loaded.status().message());
  }
  return std::optional<LoadedCheckpoint>();
}

Status prune_checkpoints(const std::string& directory, int keep) {
  auto found = list_checkpoints(directory);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < found.size(); ++i) {
    std::error_code ec;
    fs::remove(found[i].second, ec);
  }
  // Temporaries of writers that died (the pid is in the name; a live writer keeps its own).
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(directory, ec)) {
    const std::string name = entry.path().filename().string();
    auto marker = name.find(kTempMarker);
    if (name.empty() || name[0] != '.' || marker == std::string::npos) continue;
    const long pid = std::strtol(name.c_str() + marker + std::strlen(kTempMarker), nullptr, 10);
    if (pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::error_code rm;
      fs::remove(entry.path(), rm);
    }
  }
  return Status::ok();
}

}  // namespace hvrun::detail

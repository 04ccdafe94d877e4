#include "worker_lib/backends/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <new>

#include "worker_lib/backends/shm/futex.h"
#include "worker_lib/backends/shm/round_board.h"

namespace hvrun::detail::shm {
namespace {

constexpr uint64_t kMagic = 0x6876'7275'6e73'686dull;  // "hvrunshm"
constexpr uint32_t kVersion = 4;  // 2: three buffer sets; 3: the round board; 4: its verdicts
constexpr size_t kPage = 4096;

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

std::string sanitised(const std::string& text, size_t max_length) {
  std::string out;
  for (char c : text) {
    if (out.size() >= max_length) break;
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_' || c == '.';
    out += keep ? c : '_';
  }
  return out;
}

// FNV-1a: the host's name may be sanitised into something another host's name also gives.
uint32_t fnv1a(const std::string& text) {
  uint32_t h = 2166136261u;
  for (unsigned char c : text) h = (h ^ c) * 16777619u;
  return h;
}

size_t lines_offset() { return round_up(sizeof(SegmentHeader), 64); }
size_t board_offset(int ranks) { return round_up(lines_offset() + sizeof(RankLine) * ranks, 64); }
size_t data_offset(int ranks) {
  return round_up(board_offset(ranks) + RoundBoard::bytes_needed(ranks), kPage);
}
size_t total_bytes(int ranks, size_t slot_bytes) {
  return data_offset(ranks) + kBufferSets * static_cast<size_t>(ranks) * slot_bytes;
}

std::string errno_text(int e) { return std::strerror(e); }

}  // namespace

std::string segment_prefix(const std::string& job_id) {
  return "hvrun-shm-" + sanitised(job_id, 100) + "-";
}

std::string segment_name(const std::string& job_id, const std::string& host) {
  char hash[9];
  std::snprintf(hash, sizeof hash, "%08x", fnv1a(host));
  return segment_prefix(job_id) + sanitised(host, 80) + "-" + hash;
}

Segment::Segment(void* base, size_t bytes, int ranks, size_t slot_bytes, std::string name)
    : base_(base),
      bytes_(bytes),
      ranks_(ranks),
      slot_bytes_(slot_bytes),
      lines_(reinterpret_cast<RankLine*>(static_cast<std::byte*>(base) + lines_offset())),
      board_(static_cast<std::byte*>(base) + board_offset(ranks)),
      data_(static_cast<std::byte*>(base) + data_offset(ranks)),
      name_(std::move(name)) {}

Segment::~Segment() { ::munmap(base_, bytes_); }

Result<std::unique_ptr<Segment>> Segment::attach(const SegmentOptions& options, KeyValueStore& kv) {
  const int n = options.local_size;
  const size_t slot_bytes = round_up(std::max<size_t>(options.slot_bytes, kPage), kPage);
  const size_t bytes = total_bytes(n, slot_bytes);
  const std::string name = segment_name(options.job_id, options.host);
  const std::string path = "/" + name;
  const std::string where = "shared-memory segment /dev/shm/" + name + " (host " + options.host +
                            ", local rank " + std::to_string(options.local_rank) + " of " +
                            std::to_string(n) + ")";
  const std::string ready_key = options.kv_prefix + "/segment";
  const bool creator = options.local_rank == 0;
  bool linked = false;  // this rank created or opened the name: it unlinks it on failure
  auto fail = [&](Status status) -> Result<std::unique_ptr<Segment>> {
    if (linked) ::shm_unlink(path.c_str());
    return status;
  };

  int fd = -1;
  if (creator) {
    fd = ::shm_open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
      int e = errno;
      return unavailable("cannot create the " + where + ": " + errno_text(e) +
                         (e == EEXIST ? " (left by an earlier job with the same id? delete it)"
                                      : " (is /dev/shm mounted and writable?)"));
    }
    linked = true;
    // Reserve the pages now: on a full /dev/shm (containers default to 64 MiB) this fails with
    // ENOSPC instead of a SIGBUS in the middle of a collective.
    int e = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (e != 0) {
      ::close(fd);
      return fail(resource_exhausted("cannot reserve " + std::to_string(bytes >> 10) +
                                     " KiB for the " + where + ": " + errno_text(e) +
                                     " — give /dev/shm more room (docker: --shm-size), lower "
                                     "HVRUN_SHM_CHUNK_KB, or use --cpu-backend gloo"));
    }
  } else {
    auto published = kv.get({ready_key}, options.timeout);
    if (!published.is_ok())
      return unavailable("local rank 0 on host " + options.host + " did not create the " + where +
                         " in time: " + published.status().message());
    if (published->at(0) != name)
      return failed_precondition("local rank 0 on host " + options.host + " created segment '" +
                                 published->at(0) + "' but this rank expects '" + name +
                                 "' (different job ids across ranks?)");
    fd = ::shm_open(path.c_str(), O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return unavailable("cannot open the " + where + ": " + errno_text(errno));
    linked = true;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
      ::close(fd);
      return fail(
          failed_precondition("the " + where + " has " + std::to_string(st.st_size) +
                              " bytes, this rank expects " + std::to_string(bytes) +
                              ": HVRUN_SHM_CHUNK_KB and the ranks per host must be the same "
                              "on every rank of the host"));
    }
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int map_errno = errno;
  ::close(fd);
  if (base == MAP_FAILED)
    return fail(unavailable("cannot map the " + where + ": " + errno_text(map_errno)));
  std::unique_ptr<Segment> segment(new Segment(base, bytes, n, slot_bytes, name));
  SegmentHeader& h = segment->header();
  if (creator) {
    new (&h) SegmentHeader{};
    h.magic = kMagic;
    h.version = kVersion;
    h.ranks = static_cast<uint32_t>(n);
    h.slot_bytes = slot_bytes;
    h.total_bytes = bytes;
    for (int r = 0; r < n; ++r) new (&segment->line(r)) RankLine{};
    RoundBoard::initialise(segment->board(), n);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    Status published = kv.set(ready_key, name);
    if (!published.is_ok())
      return fail(unavailable("cannot publish the " + where +
                              " in the job's key-value store: " + published.message()));
  } else if (h.magic != kMagic || h.version != kVersion || h.ranks != static_cast<uint32_t>(n) ||
             h.slot_bytes != slot_bytes) {
    return fail(
        failed_precondition("the " + where + " has another layout (" + std::to_string(h.ranks) +
                            " ranks, " + std::to_string(h.slot_bytes) +
                            "-byte slots) than this rank "
                            "expects: same hvrun version and HVRUN_SHM_CHUNK_KB everywhere"));
  }
  segment->line(options.local_rank).pid.store(static_cast<int32_t>(::getpid()));
  h.attached.fetch_add(1);
  futex_wake_all(&h.attached);

  // Wait until every local rank mapped it; then the name is no longer needed.
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  while (true) {
    uint32_t seen = h.attached.load();
    if (seen >= static_cast<uint32_t>(n)) break;
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds::zero())
      return fail(deadline_exceeded("only " + std::to_string(seen) + " of " + std::to_string(n) +
                                    " local ranks mapped the " + where + " within " +
                                    std::to_string(options.timeout.count()) +
                                    " ms: a rank on this host did not start or died"));
    futex_wait(&h.attached, seen,
               std::min<std::chrono::nanoseconds>(left, std::chrono::milliseconds(200)));
  }
  ::shm_unlink(path.c_str());  // every rank tries; ENOENT after the first is expected
  return segment;
}

}  // namespace hvrun::detail::shm

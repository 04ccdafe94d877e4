#include "worker_lib/backends/nccl/host_plane/host_communicator.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "worker_lib/backends/nccl/communicator_carry.h"
#include "worker_lib/backends/shm/futex.h"

namespace hvrun::detail::cuda {

using Clock = std::chrono::steady_clock;

struct HostCommunicator::Layout {
  static constexpr uint64_t kMagic = 0x68767275'6e48504cull;  // "hvrunHPL"
  struct Header {
    std::atomic<uint64_t> magic;  // written last by rank 0: the rest is initialised
    uint32_t ranks;
    uint64_t slot_bytes;
    std::atomic<uint32_t> attached;     // futex word: ranks that mapped the segment
    std::atomic<int32_t> poisoned_by;   // -1, or the rank that aborted its communicator
    std::atomic<uint32_t> reason_ready;
    char reason[400];
  };
  struct alignas(64) Line {
    std::atomic<uint32_t> published;  // futex word: rounds whose window this rank wrote
    std::atomic<uint32_t> consumed;   // futex word: rounds whose windows this rank read
    std::atomic<uint64_t> total;      // this rank's message bytes in the current exchange
    std::atomic<int32_t> pid;
  };
  static constexpr size_t kLinesOffset = 512;
  static_assert(sizeof(Header) <= kLinesOffset);
  static size_t slots_offset(int ranks) {
    return (kLinesOffset + sizeof(Line) * static_cast<size_t>(ranks) + 4095) / 4096 * 4096;
  }
  static size_t bytes(int ranks, size_t slot_bytes) {
    return slots_offset(ranks) + slot_bytes * static_cast<size_t>(ranks);
  }
  static Header& header(void* base) { return *static_cast<Header*>(base); }
  static Line& line(void* base, int rank) {
    return reinterpret_cast<Line*>(static_cast<std::byte*>(base) + kLinesOffset)[rank];
  }
  static std::byte* slot(void* base, int ranks, size_t slot_bytes, int rank) {
    return static_cast<std::byte*>(base) + slots_offset(ranks) + slot_bytes * static_cast<size_t>(rank);
  }
};

namespace {

// Wrap-safe "a has reached b" for round counters.
bool reached(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) >= 0; }

std::string errno_text(int e) { return std::string(std::strerror(e)); }

}  // namespace

std::string HostCommunicator::new_id() {
  static std::atomic<uint32_t> counter{0};
  std::random_device device;
  char id[96];
  std::snprintf(id, sizeof id, "/hvrun-hostplane-%d-%u-%08x", static_cast<int>(::getpid()),
                counter.fetch_add(1), static_cast<unsigned>(device()));
  return id;
}

std::string HostCommunicator::shrunk_id(const std::string& id, std::span<const int> excluded) {
  // A name of fixed length however many shrinks came before (shm names are at most NAME_MAX).
  return "/hvrun-hostplane-shrunk-" + lineage_tag_of_shrink(id, excluded);
}

HostCommunicator::HostCommunicator(void* base, size_t bytes, int rank, int size, size_t slot_bytes,
                                   std::string name)
    : base_(base), bytes_(bytes), rank_(rank), size_(size), slot_bytes_(slot_bytes), name_(std::move(name)) {}

HostCommunicator::~HostCommunicator() {
  if (rank_ == 0 && !unlinked_) (void)::shm_unlink(name_.c_str());
  (void)::munmap(base_, bytes_);
}

Result<std::unique_ptr<HostCommunicator>> HostCommunicator::attach(
    const HostCommunicatorOptions& o, const std::atomic<bool>& stop, Clock::time_point deadline) {
  if (o.id.empty() || o.id[0] != '/' || o.id.find('/', 1) != std::string::npos)
    return internal_error("host plane communicator id '" + o.id + "' is malformed (protocol error)");
  const size_t bytes = Layout::bytes(o.size, o.slot_bytes);
  const std::string where = "host plane communicator " + o.id + " (rank " + std::to_string(o.rank) +
                            " of " + std::to_string(o.size) + ")";
  auto give_up = [&](const std::string& waiting) -> Status {
    if (stop.load()) return aborted(where + ": init aborted while " + waiting);
    return deadline_exceeded(where + ": timed out while " + waiting +
                             "; did every rank reach its first CUDA collective?");
  };
  int fd = -1;
  if (o.rank == 0) {
    fd = ::shm_open(o.id.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) return unavailable(where + ": shm_open: " + errno_text(errno) + " (is /dev/shm mounted and writable?)");
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      int e = errno;
      ::close(fd);
      ::shm_unlink(o.id.c_str());
      return resource_exhausted(where + ": ftruncate to " + std::to_string(bytes) + " bytes: " + errno_text(e));
    }
  } else {
    // Rank 0 may not have created or sized it yet: polled, as NCCL's init polls its bootstrap.
    for (;;) {
      fd = ::shm_open(o.id.c_str(), O_RDWR, 0600);
      struct stat st {};
      if (fd >= 0 && ::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes) break;
      if (fd >= 0) ::close(fd);
      fd = -1;
      if (stop.load() || Clock::now() > deadline) return give_up("waiting for rank 0's segment");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int map_errno = errno;
  ::close(fd);
  if (base == MAP_FAILED) {
    if (o.rank == 0) ::shm_unlink(o.id.c_str());
    return resource_exhausted(where + ": mmap of " + std::to_string(bytes) + " bytes: " + errno_text(map_errno));
  }
  std::unique_ptr<HostCommunicator> comm(new HostCommunicator(base, bytes, o.rank, o.size, o.slot_bytes, o.id));
  Layout::Header& h = Layout::header(base);
  if (o.rank == 0) {
    h.ranks = static_cast<uint32_t>(o.size);
    h.slot_bytes = o.slot_bytes;
    h.poisoned_by.store(-1);
    h.magic.store(Layout::kMagic, std::memory_order_release);
  } else {
    while (h.magic.load(std::memory_order_acquire) != Layout::kMagic) {
      if (stop.load() || Clock::now() > deadline) return give_up("waiting for rank 0 to format the segment");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (h.ranks != static_cast<uint32_t>(o.size) || h.slot_bytes != o.slot_bytes)
      return internal_error(where + ": rank 0 made it for " + std::to_string(h.ranks) + " ranks of " +
                            std::to_string(h.slot_bytes) + "-byte slots (protocol error)");
  }
  Layout::line(base, o.rank).pid.store(static_cast<int32_t>(::getpid()));
  h.attached.fetch_add(1);
  shm::futex_wake_all(&h.attached);
  for (;;) {
    uint32_t seen = h.attached.load();
    if (seen >= static_cast<uint32_t>(o.size)) break;
    if (stop.load() || Clock::now() > deadline)
      return give_up("waiting for every rank to attach (" + std::to_string(seen) + " of " +
                     std::to_string(o.size) + " did)");
    shm::futex_wait(&h.attached, seen, std::chrono::milliseconds(2));
  }
  // Everyone mapped it: the name can go, the memory lives as long as the mappings.
  if (o.rank == 0) (void)::shm_unlink(o.id.c_str());
  comm->unlinked_ = true;
  return comm;
}

void HostCommunicator::poison(const std::string& reason) {
  Layout::Header& h = Layout::header(base_);
  int32_t none = -1;
  if (h.poisoned_by.compare_exchange_strong(none, rank_)) {
    std::snprintf(h.reason, sizeof h.reason, "%s", reason.c_str());
    h.reason_ready.store(1, std::memory_order_release);
  }
  // Wake every sleeper so it sees the poison now, not at its next timeout.
  for (int k = 0; k < size_; ++k) {
    Layout::Line& l = Layout::line(base_, k);
    l.published.fetch_add(0);
    shm::futex_wake_all(&l.published);
    shm::futex_wake_all(&l.consumed);
  }
}

Status HostCommunicator::peer_failure() const {
  Layout::Header& h = Layout::header(base_);
  int32_t by = h.poisoned_by.load();
  if (by >= 0 && by != rank_) {
    std::string reason = h.reason_ready.load(std::memory_order_acquire) ? std::string(h.reason) : "";
    return unavailable("rank " + std::to_string(by) + " aborted its communicator" +
                       (reason.empty() ? "" : ": " + reason));
  }
  for (int k = 0; k < size_; ++k) {
    int32_t pid = Layout::line(base_, k).pid.load();
    if (k != rank_ && pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH)
      return unavailable("rank " + std::to_string(k) + " (pid " + std::to_string(pid) +
                         ") exited without aborting its communicator");
  }
  return Status::ok();
}

Status HostCommunicator::wait_all(const std::function<bool(int)>& ready,
                                  const std::function<std::atomic<uint32_t>*(int)>& word,
                                  const std::atomic<bool>& stop, const char* waiting_for) {
  auto next_check = Clock::now() + std::chrono::milliseconds(50);
  for (int k = 0; k < size_; ++k) {
    int spins = 0;
    for (;;) {
      uint32_t seen = word(k)->load(std::memory_order_acquire);
      if (ready(k)) break;
      if (stop.load()) return aborted(std::string("stopped while waiting for ") + waiting_for);
      if (Layout::header(base_).poisoned_by.load() >= 0 || Clock::now() > next_check) {
        HVRUN_RETURN_IF_ERROR(peer_failure());
        next_check = Clock::now() + std::chrono::milliseconds(50);
      }
      if (++spins < 256) {
        shm::cpu_relax();
        continue;
      }
      shm::futex_wait(word(k), seen, std::chrono::milliseconds(2));
    }
  }
  return Status::ok();
}

Status HostCommunicator::exchange(const void* message, size_t bytes, const ExchangeConsumer& consume,
                                  const std::atomic<bool>& stop) {
  const auto* mine = static_cast<const std::byte*>(message);
  std::vector<const std::byte*> windows(static_cast<size_t>(size_));
  std::vector<size_t> lengths(static_cast<size_t>(size_));
  std::vector<uint64_t> totals(static_cast<size_t>(size_));
  size_t rounds = 1;  // known once every rank said how long its message is (round 0)
  for (size_t i = 0; i < rounds; ++i) {
    const uint32_t g = ++round_;
    // This rank's slot is free once every rank read round g - 1.
    HVRUN_RETURN_IF_ERROR(wait_all(
        [&](int k) { return reached(Layout::line(base_, k).consumed.load(std::memory_order_acquire), g - 1); },
        [&](int k) { return &Layout::line(base_, k).consumed; }, stop, "the peers to read the last round"));
    const size_t offset = i * slot_bytes_;
    const size_t length = offset < bytes ? std::min(slot_bytes_, bytes - offset) : 0;
    if (length) std::memcpy(Layout::slot(base_, size_, slot_bytes_, rank_), mine + offset, length);
    Layout::Line& me = Layout::line(base_, rank_);
    me.total.store(bytes, std::memory_order_relaxed);
    me.published.store(g, std::memory_order_release);
    shm::futex_wake_all(&me.published);
    HVRUN_RETURN_IF_ERROR(wait_all(
        [&](int k) { return reached(Layout::line(base_, k).published.load(std::memory_order_acquire), g); },
        [&](int k) { return &Layout::line(base_, k).published; }, stop, "the peers' windows"));
    if (i == 0) {
      uint64_t longest = 0;
      for (int k = 0; k < size_; ++k) {
        totals[static_cast<size_t>(k)] = Layout::line(base_, k).total.load(std::memory_order_relaxed);
        longest = std::max(longest, totals[static_cast<size_t>(k)]);
      }
      rounds = std::max<size_t>(1, (longest + slot_bytes_ - 1) / slot_bytes_);
    }
    for (int k = 0; k < size_; ++k) {
      const uint64_t total = totals[static_cast<size_t>(k)];
      windows[static_cast<size_t>(k)] = Layout::slot(base_, size_, slot_bytes_, k);
      lengths[static_cast<size_t>(k)] = offset < total ? std::min<uint64_t>(slot_bytes_, total - offset) : 0;
    }
    consume(offset, windows, lengths);
    me.consumed.store(g, std::memory_order_release);
    shm::futex_wake_all(&me.consumed);
  }
  return Status::ok();
}

}  // namespace hvrun::detail::cuda

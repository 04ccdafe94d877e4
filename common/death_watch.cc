#include "common/death_watch.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <new>
#include <utility>

namespace hvrun::death_watch {
namespace {

std::string path_of(const std::string& name) { return "/dev/shm/" + name; }

long futex(std::atomic<uint32_t>& word, int op, uint32_t value, const timespec* timeout) {
  // Shared (no FUTEX_PRIVATE_FLAG): the launcher and the worker are different processes.
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), op, value, timeout, nullptr, 0);
}

}  // namespace

Result<Segment> Segment::create(const std::string& name, size_t slots) {
  const std::string shm = "/" + name;
  const int fd = ::shm_open(shm.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0)
    return unavailable("death watch: cannot create " + path_of(name) + ": " + std::strerror(errno));
  const size_t bytes = slots * sizeof(Slot);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int e = errno;
    ::close(fd);
    ::shm_unlink(shm.c_str());
    return unavailable("death watch: cannot size " + path_of(name) + ": " + std::strerror(e));
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    ::shm_unlink(shm.c_str());
    return unavailable("death watch: cannot map " + path_of(name) + ": " + std::strerror(errno));
  }
  auto* slot = static_cast<Slot*>(base);
  pthread_mutexattr_t attributes;
  pthread_mutexattr_init(&attributes);
  pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
  for (size_t i = 0; i < slots; ++i) {
    new (&slot[i]) Slot();
    pthread_mutex_init(&slot[i].mutex, &attributes);
  }
  pthread_mutexattr_destroy(&attributes);
  return Segment(name, slot, slots);
}

Result<Segment> Segment::open(const std::string& name) {
  const std::string shm = "/" + name;
  const int fd = ::shm_open(shm.c_str(), O_RDWR, 0);
  if (fd < 0)
    return unavailable("death watch: cannot open " + path_of(name) + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Slot))) {
    ::close(fd);
    return unavailable("death watch: " + path_of(name) + " is not a death-watch segment");
  }
  const auto bytes = static_cast<size_t>(st.st_size);
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED)
    return unavailable("death watch: cannot map " + path_of(name) + ": " + std::strerror(errno));
  return Segment(name, static_cast<Slot*>(base), bytes / sizeof(Slot));
}

Segment::Segment(Segment&& other) noexcept
    : name_(std::move(other.name_)),
      base_(std::exchange(other.base_, nullptr)),
      slots_(std::exchange(other.slots_, 0)) {}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) ::munmap(base_, slots_ * sizeof(Slot));
    name_ = std::move(other.name_);
    base_ = std::exchange(other.base_, nullptr);
    slots_ = std::exchange(other.slots_, 0);
  }
  return *this;
}

Segment::~Segment() {
  if (base_ != nullptr) ::munmap(base_, slots_ * sizeof(Slot));
}

Result<std::pair<std::string, size_t>> parse_assignment(const std::string& value) {
  const size_t colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == value.size())
    return invalid_argument(std::string(kEnvironmentVariable) + "=" + value +
                            ": expected <segment name>:<slot>");
  char* end = nullptr;
  const unsigned long slot = std::strtoul(value.c_str() + colon + 1, &end, 10);
  if (*end != '\0')
    return invalid_argument(std::string(kEnvironmentVariable) + "=" + value + ": the slot is not a number");
  return std::make_pair(value.substr(0, colon), static_cast<size_t>(slot));
}

void wait_while_equal(std::atomic<uint32_t>& word, uint32_t expected,
                      std::chrono::milliseconds timeout) {
  timespec relative{};
  relative.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  relative.tv_nsec = static_cast<long>(timeout.count() % 1000) * 1000000L;
  (void)futex(word, FUTEX_WAIT, expected, &relative);
}

void wake_all(std::atomic<uint32_t>& word) { (void)futex(word, FUTEX_WAKE, INT_MAX, nullptr); }

}  // namespace hvrun::death_watch

#include "launcher/autopsy/report_directory_card.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "launcher/process/proc_table.h"

namespace hvrun::launcher {
namespace {

constexpr const char* kCardDirectory = "/dev/shm";

bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string report_directory_card_path(pid_t pid) {
  return std::string(kCardDirectory) + "/hvrun-job-" + std::to_string(pid) + ".autopsy-dir";
}

ReportDirectoryCard::ReportDirectoryCard(const std::string& directory) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(directory, ec);
  if (ec) return;
  const pid_t self = ::getpid();
  const std::string path = report_directory_card_path(self);
  const std::string text = "start_time " + std::to_string(process_start_time(self)) +
                           "\nautopsy_dir " + absolute.lexically_normal().string() + "\n";
  // Written beside the card, then renamed over it: a reader sees the whole card or none.
  const std::string part = path + ".part";
  const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return;
  const bool written = write_all(fd, text);
  ::close(fd);
  if (!written || ::rename(part.c_str(), path.c_str()) != 0) {
    ::unlink(part.c_str());
    return;
  }
  path_ = path;
}

ReportDirectoryCard::~ReportDirectoryCard() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

std::optional<std::string> read_report_directory_card(pid_t pid) {
  const std::string path = report_directory_card_path(pid);
  struct stat card {}, process {};
  if (::lstat(path.c_str(), &card) != 0 || !S_ISREG(card.st_mode)) return std::nullopt;
  if (::stat(("/proc/" + std::to_string(pid)).c_str(), &process) != 0 ||
      card.st_uid != process.st_uid)
    return std::nullopt;
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string start = "start_time " + std::to_string(process_start_time(pid)) + "\n";
  const std::string key = "autopsy_dir ";
  if (text.rfind(start, 0) != 0 || text.compare(start.size(), key.size(), key) != 0)
    return std::nullopt;
  std::string directory = text.substr(start.size() + key.size());
  if (!directory.empty() && directory.back() == '\n') directory.pop_back();
  if (directory.empty()) return std::nullopt;
  return directory;
}

}  // namespace hvrun::launcher

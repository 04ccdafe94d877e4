#include "launcher/process/output_mux.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace hvrun::launcher {
namespace {

void write_fd(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // reader gone (EPIPE) or disk full: output is best effort, the job goes on
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

void OutputSink::write_all(std::string_view bytes) { write_fd(fd_, bytes); }

void OutputSink::write_segment(const void* owner, std::string_view tag, std::string_view segment) {
  scratch_.clear();
  if (line_->open && line_->owner != owner) scratch_ += '\n';  // keep the other's bar intact
  scratch_ += tag;
  scratch_ += segment;
  write_all(scratch_);
  line_->open = !segment.empty() && segment.back() == '\r';
  line_->owner = line_->open ? owner : nullptr;
}

void OutputSink::close_line_of(const void* owner) {
  if (line_->open && line_->owner == owner) {
    write_all("\n");
    line_->open = false;
    line_->owner = nullptr;
  }
}

bool same_file(int fd_a, int fd_b) {
  struct stat a {}, b {};
  return ::fstat(fd_a, &a) == 0 && ::fstat(fd_b, &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

TaggedStream::TaggedStream(std::string tag, OutputSink& sink, int copy_fd, size_t keep_last_lines,
                           bool timestamps)
    : tag_(std::move(tag)), timestamps_(timestamps), sink_(sink), copy_fd_(copy_fd),
      keep_last_lines_(keep_last_lines) {}

TaggedStream::~TaggedStream() {
  if (copy_fd_ >= 0) ::close(copy_fd_);
}

void TaggedStream::feed(std::string_view bytes) {
  if (copy_fd_ >= 0) write_fd(copy_fd_, bytes);
  if (!line_by_line()) return feed_raw(bytes);
  pending_.append(bytes);
  size_t start = 0;
  while (true) {
    size_t end = pending_.find_first_of("\r\n", start);
    if (end == std::string::npos) break;
    if (pending_[end] == '\r' && end + 1 < pending_.size() && pending_[end + 1] == '\n')
      ++end;  // "\r\n" is one line end
    std::string_view segment(pending_.data() + start, end + 1 - start);
    start = end + 1;
    if (after_cr_ && segment == "\n") {
      // "\r" then "\n" across two reads: the line was already emitted, just end it.
      after_cr_ = false;
      sink_.close_line_of(this);
      continue;
    }
    if (segment == "\r") continue;  // a bare carriage return: the previous emit already did it
    emit(segment);
  }
  pending_.erase(0, start);
  while (pending_.size() >= kMaxLine) {
    std::string piece = pending_.substr(0, kMaxLine) + "\n";
    pending_.erase(0, kMaxLine);
    emit(piece);
  }
}

// Up to the last line end goes out now, whole lines in one write so that two ranks' lines do
// not tear; the rest waits for its line end (or kMaxLine, or the end of the stream).
void TaggedStream::feed_raw(std::string_view bytes) {
  pending_.append(bytes);
  size_t cut = pending_.find_last_of("\r\n");
  cut = cut == std::string::npos ? 0 : cut + 1;
  if (pending_.size() - cut >= kMaxLine) cut = pending_.size();
  if (cut == 0) return;
  const std::string_view out(pending_.data(), cut);
  sink_.write_raw(out);
  size_t start = 0;
  for (size_t end; (end = out.find_first_of("\r\n", start)) != std::string_view::npos;
       start = end + 1)
    remember(out.substr(start, end + 1 - start));
  if (start < out.size()) remember(out.substr(start));
  pending_.erase(0, cut);
}

void TaggedStream::finish() {
  if (!line_by_line()) {
    if (!pending_.empty()) {
      sink_.write_raw(pending_);
      remember(pending_);
      pending_.clear();
    }
    return;
  }
  if (!pending_.empty()) {
    pending_ += '\n';
    emit(pending_);
    pending_.clear();
  }
  sink_.close_line_of(this);
}

void TaggedStream::emit(std::string_view segment) {
  after_cr_ = segment.back() == '\r';
  if (timestamps_) {
    // time.asctime()'s form, as horovodrun's --prefix-output-with-timestamp.
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    ::localtime_r(&now, &local);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%a %b %e %H:%M:%S %Y", &local);
    sink_.write_segment(this, stamp + tag_, segment);
  } else {
    sink_.write_segment(this, tag_, segment);
  }
  remember(segment);
}

void TaggedStream::remember(std::string_view segment) {
  if (keep_last_lines_ == 0) return;
  while (!segment.empty() && (segment.back() == '\n' || segment.back() == '\r'))
    segment.remove_suffix(1);
  if (segment.empty()) return;
  constexpr size_t kMaxKept = 400;
  std::string line(segment.substr(0, kMaxKept));
  if (segment.size() > kMaxKept) line += " ...";
  last_lines_.push_back(std::move(line));
  while (last_lines_.size() > keep_last_lines_) last_lines_.pop_front();
}

}  // namespace hvrun::launcher

// Rank-tagged output: every line a worker prints reaches hvrun's stdout/stderr whole, prefixed
// with "[rank]<stdout>:" or "[rank]<stderr>:".
//
// Lines end at '\n' or at '\r' (progress bars redraw with '\r': each redraw is emitted whole with
// its tag, so the bar keeps its tag and is never split). Segments are written with one write()
// each from the launcher's single I/O thread, so lines of two ranks never interleave mid-line;
// when another rank prints while a '\r' line is open, the open line is closed with '\n' first.
//
// Untagged (--tag-output=false), a stream is a byte-exact pass-through: its bytes reach the
// destination as they came, nothing added (no '\n' at the end, none before another rank's
// line) and nothing dropped; only the split into writes still follows the line ends.
//
// Threads: everything here runs on the launcher's I/O thread.
#pragma once

#include <deque>
#include <string>
#include <string_view>

namespace hvrun::launcher {

// Whether the line last written to a destination is still open (it ended with '\r'), and by
// whom. hvrun's stdout and stderr share one when they are the same file (a terminal, 2>&1).
struct OpenLine {
  const void* owner = nullptr;
  bool open = false;
};

// One destination (hvrun's stdout or stderr).
class OutputSink {
 public:
  explicit OutputSink(int fd) : fd_(fd), line_(&own_line_) {}
  // `shared` outlives the sink; it is shared with the other sink writing to the same file.
  OutputSink(int fd, OpenLine& shared) : fd_(fd), line_(&shared) {}
  OutputSink(const OutputSink&) = delete;
  OutputSink& operator=(const OutputSink&) = delete;

  // Writes `tag` + `segment` as one unit. `owner` identifies the writing stream, so that a line
  // left open by a '\r' can be closed when another stream writes.
  void write_segment(const void* owner, std::string_view tag, std::string_view segment);

  // The stream `owner` wrote "\r" and then "\n": ends its open line, if it is still open.
  void close_line_of(const void* owner);

  // hvrun's own messages (one or more whole lines).
  void write_message(std::string_view text) { write_segment(nullptr, "", text); }

  // Bytes of an untagged stream, as they are: no line is closed before them, none opened.
  void write_raw(std::string_view bytes) { write_all(bytes); }

 private:
  void write_all(std::string_view bytes);

  int fd_;
  OpenLine own_line_;
  OpenLine* line_;  // &own_line_, or shared with the sink of the same file
  std::string scratch_;
};

// Whether two descriptors are the same open file (same device and inode): a terminal, or 2>&1.
bool same_file(int fd_a, int fd_b);

// One worker stream (rank r's stdout or stderr).
class TaggedStream {
 public:
  // `tag` empty and no `timestamps`: the bytes pass through exactly. `copy_fd` >= 0 receives
  // the raw bytes (--output-filename). `timestamps`: each line starts with the local time it
  // was emitted, as Horovod writes it ("Wed Dec  2 02:14:35 2026"), before the tag.
  TaggedStream(std::string tag, OutputSink& sink, int copy_fd, size_t keep_last_lines,
               bool timestamps = false);
  ~TaggedStream();
  TaggedStream(const TaggedStream&) = delete;
  TaggedStream& operator=(const TaggedStream&) = delete;

  void feed(std::string_view bytes);
  // End of the stream: a last line without '\n' is emitted with one (untagged: as it is).
  void finish();

  // The last lines seen (without terminators), oldest first: for the failure summary.
  const std::deque<std::string>& last_lines() const { return last_lines_; }

  // A line longer than this is emitted in pieces, each ended with '\n'.
  static constexpr size_t kMaxLine = 1 << 20;

 private:
  void feed_raw(std::string_view bytes);
  void emit(std::string_view segment);
  void remember(std::string_view segment);

  bool line_by_line() const { return !tag_.empty() || timestamps_; }

  std::string tag_;
  bool timestamps_;
  OutputSink& sink_;
  int copy_fd_;
  size_t keep_last_lines_;
  std::string pending_;
  bool after_cr_ = false;  // the last emitted segment ended with a lone '\r'
  std::deque<std::string> last_lines_;
};

}  // namespace hvrun::launcher

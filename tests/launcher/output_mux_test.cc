#include "launcher/process/output_mux.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "tests/support/subprocess.h"

namespace hvrun::launcher {
namespace {

// Captures what a sink writes in a temporary file.
class Capture {
 public:
  Capture() : file_(std::tmpfile()) {}
  ~Capture() { std::fclose(file_); }
  int fd() const { return fileno(file_); }
  std::string text() const {
    std::string out;
    char buf[4096];
    for (off_t off = 0;;) {
      ssize_t n = ::pread(fd(), buf, sizeof buf, off);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
      off += n;
    }
    return out;
  }

 private:
  FILE* file_;
};

TEST(OutputMuxTest, TagsWholeLinesAcrossPartialReads) {
  Capture cap;
  OutputSink sink(cap.fd());
  TaggedStream r0("[0]<stdout>:", sink, -1, 0), r1("[1]<stdout>:", sink, -1, 0);
  r0.feed("hel");
  r1.feed("wor");
  r0.feed("lo\nsecond");
  r1.feed("ld\n");
  r0.feed(" line\n");
  EXPECT_EQ(cap.text(), "[0]<stdout>:hello\n[1]<stdout>:world\n[0]<stdout>:second line\n");
}

// horovodrun --prefix-output-with-timestamp's form: "{asctime}[rank]<stream>:line", also
// without the rank tag.
TEST(OutputMuxTest, TimestampsStartEachLine) {
  Capture cap;
  OutputSink sink(cap.fd());
  TaggedStream tagged("[0]<stdout>:", sink, -1, 0, /*timestamps=*/true);
  TaggedStream bare("", sink, -1, 0, /*timestamps=*/true);
  tagged.feed("one\ntwo\n");
  bare.feed("three\n");
  const std::string stamp = R"([A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9]\d \d\d:\d\d:\d\d \d{4})";
  EXPECT_TRUE(std::regex_match(cap.text(), std::regex(stamp + R"(\[0\]<stdout>:one\n)" + stamp +
                                                      R"(\[0\]<stdout>:two\n)" + stamp +
                                                      "three\n")))
      << cap.text();
}

TEST(OutputMuxTest, ProgressBarsKeepTheirTagAndOthersStartOnAFreshLine) {
  Capture cap;
  OutputSink sink(cap.fd());
  TaggedStream r0("[0]:", sink, -1, 0), r1("[1]:", sink, -1, 0);
  r0.feed("\r10%");
  r0.feed("\r20%");  // this redraw's '\r' completes the previous one: "10%" goes out
  r1.feed("line\n");  // the open bar line is ended first
  r0.feed("\r30%\n");
  EXPECT_EQ(cap.text(), "[0]:10%\r\n[1]:line\n[0]:20%\r[0]:30%\n");
}

TEST(OutputMuxTest, StdoutAndStderrOfOneTerminalShareTheOpenLine) {
  Capture cap;
  OpenLine shared;
  OutputSink out(cap.fd(), shared), err(cap.fd(), shared);
  TaggedStream bar("[0]<stdout>:", out, -1, 0), warn("[1]<stderr>:", err, -1, 0);
  bar.feed("50%\r");
  warn.feed("careful\n");
  EXPECT_EQ(cap.text(), "[0]<stdout>:50%\r\n[1]<stderr>:careful\n");
  Capture other;
  EXPECT_TRUE(same_file(cap.fd(), cap.fd()));
  EXPECT_FALSE(same_file(cap.fd(), other.fd()));
}

TEST(OutputMuxTest, CarriageReturnNewlineSplitAcrossReadsIsOneLineEnd) {
  Capture cap;
  OutputSink sink(cap.fd());
  TaggedStream r0("[0]:", sink, -1, 0);
  r0.feed("dos\r");
  r0.feed("\nnext\r\n");
  EXPECT_EQ(cap.text(), "[0]:dos\r\n[0]:next\r\n");
}

TEST(OutputMuxTest, FinishEndsALastLineAndCopiesAndTailAreKept) {
  Capture cap, copy;
  OutputSink sink(cap.fd());
  {
    TaggedStream err("[2]<stderr>:", sink, ::dup(copy.fd()), 2);
    err.feed("one\ntwo\nthree\npartial");
    err.finish();
    ASSERT_EQ(err.last_lines().size(), 2u);
    EXPECT_EQ(err.last_lines()[0], "three");
    EXPECT_EQ(err.last_lines()[1], "partial");
  }
  EXPECT_EQ(cap.text(),
            "[2]<stderr>:one\n[2]<stderr>:two\n[2]<stderr>:three\n[2]<stderr>:partial\n");
  EXPECT_EQ(copy.text(), "one\ntwo\nthree\npartial");
}

TEST(OutputMuxTest, OverlongLinesArePiecedNotLost) {
  Capture cap;
  OutputSink sink(cap.fd());
  TaggedStream r0("[0]:", sink, -1, 0);
  r0.feed(std::string(TaggedStream::kMaxLine + 10, 'x'));
  r0.finish();
  std::string text = cap.text();
  EXPECT_EQ(text, "[0]:" + std::string(TaggedStream::kMaxLine, 'x') + "\n[0]:" +
                      std::string(10, 'x') + "\n");
}

// docs/launcher.md says where a line stops being whole, and what happens past it.
TEST(OutputMuxTest, TheLauncherManualStatesTheLineLimit) {
  static_assert(TaggedStream::kMaxLine == 1 << 20, "docs/launcher.md says 1 MiB");
  std::ifstream in(test::source_dir() + "/docs/launcher.md");
  const std::string manual((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(manual.empty());
  EXPECT_NE(manual.find("Every line a worker prints, up to 1 MiB, reaches"), std::string::npos);
  EXPECT_NE(manual.find("A longer line is cut into pieces of 1 MiB"), std::string::npos);
}

}  // namespace
}  // namespace hvrun::launcher

// A worker for the output tests: prints LINES lines of LENGTH copies of one letter per rank
// ('a' + HVRUN_RANK), each line in several write() calls so that hvrun sees partial lines, then a
// progress bar redrawn STEPS times with '\r' and ended with '\n'.
//   output_printer LINES LENGTH STEPS
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace {

void write_all(const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(1, s.data() + done, s.size() - done);
    if (n <= 0) std::exit(1);
    done += static_cast<size_t>(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const int lines = std::atoi(argv[1]);
  const size_t length = static_cast<size_t>(std::atoi(argv[2]));
  const int steps = std::atoi(argv[3]);
  const char* rank = std::getenv("HVRUN_RANK");
  const char letter = static_cast<char>('a' + (rank != nullptr ? std::atoi(rank) : 0));
  const std::string line(length, letter);
  for (int i = 0; i < lines; ++i) {
    // Three pieces: the line's start, its middle, its end with the newline.
    write_all(line.substr(0, length / 3));
    write_all(line.substr(length / 3, length / 3));
    write_all(line.substr(2 * (length / 3)) + "\n");
  }
  for (int s = 1; s <= steps; ++s)
    write_all("\r" + std::string(1, letter) + " progress " + std::to_string(s) + "/" +
              std::to_string(steps));
  write_all("\n");
  return 0;
}

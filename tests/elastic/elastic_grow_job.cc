// An elastic trainer on the C++ API for elastic_placement_test.cc: every step allreduces 1.0
// and commits. Each rank says where it runs at every (re)start of its training:
// "MEMBER launched-as <HVRUN_RANK> host <hostname> rank <r> size <s>". ELASTIC_GROW="FILE:STEP:TEXT"
// makes rank 0 write TEXT (the discovery script's input) into FILE at step STEP; ELASTIC_DONE
// ="FILE:TEXT" makes rank 0 write TEXT into FILE once its training is over (after the last
// commit), so that the script offers a slot just as the ranks finish; ELASTIC_LINGER_MS keeps
// every rank alive that long after its training (as a trainer saving its model would).
// ELASTIC_STEPS and ELASTIC_STEP_MS set the length. TEXT's lines are separated by commas.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "hvrun/elastic.h"

namespace {
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

// "FILE:REST" -> {FILE, REST}; both empty when `name` is not set.
std::pair<std::string, std::string> file_and_rest(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return {};
  const std::string text(v);
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return {};
  return {text.substr(0, colon), text.substr(colon + 1)};
}

void write_text(const std::string& path, const std::string& text) {
  // Written aside and renamed: the discovery script never reads half of it.
  const std::string part = path + ".part";
  std::ofstream(part) << text;
  std::rename(part.c_str(), path.c_str());
}

std::string unescape_lines(std::string text) {
  for (size_t at = text.find(','); at != std::string::npos; at = text.find(',', at))
    text[at] = '\n';
  return text + "\n";
}
}  // namespace

int main() {
  const int launched_as = env_int("HVRUN_RANK", -1);
  const int steps = env_int("ELASTIC_STEPS", 20);
  const int step_ms = env_int("ELASTIC_STEP_MS", 0);
  auto [grow_file, grow_rest] = file_and_rest("ELASTIC_GROW");
  const size_t grow_colon = grow_rest.find(':');
  const int grow_step = grow_colon == std::string::npos ? -1 : std::atoi(grow_rest.c_str());
  const std::string grow_text =
      grow_colon == std::string::npos ? "" : unescape_lines(grow_rest.substr(grow_colon + 1));
  const auto [done_file, done_text] = file_and_rest("ELASTIC_DONE");
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);

  double total = 0;
  int64_t step = 0;
  int size = 0;
  int rank = -1;
  hvrun::elastic::State state;
  if (!state.add("total", &total, sizeof total).is_ok() ||
      !state.add("step", &step, sizeof step).is_ok())
    return 2;
  hvrun::Status status = hvrun::elastic::run(state, [&](hvrun::Worker& w, hvrun::elastic::State& st) {
    size = w.size();
    rank = w.rank();
    std::printf("MEMBER launched-as %d host %s rank %d size %d\n", launched_as, host, rank, size);
    std::fflush(stdout);
    while (step < steps) {
      if (rank == 0 && step == grow_step && !grow_file.empty()) write_text(grow_file, grow_text);
      double one = 1.0;
      HVRUN_RETURN_IF_ERROR(
          w.allreduce("one", hvrun::TensorView{&one, hvrun::DataType::kFloat64, {1}, {}, nullptr}));
      total += one;
      ++step;
      if (step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
      HVRUN_RETURN_IF_ERROR(st.commit(w));
    }
    return hvrun::Status::ok();
  });
  if (!status.is_ok()) {
    std::fprintf(stderr, "elastic run failed: %s\n", status.to_string().c_str());
    return 1;
  }
  if (rank == 0 && !done_file.empty()) write_text(done_file, unescape_lines(done_text));
  if (rank == 0) std::printf("DONE size %d total %.0f\n", size, total);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::milliseconds(env_int("ELASTIC_LINGER_MS", 0)));
  return 0;
}

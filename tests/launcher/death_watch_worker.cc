// A worker for the agent's death-watch test: holds the slot hvrun's agent gave it
// (HVRUN_DEATH_WATCH), as the worker library does from init(), and N MiB of memory it has
// written, whose release keeps its death going for a while after SIGKILL (as a PyTorch process's
// does), then says "held" and waits to be killed. Without a slot it says "unwatched".
//
//   launcher_death_watch_worker MIB
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "worker_lib/runtime/death_watch_holder.h"

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 0;
  std::vector<char> memory(mib << 20);
  std::memset(memory.data(), 1, memory.size());
  const char* assignment = std::getenv("HVRUN_DEATH_WATCH");
  std::unique_ptr<hvrun::detail::DeathWatchHolder> held;
  if (assignment != nullptr) {
    auto holder = hvrun::detail::DeathWatchHolder::hold(assignment);
    if (!holder.is_ok()) {
      std::fprintf(stderr, "cannot hold %s: %s\n", assignment, holder.status().message().c_str());
      return 3;
    }
    held = std::move(holder).value();
  }
  std::printf("%s\n", held ? "held" : "unwatched");
  std::fflush(stdout);
  while (true) ::pause();
}

#include "worker_lib/backends/nccl/communicator_carry.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <utility>

namespace hvrun::detail {
namespace {

constexpr const char* kHeld = "held";
constexpr const char* kNone = "none";
constexpr const char* kShrinkPrefix = "shrink:";

struct Slot {
  std::mutex mutex;
  std::optional<CarriedCommunicator> carried;  // mutex
};

// Never destroyed: a plane still parked when the process exits is left to the exit, since
// freeing CUDA and NCCL state from a static destructor may run after the CUDA runtime's own.
Slot& slot() {
  static Slot* const s = new Slot;
  return *s;
}

std::string fnv_hex(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

std::string ranks_text(std::span<const int> ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? "," : "") + std::to_string(ranks[i]);
  return text;
}

struct Held {
  bool held = false;
  CommunicatorLineage lineage;
  std::string why_not;
};

Held parse_held(const std::string& text) {
  Held h;
  std::istringstream in(text);
  std::string kind;
  std::getline(in, kind, '\t');
  if (kind == kHeld) {
    std::string rank, size;
    std::getline(in, h.lineage.tag, '\t');
    std::getline(in, rank, '\t');
    std::getline(in, size);
    h.lineage.rank = std::atoi(rank.c_str());
    h.lineage.size = std::atoi(size.c_str());
    h.held = !h.lineage.tag.empty() && h.lineage.size > 0;
    if (!h.held) h.why_not = "its communicator's description is malformed (protocol error)";
  } else {
    std::getline(in, h.why_not);
  }
  return h;
}

std::string after_reset(const std::string& why) { return "init (a new unique id) after an elastic reset: " + why; }

}  // namespace

std::string lineage_tag_of_init(const std::string& unique_id) { return fnv_hex(unique_id); }

std::string lineage_tag_of_shrink(const std::string& parent_tag, std::span<const int> excluded) {
  return fnv_hex(parent_tag + "/" + ranks_text(excluded));
}

void carry_communicator(CarriedCommunicator carried) {
  std::optional<CarriedCommunicator> previous;
  {
    std::lock_guard<std::mutex> lock(slot().mutex);
    previous = std::exchange(slot().carried, std::move(carried));
  }
  // `previous` (never taken) goes here, outside the lock.
}

std::optional<CarriedCommunicator> take_carried_communicator() {
  std::lock_guard<std::mutex> lock(slot().mutex);
  return std::exchange(slot().carried, std::nullopt);
}

std::string held_text(const CommunicatorLineage& lineage, const std::string& why_not) {
  if (lineage.tag.empty()) return why_not.empty() ? std::string() : std::string(kNone) + "\t" + why_not;
  return std::string(kHeld) + "\t" + lineage.tag + "\t" + std::to_string(lineage.rank) + "\t" +
         std::to_string(lineage.size);
}

RebuildChoice choose_rebuild(std::span<const std::string> held_by_rank) {
  std::vector<Held> held;
  for (const std::string& text : held_by_rank) held.push_back(parse_held(text));
  const int n = static_cast<int>(held.size());
  int holders = 0;
  for (const Held& h : held) holders += h.held ? 1 : 0;
  if (holders == 0) {
    for (int r = 0; r < n; ++r)
      if (!held[r].why_not.empty())
        return {.how = after_reset("rank " + std::to_string(r) + " kept no communicator: " + held[r].why_not)};
    return {.how = "init (a new unique id): no rank holds a communicator of an earlier membership"};
  }
  for (int r = 0; r < n; ++r) {
    if (held[r].held) continue;
    if (held[r].why_not.empty())
      return {.how = after_reset("rank " + std::to_string(r) + " joined, holding no communicator of the last "
                                 "membership (a shrink only takes ranks away)")};
    return {.how = after_reset("rank " + std::to_string(r) + " kept no communicator: " + held[r].why_not)};
  }
  const CommunicatorLineage& first = held[0].lineage;
  for (int r = 1; r < n; ++r) {
    const CommunicatorLineage& l = held[r].lineage;
    if (l.tag != first.tag || l.size != first.size)
      return {.how = after_reset("rank " + std::to_string(r) + " holds another communicator than rank 0")};
    if (l.rank <= held[r - 1].lineage.rank)
      return {.how = after_reset("rank " + std::to_string(r) + " was rank " + std::to_string(l.rank) + " and rank " +
                                 std::to_string(r - 1) + " was rank " + std::to_string(held[r - 1].lineage.rank) +
                                 ": a shrink keeps the survivors in their old order")};
  }
  if (held.back().lineage.rank >= first.size || first.rank < 0)
    return {.how = after_reset("the old ranks are outside the old communicator (protocol error)")};
  RebuildChoice choice{.shrink = true};
  size_t next = 0;
  for (int old = 0; old < first.size; ++old) {
    if (next < held.size() && held[next].lineage.rank == old) {
      ++next;
      continue;
    }
    choice.excluded.push_back(old);
  }
  choice.how = "shrink of the last membership's " + std::to_string(first.size) + "-rank communicator" +
               (choice.excluded.empty() ? std::string(" (no rank left)")
                                        : " without rank(s) " + ranks_text(choice.excluded));
  return choice;
}

std::string shrink_answer(std::span<const int> excluded) { return kShrinkPrefix + ranks_text(excluded); }

std::optional<std::vector<int>> parse_shrink_answer(const std::string& answer) {
  if (answer.rfind(kShrinkPrefix, 0) != 0) return std::nullopt;
  std::vector<int> excluded;
  std::istringstream in(answer.substr(std::string(kShrinkPrefix).size()));
  for (std::string rank; std::getline(in, rank, ',');) {
    if (rank.empty() || rank.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    excluded.push_back(std::atoi(rank.c_str()));
  }
  return excluded;
}

}  // namespace hvrun::detail

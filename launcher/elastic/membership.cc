#include "launcher/elastic/membership.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace hvrun::launcher {

ElasticMembership::ElasticMembership(ElasticOptions options, std::function<double()> uniform)
    : options_(std::move(options)), uniform_(std::move(uniform)) {
  if (!uniform_) {
    uniform_ = [engine = std::mt19937_64(std::random_device{}())]() mutable {
      return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
    };
  }
}

void ElasticMembership::add(Member member) { members_.push_back(std::move(member)); }

void ElasticMembership::add_spare(Member spare) { spares_.push_back(std::move(spare)); }

namespace {
using Members = std::vector<ElasticMembership::Member>;
Members::iterator find_id(Members& members, int id) {
  return std::find_if(members.begin(), members.end(),
                      [&](const ElasticMembership::Member& m) { return m.id == id; });
}
}  // namespace

bool ElasticMembership::remove_failed(int id, Clock::time_point now) {
  if (auto spare = find_id(spares_, id); spare != spares_.end()) {
    rank_failed_on(spare->slot.host, now);
    spares_.erase(spare);
    return false;
  }
  auto it = find_id(members_, id);
  if (it == members_.end()) return false;
  rank_failed_on(it->slot.host, now);
  members_.erase(it);
  return true;
}

void ElasticMembership::rank_failed_on(const std::string& name, Clock::time_point now) {
  HostState& host = failed_[name];
  if (host.failed_at == now) return;
  count_failure(host, now);
  host.reason.clear();
}

void ElasticMembership::blacklist(const std::string& host, Clock::time_point now,
                                  const std::string& reason) {
  HostState& state = failed_[host];
  count_failure(state, now);
  state.reason = reason;
}

void ElasticMembership::count_failure(HostState& host, Clock::time_point now) {
  host.failed_at = now;
  ++host.failures;
  if (options_.cooldown) {
    const double span = options_.cooldown->max_seconds - options_.cooldown->min_seconds;
    const double seconds = (options_.cooldown->min_seconds + span * uniform_()) *
                           std::pow(2.0, std::min(host.failures - 1, 20));
    host.usable_from = now + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(seconds));
  } else {
    host.usable_from.reset();
  }
}

bool ElasticMembership::remove_finished(int id) {
  if (auto spare = find_id(spares_, id); spare != spares_.end()) {
    spares_.erase(spare);
    return false;
  }
  auto it = find_id(members_, id);
  if (it == members_.end()) return false;
  members_.erase(it);
  return true;
}

std::vector<int> ElasticMembership::unlisted(const std::vector<HostSlots>& hosts) const {
  std::vector<int> ids;
  for (const Members* group : {&members_, &spares_})
    for (const Member& m : *group) {
      const bool listed = std::any_of(hosts.begin(), hosts.end(), [&](const HostSlots& h) {
        return h.host == m.slot.host && m.slot.local_rank < h.slots;
      });
      if (!listed) ids.push_back(m.id);
    }
  return ids;
}

bool ElasticMembership::is_spare(int id) const {
  return std::any_of(spares_.begin(), spares_.end(), [&](const Member& m) { return m.id == id; });
}

std::optional<ElasticMembership::Member> ElasticMembership::promote_spare(
    const std::vector<std::string>& avoid) {
  if (spares_.empty()) return std::nullopt;
  auto it = std::find_if(spares_.begin(), spares_.end(), [&](const Member& m) {
    return std::find(avoid.begin(), avoid.end(), m.slot.host) == avoid.end();
  });
  if (it == spares_.end()) it = spares_.begin();
  Member promoted = *it;
  spares_.erase(it);
  members_.push_back(promoted);
  return promoted;
}

std::vector<ElasticSlot> ElasticMembership::plan() const {
  std::vector<ElasticSlot> slots;
  for (const Member& m : members_) slots.push_back(m.slot);
  return slots;
}

bool ElasticMembership::blacklisted(const std::string& host, Clock::time_point now) const {
  auto it = failed_.find(host);
  if (it == failed_.end()) return false;
  return !it->second.usable_from || now < *it->second.usable_from;
}

bool ElasticMembership::held(const ElasticSlot& slot) const {
  auto holds = [&](const Member& m) { return m.slot == slot; };
  return std::any_of(members_.begin(), members_.end(), holds) ||
         std::any_of(spares_.begin(), spares_.end(), holds);
}

std::vector<ElasticSlot> ElasticMembership::unheld(const std::vector<HostSlots>& hosts,
                                                   Clock::time_point now, int skip,
                                                   int count) const {
  std::vector<ElasticSlot> slots;
  for (const HostSlots& host : hosts) {
    // A script may list far more than the job can take: the rest is never looked at.
    if (count <= 0) break;
    if (blacklisted(host.host, now)) continue;
    for (int k = 0; k < host.slots && count > 0; ++k) {
      const ElasticSlot slot{host.host, k};
      if (held(slot)) continue;
      if (skip > 0) {
        --skip;
        continue;
      }
      slots.push_back(slot);
      --count;
    }
  }
  return slots;
}

std::string ElasticMembership::blacklisting(const std::string& host, Clock::time_point now) const {
  auto it = failed_.find(host);
  if (it == failed_.end()) return "";
  const HostState& state = it->second;
  std::string text =
      std::to_string(state.failures) + " failure" + (state.failures == 1 ? "" : "s") + ", ";
  if (!state.usable_from) return text + "blacklisted for the rest of the job";
  if (now >= *state.usable_from) return text + "cool-down over";
  const auto left = std::chrono::duration<double>(*state.usable_from - now).count();
  return text + "blacklisted for " + std::to_string(static_cast<int>(std::ceil(left))) + " s more";
}

std::vector<ElasticSlot> ElasticMembership::spare_slots(const std::vector<HostSlots>& hosts,
                                                        Clock::time_point now) const {
  const int wanted = options_.spares - static_cast<int>(spares_.size());
  return unheld(hosts, now, 0, wanted);
}

std::vector<ElasticSlot> ElasticMembership::free_slots(const std::vector<HostSlots>& hosts,
                                                       Clock::time_point now) const {
  // Short of --min-np, ranks come first.
  const int for_spares = short_of_min() ? 0 : static_cast<int>(spare_slots(hosts, now).size());
  const int room = options_.max_np > 0 ? options_.max_np - size() : 1 << 30;
  return unheld(hosts, now, for_spares, room);
}

std::vector<std::string> ElasticMembership::failed_hosts(Clock::time_point now) const {
  std::vector<std::string> text;
  for (const auto& [host, state] : failed_)
    text.push_back(host + " (" + blacklisting(host, now) +
                   (state.reason.empty() ? "" : "; " + state.reason) + ")");
  return text;
}

bool ElasticMembership::count_reset() {
  ++resets_;
  return options_.reset_limit == 0 || resets_ <= options_.reset_limit;
}

}  // namespace hvrun::launcher

// An elastic job's membership as the launcher decides it (pure: no processes, no clock of its
// own). The ranks in order, each a process (`id`: the launcher's record of it) in a slot (host,
// local rank); survivors keep their order across resets and added processes go last, so rank
// 0 after a reset is the oldest surviving rank (the one state is broadcast from). A host where a
// rank failed is blacklisted: it gets no new rank until its cool-down ends (never, without
// --blacklist-cooldown-range), and each further failure there doubles the cool-down; its
// other ranks go on. Hot spares (--spares) are processes kept outside the ranks, each in a slot
// of its own: a lost rank's place goes to one (it joins last, as added processes do), so the
// world size stays.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/elastic/elastic_options.h"
#include "launcher/options/options.h"

namespace hvrun::launcher {

struct ElasticSlot {
  std::string host;
  int local_rank = 0;
  bool operator==(const ElasticSlot&) const = default;
};

class ElasticMembership {
 public:
  using Clock = std::chrono::steady_clock;
  struct Member {
    int id = 0;
    ElasticSlot slot;
  };

  // `uniform`: a number in [0, 1) for the cool-down's place in its range.
  explicit ElasticMembership(ElasticOptions options, std::function<double()> uniform = nullptr);

  void add(Member member);
  // A hot spare: no rank until promote_spare() gives it a lost rank's place.
  void add_spare(Member spare);
  // `id` failed: it leaves and its host is blacklisted. False when it was no member (a spare
  // that failed leaves the spares and blacklists its host too, but is no member). Ranks of one
  // host that fail at the same `now` (its agent was lost) count as one failure of it.
  bool remove_failed(int id, Clock::time_point now);
  // `host` failed its health check (`reason`): blacklisted as if a rank had failed there.
  void blacklist(const std::string& host, Clock::time_point now, const std::string& reason);
  // `id` exited 0, or was withdrawn: it leaves (its host stays usable). False when it was no
  // member (a spare leaves the spares).
  bool remove_finished(int id);
  // Members and spares whose slot `hosts` no longer has (its host missing, or fewer slots
  // there), by id.
  std::vector<int> unlisted(const std::vector<HostSlots>& hosts) const;

  const std::vector<Member>& spares() const { return spares_; }
  bool is_spare(int id) const;
  // A spare becomes the last rank: one on a host outside `avoid` (the hosts that just lost
  // ranks) first, else any. None when no spare is left.
  std::optional<Member> promote_spare(const std::vector<std::string>& avoid);
  // Slots of `hosts` for new spares, as many as --spares lacks: unheld, on hosts not cooling
  // down, in the hosts' order; --max-np does not count spares.
  std::vector<ElasticSlot> spare_slots(const std::vector<HostSlots>& hosts,
                                       Clock::time_point now) const;

  const std::vector<Member>& members() const { return members_; }
  std::vector<ElasticSlot> plan() const;
  int size() const { return static_cast<int>(members_.size()); }
  bool short_of_min() const { return size() < options_.min_np; }
  const ElasticOptions& options() const { return options_; }

  // Slots of `hosts` that no member or spare holds, on hosts not cooling down, in the hosts'
  // order, as many as --max-np leaves room for, after the slots spare_slots() gives spares
  // (unless the membership is short of --min-np: then ranks come first).
  std::vector<ElasticSlot> free_slots(const std::vector<HostSlots>& hosts, Clock::time_point now) const;
  bool blacklisted(const std::string& host, Clock::time_point now) const;
  // "localhost (2 failures, blacklisted for the rest of the job)" for each failed host (with the
  // reason of a failed health check).
  std::vector<std::string> failed_hosts(Clock::time_point now) const;
  // "1 failure, blacklisted for 9 s more" of a failed host; empty for one that never failed.
  std::string blacklisting(const std::string& host, Clock::time_point now) const;

  // Counts a reset (a lost rank or added slots); false once --reset-limit is passed.
  bool count_reset();
  int resets() const { return resets_; }

 private:
  struct HostState {
    int failures = 0;
    std::optional<Clock::time_point> usable_from;  // none: never again
    std::optional<Clock::time_point> failed_at;    // the latest failure
    std::string reason;  // why, when the latest failure was not a rank's (a health check)
  };

  // One more failure of `host` at `now`: its cool-down starts again, doubled.
  void count_failure(HostState& host, Clock::time_point now);
  // A rank (or spare) failed on `name` at `now`; ranks of one host failing at the same `now`
  // (its agent was lost) count as one failure of it.
  void rank_failed_on(const std::string& name, Clock::time_point now);
  bool held(const ElasticSlot& slot) const;
  // Up to `count` unheld slots of `hosts` on hosts not cooling down, skipping the first `skip`.
  std::vector<ElasticSlot> unheld(const std::vector<HostSlots>& hosts, Clock::time_point now,
                                  int skip, int count) const;

  ElasticOptions options_;
  std::function<double()> uniform_;
  std::vector<Member> members_;
  std::vector<Member> spares_;
  std::map<std::string, HostState> failed_;
  int resets_ = 0;
};

}  // namespace hvrun::launcher

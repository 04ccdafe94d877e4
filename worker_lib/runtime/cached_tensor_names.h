// The names and shapes behind the coordinator's cache ids, as every rank learns them from the
// plans that assign the ids: a later plan leaves them out for tensors it marks as_cached
// (proto/hvrun.proto), and restore() puts them back before the plan runs. Every rank receives
// every plan, so a rank that did not submit a tensor (joined, or outside its process set) knows
// it by its id as well.
//
// Threads: the plan runner's only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "hvrun.pb.h"

namespace hvrun::detail {

class CachedTensorNames {
 public:
  // Learns the ids `plan` assigns or restates in full, and fills in name and shape of its
  // as_cached tensors. An as_cached tensor whose id no earlier plan gave is a protocol error.
  Status restore(v1::Plan& plan);

 private:
  struct Known {
    std::string name;
    std::vector<int64_t> shape;
  };
  // (process set, cache id): each set numbers its own cache.
  std::map<std::pair<uint32_t, uint32_t>, Known> known_;
};

}  // namespace hvrun::detail

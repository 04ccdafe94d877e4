// Random programs of simulated ranks (fixed seeds): mixed ops, occasional mismatches, duplicates
// and joins. Whatever happens, every tensor ends in exactly one response, nothing stays in
// flight (never a hang), and an error names the ranks involved.
#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "tests/coordinator/engine_sim.h"

namespace hvrun::coordinator {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers

v1::TensorRequest random_tensor(std::mt19937& random, int index) {
  const std::string name = "t" + std::to_string(index);
  switch (random() % 5) {
    case 0: return request(name, v1::COLLECTIVE_OP_ALLGATHER, {2, 3});
    case 1: return request(name, v1::COLLECTIVE_OP_BROADCAST, {4});
    case 2: return request(name, v1::COLLECTIVE_OP_REDUCESCATTER, {8});
    default: return allreduce(name, {static_cast<int64_t>(1 + index % 7)});
  }
}

TEST(RandomPrograms, EveryTensorEndsInExactlyOneResponse) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 random(seed);
    const int world = 1 + static_cast<int>(random() % 8);
    const int tensors = 1 + static_cast<int>(random() % 12);
    Sim sim(world, 64 + random() % 256, std::chrono::microseconds(random() % 2000));
    std::vector<v1::TensorRequest> base;
    for (int t = 0; t < tensors; ++t) base.push_back(random_tensor(random, t));
    // Each rank's program: every tensor once (some with a wrong dtype); a duplicate goes in the
    // same batch as the original, so it is certainly still in flight.
    std::vector<std::vector<std::vector<v1::TensorRequest>>> program(world);
    std::set<std::string> expect_error;
    int duplicates = 0;
    for (int r = 0; r < world; ++r) {
      for (int t : [&] {
             std::vector<int> order(tensors);
             std::iota(order.begin(), order.end(), 0);
             std::shuffle(order.begin(), order.end(), random);
             return order;
           }()) {
        v1::TensorRequest req = base[t];
        if (world > 1 && random() % 10 == 0) {
          req.set_dtype(v1::DATA_TYPE_INT8);  // disagrees with the others
          expect_error.insert(req.name());
        }
        program[r].push_back({req});
        if (random() % 15 == 0) {
          program[r].back().push_back(req);  // submitted again while in flight
          ++duplicates;
        }
      }
    }
    std::vector<size_t> next(world, 0);
    std::vector<int> live(world);
    std::iota(live.begin(), live.end(), 0);
    while (!live.empty()) {
      const size_t pick = random() % live.size();
      const int rank = live[pick];
      sim.submit(rank, program[rank][next[rank]++]);
      if (next[rank] == program[rank].size()) live.erase(live.begin() + pick);
      if (random() % 3 == 0) sim.advance(std::chrono::microseconds(random() % 500));
    }
    sim.advance(std::chrono::seconds(1));
    EXPECT_EQ(sim.engine.in_flight_count(), 0u) << "seed " << seed;

    std::map<std::string, int> completed;
    int duplicate_errors = 0;
    for (const auto& response : sim.responses()) {
      if (response.error_ranks_size() > 0) {
        ++duplicate_errors;
        continue;
      }
      for (const auto& t : response.tensors()) {
        ++completed[t.name()];
        EXPECT_EQ(!response.error().empty(), expect_error.count(t.name()) > 0)
            << "seed " << seed << " " << t.name() << ": " << response.error();
      }
    }
    EXPECT_EQ(duplicate_errors, duplicates) << "seed " << seed;
    EXPECT_EQ(completed.size(), static_cast<size_t>(tensors)) << "seed " << seed;
    for (const auto& [name, count] : completed) EXPECT_EQ(count, 1) << "seed " << seed << " " << name;
  }
}

TEST(RandomPrograms, RanksJoiningAtRandomPointsNeverLeaveTensorsBehind) {
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    std::mt19937 random(seed);
    const int world = 2 + static_cast<int>(random() % 6);
    Sim sim(world);
    // Rank r submits the first k_r of 10 tensors (uneven data), then joins.
    std::vector<int> count(world);
    for (auto& c : count) c = static_cast<int>(random() % 11);
    std::vector<int> next(world, 0);
    std::vector<int> live(world);
    std::iota(live.begin(), live.end(), 0);
    while (!live.empty()) {
      const size_t pick = random() % live.size();
      const int rank = live[pick];
      if (next[rank] < count[rank]) {
        sim.submit(rank, {allreduce("t" + std::to_string(next[rank]++), {3})});
      } else {
        sim.submit(rank, {join_request()});
        live.erase(live.begin() + pick);
      }
    }
    sim.advance(std::chrono::seconds(1));
    EXPECT_EQ(sim.engine.in_flight_count(), 0u) << "seed " << seed;
    const int most = *std::max_element(count.begin(), count.end());
    int tensors = 0;
    int joins = 0;
    for (const auto& response : sim.responses()) {
      EXPECT_EQ(response.error(), "") << "seed " << seed;
      if (response.op() == v1::COLLECTIVE_OP_JOIN) {
        ++joins;
        continue;
      }
      tensors += response.tensors_size();
      const int t = std::stoi(response.tensors(0).name().substr(1));
      int contributing = 0;
      for (int c : count) contributing += c > t ? 1 : 0;
      EXPECT_EQ(response.contributing_ranks(), contributing) << "seed " << seed;
    }
    EXPECT_EQ(tensors, most) << "seed " << seed;
    EXPECT_EQ(joins, 1) << "seed " << seed;
  }
}

}  // namespace
}  // namespace hvrun::coordinator

#include "worker_lib/runtime/cpu_backend_factory.h"

#include <algorithm>
#include <map>

#include "common/logging.h"
#include "worker_lib/agreement/host_rounds/with_host_rounds.h"
#include "worker_lib/backends/gloo/gloo_backend.h"
#include "worker_lib/backends/gloo/mesh_bootstrap.h"
#include "worker_lib/backends/gloo/sparse_plane.h"
#include "worker_lib/backends/shm/hierarchical_backend.h"
#include "worker_lib/backends/shm/shm_backend.h"
#include "worker_lib/agreement/fast_path.h"

namespace hvrun::detail {
namespace {

// Ranks of every host, each list ascending; hosts in the order of their lowest rank.
std::vector<std::vector<int>> ranks_by_host(const std::vector<std::string>& hosts) {
  std::vector<std::vector<int>> groups;
  std::map<std::string, size_t> index;
  for (int r = 0; r < static_cast<int>(hosts.size()); ++r) {
    auto [it, inserted] = index.emplace(hosts[r], groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(r);
  }
  return groups;
}

// `sparse`: pairs only with ranks 2^k apart (gloo/mesh_bootstrap.h), enough for allreduce,
// broadcast and barrier.
Result<std::unique_ptr<Backend>> make_gloo(const CpuBackendContext& c, KeyValueStore& store,
                                           int rank, int size, const std::string& prefix,
                                           bool sparse = false) {
  GlooBackendOptions options{.rank = rank,
                             .size = size,
                             .data_address = c.data_address,
                             .store_prefix = prefix,
                             .connect_timeout = c.connect_timeout,
                             .timeout = c.op_timeout,
                             .sparse = sparse};
  return make_gloo_backend(options, store);
}

// Every rank's Gloo plane: a sparse mesh with the mesh of every rank connected at the first
// allgather or alltoall (gloo/sparse_plane.h), or the full mesh at once where the sparse one
// would pair every rank anyway (up to 5 ranks).
Result<std::unique_ptr<Backend>> make_gloo_plane(const CpuBackendContext& c, KeyValueStore& store,
                                                 int size) {
  if (mesh_peers(0, size, /*sparse=*/true).size() + 1 == static_cast<size_t>(size))
    return make_gloo(c, store, c.rank, size, "gloo");
  HVRUN_ASSIGN_OR_RETURN(auto sparse, make_gloo(c, store, c.rank, size, "gloo-sparse", true));
  // The store outlives the backend (the runtime's coordinator client, or a set's prefix of it).
  return make_sparse_gloo_plane(
      std::move(sparse), [c, &store, size] { return make_gloo(c, store, c.rank, size, "gloo"); });
}

Result<ShmDataPlane> make_host_shm(const CpuBackendContext& c,
                                   const CpuBackendConfig& s, KeyValueStore& store,
                                   const std::vector<int>& group) {
  const int position =
      static_cast<int>(std::find(group.begin(), group.end(), c.rank) - group.begin());
  const std::string& host = c.hosts[c.rank];
  ShmBackendOptions options{.rank = position,
                            .size = static_cast<int>(group.size()),
                            .job_id = c.job_id,
                            .host = host,
                            .chunk_bytes = s.shm_chunk_bytes,
                            .kv_prefix = "shm/" + host,
                            .connect_timeout = c.connect_timeout,
                            .timeout = c.op_timeout};
  return make_shm_data_plane(options, store);
}

// The cross-host rounds of this rank: rank 0 starts the arbiter and publishes its address;
// every host's speaker (its lowest rank) connects and says which host it speaks for.
Result<std::unique_ptr<agreement::HostRounds>> connect_host_rounds(
    const CpuBackendContext& c, KeyValueStore& store, shm::RoundBoard* board, int host_index,
    int hosts, bool speaker, std::unique_ptr<agreement::RoundArbiter>& arbiter) {
  const std::string key = "host-rounds/arbiter";
  if (c.rank == 0) {
    HVRUN_ASSIGN_OR_RETURN(arbiter,
                           agreement::RoundArbiter::start(c.data_address, hosts, c.round_wait));
    HVRUN_RETURN_IF_ERROR(store.set(key, arbiter->address()));
  }
  std::unique_ptr<agreement::RoundLink> link;
  if (speaker) {
    HVRUN_ASSIGN_OR_RETURN(auto address, store.get({key}, c.connect_timeout));
    HVRUN_ASSIGN_OR_RETURN(link, agreement::RoundLink::connect(address.at(0), c.connect_timeout));
    agreement::RoundMessage hello;
    hello.kind = agreement::RoundMessageKind::kHello;
    hello.value = static_cast<uint32_t>(host_index);
    HVRUN_RETURN_IF_ERROR(link->send(hello, nullptr));
  }
  return std::make_unique<agreement::HostRounds>(board, std::move(link), host_index, c.op_timeout);
}

}  // namespace

const char* cpu_backend_kind_name(CpuBackendKind kind) {
  switch (kind) {
    case CpuBackendKind::kGloo:
      return "gloo";
    case CpuBackendKind::kShm:
      return "shm";
    case CpuBackendKind::kHierarchical:
      return "hierarchical (shm within hosts, gloo across)";
  }
  return "?";
}

Result<CpuBackendKind> choose_cpu_backend(const CpuBackendConfig& settings,
                                          const std::vector<std::string>& hosts) {
  if (settings.backend == "gloo" || hosts.size() <= 1) return CpuBackendKind::kGloo;
  auto groups = ranks_by_host(hosts);
  if (groups.size() == 1) return CpuBackendKind::kShm;
  bool shared =
      std::any_of(groups.begin(), groups.end(), [](const auto& g) { return g.size() > 1; });
  bool hierarchical = settings.hierarchical == "on" || (settings.hierarchical == "auto" && shared);
  if (hierarchical) return CpuBackendKind::kHierarchical;
  if (settings.backend == "shm")
    return invalid_argument("--cpu-backend shm on a job over " + std::to_string(groups.size()) +
                            " hosts needs --hierarchical-allreduce on (or auto with more than one "
                            "rank on a host); use --cpu-backend auto or gloo");
  return CpuBackendKind::kGloo;
}

Result<CpuDataPlane> make_cpu_backend(const CpuBackendContext& c,
                                      const CpuBackendConfig& settings, KeyValueStore& store) {
  const int size = static_cast<int>(c.hosts.size());
  if (c.rank < 0 || c.rank >= size)
    return internal_error("rank " + std::to_string(c.rank) + " is not among the " +
                          std::to_string(size) + " ranks the coordinator listed");
  HVRUN_ASSIGN_OR_RETURN(CpuBackendKind kind, choose_cpu_backend(settings, c.hosts));
  spdlog::debug("CPU data plane: {}", cpu_backend_kind_name(kind));
  auto groups = ranks_by_host(c.hosts);
  if (kind == CpuBackendKind::kGloo) {
    HVRUN_ASSIGN_OR_RETURN(auto gloo, make_gloo_plane(c, store, size));
    // Across hosts the steady state's rounds go through the arbiter with every rank speaking
    // for itself (no shm board to meet on); on one host Gloo was asked for: no rounds.
    if (!c.round_agreement || groups.size() < 2) return CpuDataPlane{std::move(gloo), nullptr};
    std::unique_ptr<agreement::RoundArbiter> arbiter;
    HVRUN_ASSIGN_OR_RETURN(auto rounds, connect_host_rounds(c, store, nullptr, c.rank, size,
                                                            true, arbiter));
    RoundAgreement* job_rounds = rounds.get();
    return CpuDataPlane{with_host_rounds(std::move(gloo), std::move(rounds), std::move(arbiter)),
                        job_rounds};
  }
  const std::vector<int>* mine = nullptr;
  int host_index = 0;  // hosts in the order of their lowest rank
  for (size_t h = 0; h < groups.size(); ++h)
    if (std::find(groups[h].begin(), groups[h].end(), c.rank) != groups[h].end()) {
      mine = &groups[h];
      host_index = static_cast<int>(h);
    }
  if (kind == CpuBackendKind::kShm) {
    HVRUN_ASSIGN_OR_RETURN(ShmDataPlane shm, make_host_shm(c, settings, store, *mine));
    return CpuDataPlane{std::move(shm.backend), shm.board};
  }

  HierarchicalParts parts;
  parts.rank = c.rank;
  parts.size = size;
  HVRUN_ASSIGN_OR_RETURN(ShmDataPlane host, make_host_shm(c, settings, store, *mine));
  parts.host = std::move(host.backend);
  if (mine->front() == c.rank) {
    // The leaders run allreduce, broadcast and barrier only (allgather and alltoall take the
    // mesh of every rank): 2 log2(hosts) pairs each instead of a pair per host.
    HVRUN_ASSIGN_OR_RETURN(parts.leaders, make_gloo(c, store, host_index,
                                                    static_cast<int>(groups.size()),
                                                    "gloo-leaders", /*sparse=*/true));
  }
  parts.host_of.resize(static_cast<size_t>(size));
  parts.position_of.resize(static_cast<size_t>(size));
  for (size_t h = 0; h < groups.size(); ++h)
    for (size_t p = 0; p < groups[h].size(); ++p) {
      parts.host_of[static_cast<size_t>(groups[h][p])] = static_cast<int>(h);
      parts.position_of[static_cast<size_t>(groups[h][p])] = static_cast<int>(p);
    }
  // The store outlives the backend (the runtime's coordinator client, or a set's prefix of it).
  parts.connect_world = [c, &store, size] { return make_gloo(c, store, c.rank, size, "gloo"); };
  auto plane = make_hierarchical_backend(std::move(parts));
  // Made whatever --fast-path says, as a single host's board is: a rank with it off refuses
  // every round, so peers whose setting differs fall back at once. Not on a process set's plane.
  if (!c.round_agreement) return CpuDataPlane{std::move(plane), nullptr};
  std::unique_ptr<agreement::RoundArbiter> arbiter;
  HVRUN_ASSIGN_OR_RETURN(auto rounds, connect_host_rounds(c, store, host.board, host_index,
                                                          static_cast<int>(groups.size()),
                                                          mine->front() == c.rank, arbiter));
  RoundAgreement* job_rounds = rounds.get();
  // The wrapper owns the rounds and the arbiter and ends them before the plane, whose segment
  // holds the board the rounds use.
  return CpuDataPlane{with_host_rounds(std::move(plane), std::move(rounds), std::move(arbiter)),
                      job_rounds};
}

Result<CpuDataPlane> make_cpu_backend_for_job(const Config& config,
                                              const Registration& registered,
                                              KeyValueStore& store) {
  CpuBackendConfig settings = config.cpu_backend;
  CpuBackendContext context{.rank = registered.topology.rank,
                            .hosts = registered.hosts,
                            .job_id = registered.response.job_id(),
                            .data_address = config.data_address,
                            .connect_timeout = config.start_timeout,
                            .op_timeout = config.op_timeout,
                            .round_wait = round_wait(config.fast_path, config.op_timeout)};
  // A coordinator that gives no placement leaves it unknown: Gloo works everywhere.
  if (context.hosts.empty()) {
    settings.backend = "gloo";
    context.hosts.assign(static_cast<size_t>(registered.topology.size), config.host);
  }
  return make_cpu_backend(context, settings, store);
}

}  // namespace hvrun::detail

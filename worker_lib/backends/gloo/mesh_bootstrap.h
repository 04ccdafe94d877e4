// Connects a Gloo context's pairs through hvrun's key-value store: for a full mesh, what
// gloo::rendezvous::Context::connectFullMesh does, without its cube. Gloo's publishes, under each
// rank's key, the address of every one of its pairs (O(N) bytes a key) and makes every rank read
// every key whole, one request at a time: O(N^2) bytes and 2N requests per rank, O(N^3) bytes
// through the coordinator in all (about 18 GB for 512 ranks). Here rank i publishes the address
// of its pair with rank j under its own key "<prefix>/i/j", all of them in one request, and reads
// the addresses meant for it ("<prefix>/j/i") in one request: O(N) bytes and two requests per
// rank, O(N^2) bytes in all, as a full mesh's N^2 pairs need. Every pair then connects as in
// Gloo's (one side waits for the other's connection), in rank order.
//
// A sparse mesh connects a rank only with the ranks 2^k apart either way round the ring (k = 0,
// 1, ...): the pairs Gloo's ring allreduce (rank +- 1), its binomial-tree broadcast from any root
// and its dissemination barrier (+- 2^k mod N) use, 2 log2(N) pairs per rank instead of N - 1.
// Allgather and alltoall need every pair: not on a sparse mesh.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker_lib/kv_store.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace hvrun::detail {

struct MeshBootstrap {
  int rank = 0;
  int size = 1;
  std::string key_prefix;  // this mesh's keys in the store: "<prefix>/<rank>/<peer>"
  std::chrono::milliseconds timeout{30000};  // the store's reads and every pair's connection
  bool sparse = false;                       // pairs only with ranks 2^k apart (above)
};

// The ranks `rank` has a pair with, ascending (never itself).
std::vector<int> mesh_peers(int rank, int size, bool sparse);

// A context whose pairs (to every other rank, or to mesh_peers() when sparse) are connected on
// `device` (a TCP device), or why not. Every rank of the mesh calls it with the same size,
// prefix and sparseness.
Result<std::shared_ptr<gloo::Context>> connect_mesh(
    const MeshBootstrap& mesh, const std::shared_ptr<gloo::transport::Device>& device,
    KeyValueStore& store);

}  // namespace hvrun::detail

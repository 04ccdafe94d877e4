// The Gloo data plane of a job on Gloo alone (one rank per host, or --hierarchical-allreduce
// off) without a full mesh at start: allreduce, broadcast and barrier run on a sparse mesh (each
// rank paired with the ranks 2^k apart: mesh_bootstrap.h), allgatherv and alltoallv on the mesh
// of every rank, connected at their first call (lazy_mesh.h). So a job that only allreduces
// starts with 2 log2(N) pairs per rank instead of N - 1.
#pragma once

#include <memory>

#include "worker_lib/backend.h"
#include "worker_lib/backends/gloo/lazy_mesh.h"

namespace hvrun::detail {

// `sparse`: the sparse mesh's Gloo backend; `connect_full`: connects the mesh of every rank.
std::unique_ptr<Backend> make_sparse_gloo_plane(std::unique_ptr<Backend> sparse,
                                                LazyMesh::Connect connect_full);

}  // namespace hvrun::detail

#include "worker_lib/backends/gloo/lazy_mesh.h"

#include "common/logging.h"

namespace hvrun::detail {

Result<Backend*> LazyMesh::get() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (mesh_) return mesh_.get();
    if (!aborted_.empty()) return aborted("the data plane was aborted: " + aborted_);
  }
  spdlog::debug("{}", why_);
  HVRUN_ASSIGN_OR_RETURN(auto mesh, connect_());
  std::lock_guard<std::mutex> lock(mutex_);
  mesh_ = std::move(mesh);
  if (!aborted_.empty()) mesh_->abort(aborted_);
  return mesh_.get();
}

void LazyMesh::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = reason;
  if (mesh_) mesh_->abort(reason);
}

}  // namespace hvrun::detail

#include "worker_lib/backends/gloo/mesh_bootstrap.h"

#include <exception>
#include <vector>

#include <gloo/context.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>

#include "common/logging.h"

namespace hvrun::detail {
namespace {

// A context that adopts pairs connected here (gloo::Context keeps its transport protected).
class MeshContext final : public gloo::Context {
 public:
  MeshContext(int rank, int size) : gloo::Context(rank, size) {}
  void adopt(std::shared_ptr<gloo::transport::Device> device,
             std::shared_ptr<gloo::transport::Context> pairs) {
    device_ = std::move(device);
    transportContext_ = std::move(pairs);
  }
};

}  // namespace

std::vector<int> mesh_peers(int rank, int size, bool sparse) {
  std::vector<bool> paired(static_cast<size_t>(size), !sparse);
  for (int apart = 1; sparse && apart < size; apart *= 2) {
    paired[static_cast<size_t>((rank + apart) % size)] = true;
    paired[static_cast<size_t>((rank - apart % size + size) % size)] = true;
  }
  std::vector<int> peers;
  for (int r = 0; r < size; ++r)
    if (r != rank && paired[static_cast<size_t>(r)]) peers.push_back(r);
  return peers;
}

Result<std::shared_ptr<gloo::Context>> connect_mesh(
    const MeshBootstrap& mesh, const std::shared_ptr<gloo::transport::Device>& device,
    KeyValueStore& store) {
  auto key = [&](int from, int to) {
    return mesh.key_prefix + "/" + std::to_string(from) + "/" + std::to_string(to);
  };
  const std::string where = "rank " + std::to_string(mesh.rank) + " of " +
                            std::to_string(mesh.size) + " (keys " + mesh.key_prefix + "/*)";
  try {
    std::shared_ptr<gloo::transport::Context> pairs = device->createContext(mesh.rank, mesh.size);
    pairs->setTimeout(mesh.timeout);
    const std::vector<int> peers = mesh_peers(mesh.rank, mesh.size, mesh.sparse);
    KeyValueStore::Entries mine;
    std::vector<std::string> theirs;
    for (int r : peers) {
      const std::vector<char> address = pairs->createPair(r)->address().bytes();
      mine.emplace_back(key(mesh.rank, r), std::string(address.begin(), address.end()));
      theirs.push_back(key(r, mesh.rank));
    }
    if (!mine.empty()) {
      if (Status set = store.set_many(mine); !set.is_ok())
        return unavailable("Gloo mesh, " + where + ": publishing its addresses: " +
                           set.message());
      auto addresses = store.get(theirs, mesh.timeout);
      if (!addresses.is_ok())
        return unavailable("Gloo mesh, " + where + ": reading the other ranks' addresses: " +
                           addresses.status().message());
      size_t next = 0;
      for (int r : peers) {
        const std::string& address = (*addresses)[next++];
        pairs->getPair(r)->connect(std::vector<char>(address.begin(), address.end()));
      }
    }
    spdlog::debug("Gloo mesh {}: rank {} of {} connected with {} peers{}", mesh.key_prefix,
                  mesh.rank, mesh.size, peers.size(), mesh.sparse ? " (sparse)" : "");
    auto context = std::make_shared<MeshContext>(mesh.rank, mesh.size);
    context->setTimeout(mesh.timeout);
    context->adopt(device, std::move(pairs));
    return std::shared_ptr<gloo::Context>(std::move(context));
  } catch (const std::exception& e) {
    return unavailable("Gloo mesh, " + where + ": " + e.what());
  }
}

}  // namespace hvrun::detail

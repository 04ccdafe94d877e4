// bench_gloo_mesh: connecting a Gloo full mesh of N ranks (threads of this process, loopback
// TCP), through Gloo's own gloo::rendezvous::Context::connectFullMesh and through hvrun's
// bootstrap (worker_lib/backends/gloo/mesh_bootstrap.h), and hvrun's sparse mesh (pairs only
// with ranks 2^k apart: the host leaders' mesh), all over the same in-memory key-value store,
// which counts what the job's coordinator would serve: requests, and bytes written and read.
// Every way ends with a barrier over its mesh. Prints one row per N and way:
//
//   build/bin/bench_gloo_mesh [--ranks 8,16,32,64] [--json]
//
// The store's counts are exact and do not depend on the machine; the seconds are this machine's
// (every rank's TCP connections share its cores), not a cluster's.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "worker_lib/backends/gloo/mesh_bootstrap.h"
#include "worker_lib/kv_store.h"

namespace {

using Clock = std::chrono::steady_clock;

// An in-memory store, for hvrun's bootstrap and for Gloo's, counting what it serves.
class CountingStore final : public hvrun::detail::KeyValueStore, public gloo::rendezvous::Store {
 public:
  struct Counts {
    uint64_t requests = 0;
    uint64_t bytes_written = 0;
    uint64_t bytes_read = 0;
  };

  hvrun::Status set(const std::string& key, const std::string& value) override {
    return set_many({{key, value}});
  }
  hvrun::Status set_many(const Entries& entries) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++counts_.requests;
      for (const auto& [key, value] : entries) {
        counts_.bytes_written += value.size();
        data_[key] = value;
      }
    }
    cv_.notify_all();
    return hvrun::Status::ok();
  }
  hvrun::Result<std::vector<std::string>> get(const std::vector<std::string>& keys,
                                              std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    ++counts_.requests;
    if (!cv_.wait_for(lock, timeout, [&] { return present(keys); }))
      return hvrun::deadline_exceeded("keys missing");
    std::vector<std::string> values;
    for (const auto& key : keys) {
      values.push_back(data_[key]);
      counts_.bytes_read += values.back().size();
    }
    return values;
  }

  // Gloo's Store: one request per call, as through the coordinator.
  void set(const std::string& key, const std::vector<char>& data) override {
    (void)set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    auto values = get(std::vector<std::string>{key}, std::chrono::seconds(60));
    if (!values.is_ok()) throw std::runtime_error("no key " + key);
    return std::vector<char>((*values)[0].begin(), (*values)[0].end());
  }
  void wait(const std::vector<std::string>& keys) override {
    wait(keys, std::chrono::seconds(60));
  }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    ++counts_.requests;
    if (!cv_.wait_for(lock, timeout, [&] { return present(keys); }))
      throw std::runtime_error("keys missing");
  }

  Counts counts() {
    std::lock_guard<std::mutex> lock(mutex_);
    return counts_;
  }

 private:
  bool present(const std::vector<std::string>& keys) const {
    return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return data_.count(k); });
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;
  Counts counts_;
};

struct Row {
  std::string way;
  int ranks = 0;
  double seconds = 0;
  CountingStore::Counts counts;
  bool ok = true;
};

// Every rank connects (and passes a barrier, as the data plane does before use).
Row connect(const std::string& way, int n) {
  CountingStore store;
  std::vector<std::thread> threads;
  std::vector<int> failed(static_cast<size_t>(n), 0);
  const auto start = Clock::now();
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        gloo::transport::tcp::attr attr;
        attr.hostname = "127.0.0.1";
        std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
        std::shared_ptr<gloo::Context> context;
        if (way == "gloo") {
          auto own = std::make_shared<gloo::rendezvous::Context>(r, n);
          own->setTimeout(std::chrono::seconds(120));
          gloo::rendezvous::Store& gloo_store = store;
          own->connectFullMesh(gloo_store, device);
          context = own;
        } else {
          auto made = hvrun::detail::connect_mesh({.rank = r,
                                                   .size = n,
                                                   .key_prefix = "mesh",
                                                   .timeout = std::chrono::seconds(120),
                                                   .sparse = way == "sparse"},
                                                  device, store);
          if (!made.is_ok()) {
            std::fprintf(stderr, "rank %d: %s\n", r, made.status().to_string().c_str());
            failed[static_cast<size_t>(r)] = 1;
            return;
          }
          context = *made;
        }
        gloo::BarrierOptions barrier(context);
        gloo::barrier(barrier);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        failed[static_cast<size_t>(r)] = 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  Row row{way, n, std::chrono::duration<double>(Clock::now() - start).count(), store.counts()};
  row.ok = std::none_of(failed.begin(), failed.end(), [](int f) { return f != 0; });
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {8, 16, 32, 64};
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ranks" && i + 1 < argc) {
      sizes.clear();
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');)
        sizes.push_back(std::atoi(item.c_str()));
    } else if (a == "--json") {
      json = true;
    } else {
      std::fprintf(stderr, "usage: bench_gloo_mesh [--ranks 8,16,32,64] [--json]\n");
      return 2;
    }
  }
  // Every rank's pairs hold sockets of this one process: 2 (N - 1) per rank.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  if (!json)
    std::printf("%-6s %6s %10s %12s %16s %16s %18s\n", "way", "ranks", "seconds", "requests",
                "bytes_written", "bytes_read", "bytes_read/rank");
  bool all_ok = true;
  for (int n : sizes) {
    for (const char* way : {"gloo", "hvrun", "sparse"}) {
      const Row r = connect(way, n);
      all_ok = all_ok && r.ok;
      if (json)
        std::printf("{\"kind\":\"gloo_mesh\",\"way\":\"%s\",\"ranks\":%d,\"seconds\":%.4f,"
                    "\"requests\":%llu,\"bytes_written\":%llu,\"bytes_read\":%llu,\"ok\":%s}\n",
                    r.way.c_str(), r.ranks, r.seconds,
                    static_cast<unsigned long long>(r.counts.requests),
                    static_cast<unsigned long long>(r.counts.bytes_written),
                    static_cast<unsigned long long>(r.counts.bytes_read), r.ok ? "true" : "false");
      else
        std::printf("%-6s %6d %10.3f %12llu %16llu %16llu %18llu%s\n", r.way.c_str(), r.ranks,
                    r.seconds, static_cast<unsigned long long>(r.counts.requests),
                    static_cast<unsigned long long>(r.counts.bytes_written),
                    static_cast<unsigned long long>(r.counts.bytes_read),
                    static_cast<unsigned long long>(r.counts.bytes_read / static_cast<uint64_t>(n)),
                    r.ok ? "" : "  FAILED");
      std::fflush(stdout);
    }
  }
  return all_ok ? 0 : 1;
}

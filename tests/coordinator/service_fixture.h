// Shared helpers of the service tests: a server on 127.0.0.1:0, registered ranks, event capture.
#pragma once

#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/service/coordinator_server.h"
#include "tests/coordinator/test_client.h"

namespace hvrun::coordinator::testing {

inline CoordinatorOptions options_for(int world_size) {
  CoordinatorOptions options;
  options.world_size = world_size;
  options.secret = kTestSecret;
  options.start_timeout = std::chrono::seconds(10);
  return options;
}

inline std::unique_ptr<CoordinatorServer> start_server(CoordinatorOptions options,
                                                CoordinatorServer::EventCallback on_event = nullptr) {
  auto server = CoordinatorServer::start(std::move(options), std::move(on_event));
  EXPECT_TRUE(server.is_ok()) << server.status().to_string();
  return server.is_ok() ? std::move(server).value() : nullptr;
}

// Registers ranks 0..n-1 concurrently; returns their responses.
inline std::vector<v1::RegisterResponse> register_all(TestClient& client, int n) {
  std::vector<std::future<v1::RegisterResponse>> futures;
  for (int r = 0; r < n; ++r) {
    futures.push_back(std::async(std::launch::async, [&client, r] {
      v1::RegisterResponse response;
      grpc::Status status = client.register_worker(r, "localhost", &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      return response;
    }));
  }
  std::vector<v1::RegisterResponse> responses;
  for (auto& f : futures) responses.push_back(f.get());
  return responses;
}

// Events the server reported, for assertions from the test thread.
struct EventLog {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<CoordinatorEvent> events;
  CoordinatorServer::EventCallback callback() {
    return [this](const CoordinatorEvent& event) {
      std::lock_guard<std::mutex> lock(mutex);
      events.push_back(event);
      changed.notify_all();
    };
  }
  std::optional<CoordinatorEvent> wait_for(CoordinatorEvent::Kind kind) {
    std::unique_lock<std::mutex> lock(mutex);
    std::optional<CoordinatorEvent> found;
    changed.wait_for(lock, std::chrono::seconds(10), [&] {
      for (const auto& e : events) {
        if (e.kind == kind) found = e;
      }
      return found.has_value();
    });
    return found;
  }
};

// Hello + Welcome for ranks 0..n-1 of the current generation.
inline std::vector<std::unique_ptr<TestStream>> open_streams(TestClient& client, int n) {
  std::vector<std::unique_ptr<TestStream>> streams;
  for (int r = 0; r < n; ++r) {
    streams.push_back(std::make_unique<TestStream>(client));
    EXPECT_TRUE(streams.back()->hello(r));
    v1::CoordinatorMessage welcome;
    EXPECT_TRUE(streams.back()->read(&welcome));
    EXPECT_TRUE(welcome.has_welcome()) << welcome.DebugString();
  }
  return streams;
}

// A job of `n` registered ranks with a welcomed stream each.
struct RunningJob {
  explicit RunningJob(int n, CoordinatorServer::EventCallback on_event = nullptr)
      : RunningJob(options_for(n), std::move(on_event)) {}
  // The same with other options (options.world_size ranks).
  explicit RunningJob(CoordinatorOptions options, CoordinatorServer::EventCallback on_event = nullptr)
      : server(start_server(options, std::move(on_event))), client(server->address()) {
    register_all(client, options.world_size);
    streams = open_streams(client, options.world_size);
  }
  std::unique_ptr<CoordinatorServer> server;
  TestClient client;
  std::vector<std::unique_ptr<TestStream>> streams;
};

}  // namespace hvrun::coordinator::testing

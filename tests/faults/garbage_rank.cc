// hvrun_garbage_rank: the ranks of a job in which rank 1 sends the coordinator what it cannot
// parse. The ranks speak plain gRPC (as a foreign or broken client would: the worker library
// refuses to send such a name) and all exit 0, so only the coordinator's verdict can fail the
// job in hvrun.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "hvrun.grpc.pb.h"

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Registers and opens the Negotiate stream over plain gRPC; rank 1 then sends a request whose
// tensor name is not UTF-8 (which the worker library refuses to send). Every rank prints what
// it hears until the stream ends, and exits 0.
int run_rank() {
  const int rank = std::atoi(env("HVRUN_RANK").c_str());
  auto stub = hvrun::v1::Coordinator::NewStub(
      grpc::CreateChannel(env("HVRUN_COORDINATOR_ADDR"), grpc::InsecureChannelCredentials()));
  auto context = [] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->AddMetadata("x-hvrun-secret", env("HVRUN_SECRET"));
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    c->set_wait_for_ready(true);
    return c;
  };
  hvrun::v1::RegisterRequest request;
  request.set_protocol_version(hvrun::v1::PROTOCOL_VERSION_CURRENT);
  request.mutable_worker()->set_host(env("HVRUN_HOST"));
  request.mutable_worker()->set_local_rank(std::atoi(env("HVRUN_LOCAL_RANK").c_str()));
  request.mutable_worker()->set_pid(static_cast<int32_t>(getpid()));
  request.mutable_worker()->set_requested_rank(rank);
  request.mutable_worker()->set_device_kind(hvrun::v1::DEVICE_KIND_CPU);
  hvrun::v1::RegisterResponse registered;
  auto register_context = context();
  if (grpc::Status s = stub->Register(register_context.get(), request, &registered); !s.ok()) {
    std::fprintf(stderr, "rank %d: register: %s\n", rank, s.error_message().c_str());
    return 2;
  }
  auto stream_context = context();
  auto stream = stub->Negotiate(stream_context.get());
  hvrun::v1::WorkerMessage hello;
  hello.mutable_hello()->set_rank(registered.topology().rank());
  stream->Write(hello);
  hvrun::v1::CoordinatorMessage message;
  if (!stream->Read(&message) || !message.has_welcome()) {
    std::fprintf(stderr, "rank %d: no Welcome\n", rank);
    return 2;
  }
  // Rank 1 sends once rank 0's stream is attached (the job's key-value store, bounded), so the
  // abort reaches an attached rank 0 rather than refusing its stream.
  if (rank == 0) {
    hvrun::v1::KvSetRequest set;
    set.set_key("garbage-test.rank0-attached");
    set.set_value("1");
    hvrun::v1::KvSetResponse set_response;
    auto set_context = context();
    if (grpc::Status s = stub->KvSet(set_context.get(), set, &set_response); !s.ok()) {
      std::fprintf(stderr, "rank 0: KvSet: %s\n", s.error_message().c_str());
      return 2;
    }
  }
  if (rank == 1) {
    hvrun::v1::KvGetRequest get;
    get.add_keys("garbage-test.rank0-attached");
    get.set_timeout_ms(20000);
    hvrun::v1::KvGetResponse get_response;
    auto get_context = context();
    if (grpc::Status s = stub->KvGet(get_context.get(), get, &get_response); !s.ok()) {
      std::fprintf(stderr, "rank 1: KvGet: %s\n", s.error_message().c_str());
      return 2;
    }
    hvrun::v1::WorkerMessage garbage;
    hvrun::v1::TensorRequest* t = garbage.mutable_requests()->add_requests();
    t->set_name(std::string("w\xff\xfe"));
    t->set_op(hvrun::v1::COLLECTIVE_OP_ALLREDUCE);
    t->set_dtype(hvrun::v1::DATA_TYPE_FLOAT32);
    t->set_device(hvrun::v1::DEVICE_KIND_CPU);
    t->set_reduce_op(hvrun::v1::REDUCE_OP_SUM);
    t->add_shape(4);
    std::printf("rank 1: sending a request the coordinator cannot parse\n");
    std::fflush(stdout);
    stream->Write(garbage);
  }
  while (stream->Read(&message)) {
    if (message.has_abort())
      std::printf("rank %d: heard JobAbort: %s\n", rank, message.abort().reason().c_str());
  }
  grpc::Status end = stream->Finish();
  std::printf("rank %d: stream ended: %d %s\n", rank, static_cast<int>(end.error_code()),
              end.error_message().c_str());
  return 0;  // whatever happened: the job's verdict is hvrun's to give
}

}  // namespace

int main() {
  // hvrun stops a failed job with SIGTERM to every rank: each still reports what it heard.
  std::signal(SIGTERM, SIG_IGN);
  return run_rank();
}

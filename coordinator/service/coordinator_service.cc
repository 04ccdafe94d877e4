#include "coordinator/service/coordinator_service.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "common/build_info.h"
#include "coordinator/service/auth.h"
#include "coordinator/service/grpc_status.h"
#include "coordinator/service/negotiate_reactor.h"

namespace hvrun::coordinator::service {

namespace {
constexpr int kProtocolVersion = v1::PROTOCOL_VERSION_CURRENT;
// KvGet never waits longer than this, whatever the caller asks.
constexpr std::chrono::milliseconds kLongestKvWait = std::chrono::hours(24);

// How long until the client's deadline (gRPC's "no deadline" is far in the future).
std::chrono::milliseconds until_deadline(const grpc::ServerContext& context) {
  const auto left = context.deadline() - std::chrono::system_clock::now();
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(left));
}
}  // namespace

grpc::ServerUnaryReactor* CoordinatorService::Register(grpc::CallbackServerContext* context,
                                                       const v1::RegisterRequest* request,
                                                       v1::RegisterResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (Status allowed = check_secret(*context, job_.options().secret, "Register");
      !allowed.is_ok()) {
    reactor->Finish(to_grpc(allowed));
    return reactor;
  }
  const v1::WorkerInfo& worker = request->worker();
  if (request->protocol_version() != kProtocolVersion) {
    reactor->Finish(to_grpc(failed_precondition(
        "worker on host " + worker.host() + " (pid " + std::to_string(worker.pid()) +
        ", hvrun " + worker.hvrun_version() + ") speaks hvrun protocol version " +
        std::to_string(request->protocol_version()) + ", this coordinator (hvrun " +
        std::string(build_info().version) + ") speaks version " +
        std::to_string(kProtocolVersion) + "; run the same hvrun version everywhere")));
    return reactor;
  }
  // A worker started for another job (a stale environment, a wrong address) would otherwise
  // take one of this job's ranks and run its collectives with strangers.
  if (!worker.job_id().empty() && worker.job_id() != job_.options().job_id) {
    const std::string refused =
        "worker on host " + worker.host() + " (pid " + std::to_string(worker.pid()) +
        ") belongs to job '" + worker.job_id() + "' (its HVRUN_JOB_ID), but this coordinator "
        "runs job '" + job_.options().job_id + "'; refused. Check HVRUN_COORDINATOR_ADDR, or "
        "start the worker with HVRUN_JOB_ID=" + job_.options().job_id;
    spdlog::warn("rejected Register from {}: {}", context->peer(), refused);
    reactor->Finish(to_grpc(failed_precondition(refused)));
    return reactor;
  }
  SPDLOG_DEBUG("Register from {} host {} pid {} requested rank {}", context->peer(),
               worker.host(), worker.pid(), worker.requested_rank());
  // gRPC keeps the request and the response until Finish.
  job_.register_worker_async(worker, [this, reactor, response](Result<Registered> registered) {
    if (!registered.is_ok()) {
      reactor->Finish(to_grpc(registered.status()));
      return;
    }
    *response->mutable_topology() = registered->topology;
    response->set_job_id(registered->job_id);
    for (const auto& [name, text] : job_.options().job_settings) {
      (*response->mutable_settings())[name] = text;
    }
    v1::WorkerSettings* worker_settings = response->mutable_worker_settings();
    worker_settings->set_heartbeat_timeout_ms(job_.options().heartbeat_timeout.count());
    worker_settings->set_timeline_from_start(!job_.options().timeline_filename.empty());
    worker_settings->set_fusion_threshold_bytes(job_.options().fusion_threshold_bytes);
    worker_settings->set_cycle_time_us(job_.options().cycle_time.count());
    if (registered->placement) response->set_placement(*registered->placement);
    response->set_protocol_version(kProtocolVersion);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::Status CoordinatorService::KvSet(grpc::ServerContext* context,
                                       const v1::KvSetRequest* request, v1::KvSetResponse*) {
  HVRUN_RETURN_IF_ERROR_GRPC(check_secret(*context, job_.options().secret, "KvSet"));
  if (request->key().empty()) return to_grpc(invalid_argument("KvSet: the key is empty"));
  for (const v1::KvEntry& entry : request->more())
    if (entry.key().empty()) return to_grpc(invalid_argument("KvSet: a key is empty"));
  if (request->more().empty()) {
    job_.kv().set(request->key(), request->value());
    return grpc::Status::OK;
  }
  std::vector<std::pair<std::string, std::string>> entries;
  entries.reserve(static_cast<size_t>(request->more_size()) + 1);
  entries.emplace_back(request->key(), request->value());
  for (const v1::KvEntry& entry : request->more()) entries.emplace_back(entry.key(), entry.value());
  job_.kv().set_many(std::move(entries));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::KvGet(grpc::ServerContext* context,
                                       const v1::KvGetRequest* request,
                                       v1::KvGetResponse* response) {
  HVRUN_RETURN_IF_ERROR_GRPC(check_secret(*context, job_.options().secret, "KvGet"));
  auto timeout = std::chrono::milliseconds(std::max<int64_t>(0, request->timeout_ms()));
  timeout = std::min({timeout, kLongestKvWait, until_deadline(*context)});
  std::vector<std::string> keys(request->keys().begin(), request->keys().end());
  auto values = job_.kv().get(keys, timeout);
  if (!values.is_ok()) return to_grpc(values.status());
  for (auto& value : *values) response->add_values(std::move(value));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::KvList(grpc::ServerContext* context,
                                        const v1::KvListRequest* request,
                                        v1::KvListResponse* response) {
  HVRUN_RETURN_IF_ERROR_GRPC(check_secret(*context, job_.options().secret, "KvList"));
  for (auto& key : job_.kv().list(request->prefix())) response->add_keys(std::move(key));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Abort(grpc::ServerContext* context,
                                       const v1::AbortRequest* request, v1::AbortResponse*) {
  HVRUN_RETURN_IF_ERROR_GRPC(check_secret(*context, job_.options().secret, "Abort"));
  const std::string reason = request->reason().empty() ? "abort requested (no reason given)"
                                                       : request->reason();
  job_.abort(reason, request->rank(), request->host());
  return grpc::Status::OK;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* CoordinatorService::Negotiate(
    grpc::CallbackServerContext* context) {
  return new NegotiateReactor(job_, context->peer(),
                              check_secret(*context, job_.options().secret, "Negotiate"));
}

}  // namespace hvrun::coordinator::service

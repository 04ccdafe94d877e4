// The gRPC service of proto/hvrun.proto: Register on the callback API (a rank waiting for the
// others holds no thread: thousands wait at once), the other unary calls (Kv*, Abort) on gRPC's
// sync threads (they may wait, always bounded), Negotiate on the callback API (one reactor per
// stream, raw bytes so that a plan is serialized once for every rank).
#pragma once

#include "coordinator/service/job.h"
#include "hvrun.grpc.pb.h"

namespace hvrun::coordinator::service {

class CoordinatorService final
    : public v1::Coordinator::WithCallbackMethod_Register<
          v1::Coordinator::WithRawCallbackMethod_Negotiate<v1::Coordinator::Service>> {
 public:
  explicit CoordinatorService(Job& job) : job_(job) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override;
  grpc::Status KvSet(grpc::ServerContext* context, const v1::KvSetRequest* request,
                     v1::KvSetResponse* response) override;
  grpc::Status KvGet(grpc::ServerContext* context, const v1::KvGetRequest* request,
                     v1::KvGetResponse* response) override;
  grpc::Status KvList(grpc::ServerContext* context, const v1::KvListRequest* request,
                      v1::KvListResponse* response) override;
  grpc::Status Abort(grpc::ServerContext* context, const v1::AbortRequest* request,
                     v1::AbortResponse* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Negotiate(
      grpc::CallbackServerContext* context) override;

 private:
  Job& job_;
};

}  // namespace hvrun::coordinator::service

#include "coordinator/service/negotiate_reactor.h"

#include <grpcpp/support/proto_buffer_reader.h>
#include <spdlog/spdlog.h>

#include "coordinator/service/grpc_status.h"

namespace hvrun::coordinator::service {

void Outbox::send(std::shared_ptr<const grpc::ByteBuffer> message) {
  NegotiateReactor* start = nullptr;
  const grpc::ByteBuffer* first = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!reactor_ || finish_requested_) return;
    queue_.push_back(std::move(message));
    if (writing_) return;
    writing_ = true;
    start = reactor_;
    first = queue_.front().get();
  }
  // Outside the lock: gRPC may run reactions inline. Only this thread may start the write now.
  start->StartWrite(first);
}

void Outbox::finish(const Status& status) {
  NegotiateReactor* finisher = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!reactor_ || finish_requested_) return;
    finish_requested_ = true;
    finish_status_ = to_grpc(status);
    if (writing_) return;  // on_write_done finishes once the queue is written
    finished_ = true;
    finisher = reactor_;
  }
  finisher->Finish(finish_status_);
}

void Outbox::on_write_done(bool ok) {
  NegotiateReactor* reactor = nullptr;
  const grpc::ByteBuffer* next = nullptr;
  bool finish_now = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.pop_front();
    if (!ok) queue_.clear();  // the stream is broken; the read side reports it
    if (!queue_.empty()) {
      next = queue_.front().get();
    } else {
      writing_ = false;
      if (finish_requested_ && !finished_) {
        finished_ = true;
        finish_now = true;
      }
    }
    reactor = reactor_;
  }
  if (!reactor) return;
  if (next) {
    reactor->StartWrite(next);
  } else if (finish_now) {
    reactor->Finish(finish_status_);
  }
}

bool Outbox::finishing() {
  std::lock_guard<std::mutex> lock(mutex_);
  return finish_requested_;
}

void Outbox::on_done() {
  std::lock_guard<std::mutex> lock(mutex_);
  reactor_ = nullptr;
  queue_.clear();
}

NegotiateReactor::NegotiateReactor(Job& job, std::string peer, const Status& refusal)
    : job_(job), peer_(std::move(peer)), outbox_(std::make_shared<Outbox>(this)) {
  if (!refusal.is_ok()) {
    refused_ = true;
    outbox_->finish(refusal);
    return;
  }
  StartRead(&incoming_);
}

void NegotiateReactor::OnReadDone(bool ok) {
  if (!ok) {
    // The worker closed its side (after Goodbye) or the connection broke.
    if (said_goodbye_ || !attached_) {
      outbox_->finish(Status::ok());
    } else {
      job_.telemetry().on_lost(rank_);
      job_.worker_lost(*generation_, rank_);
      outbox_->finish(job_.end_status().value_or(aborted("rank " + std::to_string(rank_) +
                                                         " disconnected")));
    }
    return;
  }
  v1::WorkerMessage message;
  grpc::ProtoBufferReader reader(&incoming_);
  if (!message.ParseFromZeroCopyStream(&reader)) {
    refuse(invalid_argument(
        "sent a negotiation message the coordinator cannot parse (" +
        std::to_string(incoming_.Length()) +
        " bytes, not a hvrun.v1 WorkerMessage: a string field such as a tensor name that is "
        "not UTF-8 does this, as does a worker library of another protocol version)"));
    return;
  }
  handle(message);
  if (!outbox_->finishing()) StartRead(&incoming_);
}

std::string NegotiateReactor::who() const {
  if (!attached_) return "the worker at " + peer_ + " (before Hello)";
  std::string text = "rank " + std::to_string(rank_);
  if (auto info = generation_->rendezvous.rank_info(rank_))
    text += " on host " + info->host() + " (pid " + std::to_string(info->pid()) + ")";
  return text;
}

void NegotiateReactor::refuse(const Status& problem) {
  const Status status(problem.code(), who() + " " + problem.message());
  // A rank of the job broke the protocol: the job cannot go on without it, and every rank
  // (this one included, before its stream ends) hears why; the abort logs it.
  if (attached_) {
    auto info = generation_->rendezvous.rank_info(rank_);
    job_.abort(status.message(), rank_, info ? info->host() : "");
  } else {
    spdlog::error("Negotiate: {}", status.message());
  }
  outbox_->finish(job_.end_status().value_or(status));
}

void NegotiateReactor::handle(const v1::WorkerMessage& message) {
  if (!attached_ && message.kind_case() != v1::WorkerMessage::kHello) {
    refuse(failed_precondition("sent something else before Hello (the first message of a "
                               "Negotiate stream must be Hello)"));
    return;
  }
  if (attached_) {
    generation_->loop.heard_from(
        rank_, message.kind_case() == v1::WorkerMessage::kHeartbeat
                   ? std::optional<uint64_t>(message.heartbeat().last_plan_seq())
                   : std::nullopt);
  }
  switch (message.kind_case()) {
    case v1::WorkerMessage::kHello:
      on_hello(message.hello());
      break;
    case v1::WorkerMessage::kRequests:
      generation_->loop.submit(rank_, message.requests());
      break;
    case v1::WorkerMessage::kHeartbeat:
      break;
    case v1::WorkerMessage::kAbort: {
      const auto& request = message.abort();
      job_.abort(request.reason(), request.rank() >= 0 ? request.rank() : rank_, request.host());
      break;
    }
    case v1::WorkerMessage::kTelemetry:
      job_.telemetry().on_report(rank_, message.telemetry());
      break;
    case v1::WorkerMessage::kTimeline:
      job_.telemetry().on_timeline_control(rank_, message.timeline().filename());
      break;
    case v1::WorkerMessage::kAutopsy:
      job_.on_autopsy_report(rank_, message.autopsy());
      break;
    case v1::WorkerMessage::kGoodbye:
      job_.telemetry().on_goodbye(rank_);
      said_goodbye_ = true;
      generation_->loop.goodbye(rank_);
      break;
    default:
      break;
  }
}

void NegotiateReactor::on_hello(const v1::Hello& hello) {
  if (attached_) {
    refuse(failed_precondition("sent Hello twice on one Negotiate stream"));
    return;
  }
  // The generation now registered (init -> shutdown -> init makes a new one per round); this
  // stream belongs to it until it ends.
  Generation& generation = job_.current();
  if (!generation.rendezvous.complete()) {
    outbox_->finish(failed_precondition("Negotiate: rank " + std::to_string(hello.rank()) +
                                        " opened its stream before the rendezvous completed; "
                                        "call Register first"));
    return;
  }
  Status status = generation.loop.attach(hello.rank(), outbox_);
  if (!status.is_ok()) {
    outbox_->finish(status);
    return;
  }
  generation_ = &generation;
  rank_ = hello.rank();
  attached_ = true;
  SPDLOG_DEBUG("rank {} negotiating from {}", rank_, peer_);
  // After Welcome: telemetry learns the stream (and says TimelineState while recording).
  auto info = generation.rendezvous.rank_info(rank_);
  job_.telemetry().on_attached(rank_, outbox_, info ? info->host() : "",
                               info ? info->local_rank() : -1);
}

void NegotiateReactor::OnWriteDone(bool ok) { outbox_->on_write_done(ok); }

void NegotiateReactor::OnDone() {
  outbox_->on_done();
  if (attached_) generation_->loop.detach(rank_, outbox_.get());
  delete this;
}

}  // namespace hvrun::coordinator::service

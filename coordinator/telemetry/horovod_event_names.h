// Horovod's timeline vocabulary for hvrun's phases (--timeline-names horovod), so that tools
// written for Horovod's timeline find the activities they look for:
//   negotiated -> NEGOTIATE_<OP>          queued -> QUEUE
//   pack       -> MEMCPY_IN_FUSION_BUFFER unpack -> MEMCPY_OUT_FUSION_BUFFER
//   collective -> <BACKEND>_<OP>          (NCCL_ALLREDUCE, GLOO_BCAST, SHM_ALLREDUCE, ...)
// <OP> is Horovod's: ALLREDUCE, ALLGATHER, BCAST (broadcast), ALLTOALL, REDUCESCATTER. Other
// events (submitted, done, markers) keep their names: Horovod has no counterpart.
#pragma once

#include <string>
#include <string_view>

#include "coordinator/telemetry/timeline_writer.h"

namespace hvrun::coordinator::telemetry {

std::string horovod_event_name(std::string_view name, const TimelineArgs& args);

}  // namespace hvrun::coordinator::telemetry

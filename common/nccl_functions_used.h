// Every NCCL function hvrun's GPU data plane (libhvrun_cuda.so) calls: what a libnccl.so.2 must
// export for that library to load. `hvrun doctor` looks each one up in the NCCL a job would
// load; the test nccl.functions_used_match_the_plugin compares the list with the plugin's
// dynamic imports, so it stays true when the plugin calls a new function.
#pragma once

#include <array>
#include <string_view>

namespace hvrun {

inline constexpr std::array<std::string_view, 14> kNcclFunctionsUsed{
    "ncclAllGather",   "ncclAllReduce",         "ncclBroadcast",          "ncclCommAbort",
    "ncclCommGetAsyncError", "ncclCommInitRankConfig", "ncclGetErrorString", "ncclGetLastError",
    "ncclGetUniqueId", "ncclGetVersion",        "ncclGroupEnd",           "ncclGroupStart",
    "ncclRecv",        "ncclSend",
};

}  // namespace hvrun

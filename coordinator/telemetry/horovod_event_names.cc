#include "coordinator/telemetry/horovod_event_names.h"

#include <cctype>

namespace hvrun::coordinator::telemetry {
namespace {

std::string_view arg(const TimelineArgs& args, std::string_view key) {
  for (const auto& [k, v] : args)
    if (k == key) return v;
  return {};
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Horovod's name of an operation ("broadcast" is BCAST in its activities).
std::string horovod_op(std::string_view op) {
  return op == "broadcast" ? std::string("BCAST") : upper(op);
}

}  // namespace

std::string horovod_event_name(std::string_view name, const TimelineArgs& args) {
  if (name == "negotiated") return "NEGOTIATE_" + horovod_op(arg(args, "op"));
  if (name == "queued") return "QUEUE";
  if (name == "pack") return "MEMCPY_IN_FUSION_BUFFER";
  if (name == "unpack") return "MEMCPY_OUT_FUSION_BUFFER";
  if (name == "collective") return upper(arg(args, "backend")) + "_" + horovod_op(arg(args, "op"));
  return std::string(name);
}

}  // namespace hvrun::coordinator::telemetry

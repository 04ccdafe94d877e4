// The byte protocol between hvrun and each host's `hvrun agent`, carried by the remote shell's
// stdin (hvrun -> agent) and stdout (agent -> hvrun).
//
// A frame is one header line "TYPE [ARG...] LEN\n" followed by LEN bytes of payload. TYPE and the
// ARGs are words without spaces or newlines; the payload is anything (worker output, an
// environment). Lists inside a payload are joined with '\0'. The job secret travels only inside
// a WORKER frame's environment, i.e. over the ssh channel, never on a command line.
//
//   agent -> hvrun                          hvrun -> agent
//   HELLO                 payload version   PROBE               payload ADDR:PORT list
//   IFACE                 name,addr,port,flags   CWD            payload directory
//   IFACES_DONE                             ARGV                payload argv list
//   PROBED ADDR:PORT ok|fail  payload why   WORKER RANK         payload KEY=VALUE list
//   PROBES_DONE                             START               payload coordinator address
//   STARTED RANK PID                        SIGNAL SIG          forward a signal to every worker
//   START_FAILED RANK     payload why       KILL                SIGKILL every worker's group now
//   OUT RANK 1|2          payload bytes     PROCESSES TAG       payload PID list
//   EXIT RANK WAIT_STATUS
//   DYING RANK WAIT_STATUS  (an elastic job's worker began to die; EXIT follows)
//   PROCESS TAG PID       payload what /proc says of PID (common/proc_state.h encoding)
//   PROCESSES_DONE TAG    (every PID of PROCESSES TAG answered)
//   NOTE                  payload text
//   BYE                                     (every worker exited; the agent exits 0)
//
// A WORKER frame after START is a rank an elastic job adds to this host: started at once.
// STOP RANK (hvrun -> agent) takes one away: SIGTERM to that worker's process group.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hvrun::launcher {

struct Frame {
  std::string type;
  std::vector<std::string> args;
  std::string payload;

  // args[i] as an integer, or `fallback` when missing or malformed.
  long long int_arg(size_t i, long long fallback = -1) const;
};

std::string encode_frame(std::string_view type, const std::vector<std::string>& args = {},
                         std::string_view payload = {});

std::string join_list(const std::vector<std::string>& items);   // '\0'-separated
std::vector<std::string> split_list(std::string_view payload);  // inverse of join_list

// Reassembles frames from a byte stream fed in arbitrary pieces.
class FrameReader {
 public:
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next whole frame, nullopt when more bytes are needed, or an error for a malformed header
  // (the stream is then unusable).
  Result<std::optional<Frame>> next();

  // A header line longer than this is malformed (protects against reading garbage forever).
  static constexpr size_t kMaxHeader = 4096;

 private:
  std::string buffer_;
};

}  // namespace hvrun::launcher

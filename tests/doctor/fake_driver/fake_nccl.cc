// A stand-in for libnccl.so.2 over fake_cuda's host-memory "GPUs": ncclAllReduce sums the first
// 4096 floats of every buffer of the group (all the doctor's check reads) and takes a fixed time
// per call: 5 ms with P2P allowed, 20 ms with NCCL_P2P_DISABLE=1, unless FAKE_NCCL_MODE says:
//   hang-p2p   with P2P allowed the allreduce never returns (the doctor must kill it)
//   slow-p2p   20 ms with P2P, 5 ms without
//   wrong-p2p  with P2P allowed the sum comes out wrong
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Pending {
  float* buffer;
  size_t count;
};
std::vector<Pending>& pending() {
  static std::vector<Pending> p;
  return p;
}
bool p2p_allowed() {
  const char* v = std::getenv("NCCL_P2P_DISABLE");
  return v == nullptr || std::strcmp(v, "1") != 0;
}
std::string mode() {
  const char* m = std::getenv("FAKE_NCCL_MODE");
  return m != nullptr ? m : "";
}

}  // namespace

extern "C" {

int ncclGetVersion(int* v) { *v = 22809; return 0; }
const char* ncclGetErrorString(int) { return "fake NCCL error"; }
int ncclCommInitAll(void** comms, int n, const int*) {
  for (int i = 0; i < n; ++i) comms[i] = reinterpret_cast<void*>(static_cast<long>(i) + 1);
  return 0;
}
int ncclCommDestroy(void*) { return 0; }
int ncclGroupStart() {
  pending().clear();
  return 0;
}
int ncclAllReduce(const void*, void* recv, size_t count, int, int, void*, void*) {
  pending().push_back({static_cast<float*>(recv), count});
  return 0;
}
int ncclGroupEnd() {
  const bool p2p = p2p_allowed();
  if (p2p && mode() == "hang-p2p") {
    for (;;) pause();
  }
  const size_t n = pending().empty() ? 0 : std::min<size_t>(pending()[0].count, 4096);
  for (size_t i = 0; i < n; ++i) {
    float sum = 0;
    for (const Pending& p : pending()) sum += p.buffer[i];
    if (p2p && mode() == "wrong-p2p") sum += 1;
    for (const Pending& p : pending()) p.buffer[i] = sum;
  }
  const bool slow = mode() == "slow-p2p" ? p2p : !p2p;
  usleep(slow ? 20000 : 5000);
  return 0;
}

}  // extern "C"

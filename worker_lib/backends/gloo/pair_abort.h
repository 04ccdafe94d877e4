// Failing a Gloo TCP pair from outside Gloo: every operation waiting on it (in any thread) wakes
// with an exception, and its socket closes so the peer's side fails too. Gloo's public
// Context::closeConnections() only closes the sockets: an operation of this process waiting on
// the pair would sleep until its timeout.
#pragma once

#include <string>

namespace gloo::transport {
class Pair;
}

namespace hvrun::detail::gloo_backend {

// Returns false when `pair` is not a TCP pair (nothing was done).
bool fail_pair(gloo::transport::Pair* pair, const std::string& message);

}  // namespace hvrun::detail::gloo_backend

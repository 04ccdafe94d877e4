// See pair_abort.h. Gloo's TCP pair has the call we need, Pair::signalExceptionExternal (what
// Gloo itself uses when a buffer times out: it signals every pending operation on the pair and
// closes it), exported by libgloo. Its header <gloo/transport/tcp/pair.h> cannot be included
// with Debian's libgloo-dev (0.0~git20220518), which omits <gloo/common/memory.h>; so this file,
// alone, declares that one exported member on the class. Nothing here touches the class's
// layout: only the out-of-line call (resolved in libgloo by its mangled name) and dynamic_cast
// (by the class's type name). Keep this file free of other Gloo headers that define the class.
#include "worker_lib/backends/gloo/pair_abort.h"

#include <exception>

#include <gloo/transport/pair.h>

namespace gloo::transport::tcp {
class Pair : public ::gloo::transport::Pair {
 public:
  std::exception_ptr signalExceptionExternal(const std::string& msg);
};
}  // namespace gloo::transport::tcp

namespace hvrun::detail::gloo_backend {

bool fail_pair(gloo::transport::Pair* pair, const std::string& message) {
  auto* tcp = dynamic_cast<gloo::transport::tcp::Pair*>(pair);
  if (tcp == nullptr) return false;
  (void)tcp->signalExceptionExternal(message);
  return true;
}

}  // namespace hvrun::detail::gloo_backend

// File descriptors for a Gloo mesh: a rank holds a TCP socket per peer (two while a pair
// connects: its listening socket and the accepted one), so a mesh of a few thousand ranks needs
// more than the 1,024 descriptors many systems allow a process by default, and Gloo then fails
// with "Too many open files" in the middle of connecting. Before connecting, the soft limit is
// raised as far as the mesh needs (up to the hard limit, which an unprivileged process may do);
// when even the hard limit is too low the mesh is not attempted and the error says which limit
// to raise.
#pragma once

#include "common/status.h"

namespace hvrun::detail {

// Makes room for a mesh with `peers` other ranks, given the descriptors open now.
Status ensure_descriptors_for_mesh(int rank, int peers);

}  // namespace hvrun::detail

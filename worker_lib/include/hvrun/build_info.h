// What this build of hvrun contains (CUDA, NCCL, Gloo, MPI and their versions), for programs:
// hvrun::build_info() and hvrun::describe_build(), as `hvrun --check-build` prints them.
#pragma once

#include "common/build_info.h"

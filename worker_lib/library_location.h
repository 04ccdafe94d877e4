// Where the worker library's code was loaded from, to find what ships beside it: the CUDA
// plugin (libhvrun_cuda.so) and the coordinator daemon a single process starts for itself.
#pragma once

#include <string>

namespace hvrun::detail {

// The directory of libhvrun.so, or of a program that links the worker statically (the tests'
// and benchmarks' programs in <build>/bin); empty when the loader cannot say.
std::string library_directory();

}  // namespace hvrun::detail

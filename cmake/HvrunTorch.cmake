# Finds PyTorch's C++ API through the project's Python interpreter (HVRUN_WITH_TORCH_API: AUTO,
# ON, OFF) for hvrun.torch._tensor_api (python/torch_api/), and describes it as the imported
# target hvrun::torch_python: torch's headers (as system headers: their warnings are not ours),
# the C++ ABI its wheel was built with, and libtorch_python, libtorch_cpu and libc10, which torch
# has loaded by the time the module is (the dynamic loader finds them by their sonames). Sets
# HVRUN_HAVE_TORCH_API and HVRUN_TORCH_VERSION.
# Without the module: a message, or a configure error under HVRUN_WITH_TORCH_API=ON. A macro,
# so that its return() leaves hvrun_find_torch.
macro(_hvrun_torch_api_off why)
  if(HVRUN_WITH_TORCH_API STREQUAL "ON")
    message(FATAL_ERROR "HVRUN_WITH_TORCH_API=ON: ${why}")
  endif()
  message(STATUS "hvrun.torch tensor API: off (${why}; hvrun.torch reads tensors through Python)")
  return()
endmacro()

include(HvrunPythonProbe)

function(hvrun_find_torch python)
  set(HVRUN_HAVE_TORCH_API OFF PARENT_SCOPE)
  if(HVRUN_WITH_TORCH_API STREQUAL "OFF")
    message(STATUS "hvrun.torch tensor API: off (HVRUN_WITH_TORCH_API=OFF)")
    return()
  endif()
  set(probe "import os, torch; print(torch.__version__); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); d = os.path.dirname(torch.__file__); print(os.path.join(d, 'include')); print(os.path.join(d, 'lib'))")
  hvrun_python_probe(${python} "${probe}" 4 lines err)
  if(NOT lines)
    _hvrun_torch_api_off("${python} cannot import torch: ${err}")
  endif()
  list(GET lines 0 version)
  list(GET lines 1 cxx11_abi)
  list(GET lines 2 include_dir)
  list(GET lines 3 library_dir)
  set(libraries)
  foreach(name torch_python torch_cpu c10)
    if(NOT EXISTS "${library_dir}/lib${name}.so")
      _hvrun_torch_api_off("torch ${version} has no ${library_dir}/lib${name}.so")
    endif()
    list(APPEND libraries "${library_dir}/lib${name}.so")
  endforeach()
  if(NOT EXISTS "${include_dir}/torch/csrc/autograd/python_variable.h")
    _hvrun_torch_api_off("torch ${version} has no C++ headers in ${include_dir}")
  endif()
  add_library(hvrun_torch_python INTERFACE IMPORTED GLOBAL)
  target_include_directories(hvrun_torch_python SYSTEM INTERFACE "${include_dir}")
  target_compile_definitions(hvrun_torch_python INTERFACE _GLIBCXX_USE_CXX11_ABI=${cxx11_abi})
  target_link_libraries(hvrun_torch_python INTERFACE ${libraries})
  add_library(hvrun::torch_python ALIAS hvrun_torch_python)
  set(HVRUN_HAVE_TORCH_API ON PARENT_SCOPE)
  set(HVRUN_TORCH_VERSION "${version}" PARENT_SCOPE)
  message(STATUS "hvrun.torch tensor API: on (torch ${version}, ${include_dir})")
endfunction()

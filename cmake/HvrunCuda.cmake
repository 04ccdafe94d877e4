# CUDA toolkit and NCCL are optional. On our images they live under /usr/local/cuda, outside
# apt, so that prefix is searched as well as the usual places.
set(HVRUN_HAVE_CUDA OFF)
set(HVRUN_NCCL_VERSION_CODE 0)
set(HVRUN_NCCL_VERSION_STRING "none")
if(HVRUN_WITH_CUDA STREQUAL "OFF")
  return()
endif()

set(_hvrun_cuda_required "")
if(HVRUN_WITH_CUDA STREQUAL "ON")
  set(_hvrun_cuda_required REQUIRED)
endif()

if(NOT CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit ${_hvrun_cuda_required})
if(NOT CUDAToolkit_FOUND)
  message(STATUS "CUDA toolkit not found: building the CPU data plane only")
  return()
endif()

get_filename_component(_hvrun_cuda_prefix "${CUDAToolkit_BIN_DIR}" DIRECTORY)
find_path(HVRUN_NCCL_INCLUDE_DIR nccl.h
  HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${_hvrun_cuda_prefix} ${CUDAToolkit_INCLUDE_DIRS}
  PATH_SUFFIXES include)
find_library(HVRUN_NCCL_LIBRARY nccl
  HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${_hvrun_cuda_prefix} ${CUDAToolkit_LIBRARY_DIR}
  PATH_SUFFIXES lib64 lib)
if(NOT HVRUN_NCCL_INCLUDE_DIR OR NOT HVRUN_NCCL_LIBRARY)
  if(HVRUN_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "HVRUN_WITH_CUDA=ON but NCCL was not found (looked for nccl.h and libnccl "
                        "under ${_hvrun_cuda_prefix}; set NCCL_ROOT)")
  endif()
  message(STATUS "NCCL not found next to CUDA ${CUDAToolkit_VERSION}: building the CPU data plane only")
  return()
endif()

# The CUDA language is enabled so that kernels (fusion pack/unpack) can be compiled by nvcc.
if(NOT CMAKE_CUDA_COMPILER)
  set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
endif()
enable_language(CUDA)
# "90" = sm_90 machine code (Hopper: H100, H200) plus compute_90 PTX, which the driver compiles
# just in time for newer GPUs. -DHVRUN_CUDA_ARCHITECTURES="80;90" adds machine code for older
# ones (CUDA 13 builds 75 and newer).
set(HVRUN_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures of hvrun's kernels")
set(CMAKE_CUDA_ARCHITECTURES ${HVRUN_CUDA_ARCHITECTURES})
# CUDA sources get the C++ standard of the project (20); CMake 3.25 does not know nvcc 13's
# flag for it yet, so tell it.
if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()

file(STRINGS ${HVRUN_NCCL_INCLUDE_DIR}/nccl.h _hvrun_nccl_lines REGEX "#define NCCL_(MAJOR|MINOR|PATCH) ")
foreach(_line IN LISTS _hvrun_nccl_lines)
  if(_line MATCHES "#define NCCL_(MAJOR|MINOR|PATCH) +([0-9]+)")
    set(_hvrun_nccl_${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
  endif()
endforeach()
math(EXPR HVRUN_NCCL_VERSION_CODE "${_hvrun_nccl_MAJOR} * 10000 + ${_hvrun_nccl_MINOR} * 100 + ${_hvrun_nccl_PATCH}")
set(HVRUN_NCCL_VERSION_STRING "${_hvrun_nccl_MAJOR}.${_hvrun_nccl_MINOR}.${_hvrun_nccl_PATCH}")

add_library(hvrun_nccl INTERFACE)
add_library(hvrun::nccl ALIAS hvrun_nccl)
target_include_directories(hvrun_nccl SYSTEM INTERFACE ${HVRUN_NCCL_INCLUDE_DIR})
# NCCL only; each target picks its CUDA runtime (the GPU plugin and the tests link the static
# one, so nothing but libcuda.so.1, from the driver, and libnccl.so.2 is needed at run time).
target_link_libraries(hvrun_nccl INTERFACE ${HVRUN_NCCL_LIBRARY})
set(HVRUN_HAVE_CUDA ON)

# Warnings as errors (with HVRUN_WERROR) for our own CUDA sources.
add_library(hvrun_cuda_warnings INTERFACE)
add_library(hvrun::cuda_warnings ALIAS hvrun_cuda_warnings)
target_compile_options(hvrun_cuda_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>
  $<$<AND:$<BOOL:${HVRUN_WERROR}>,$<COMPILE_LANGUAGE:CUDA>>:--Werror=all-warnings -Xcompiler=-Werror>)

# Dependencies come from Debian 12's packages (scripts/install-deps installs them).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)

# protobuf: CMake's own FindProtobuf module (Debian ships no protobuf CMake config).
find_package(Protobuf 3.12 REQUIRED)

# gRPC++: Debian 12 ships only pkg-config files for it.
pkg_check_modules(GRPCPP REQUIRED IMPORTED_TARGET grpc++>=1.46)
find_program(HVRUN_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

# hvrun::grpc = gRPC++ and protobuf. An executable with the property HVRUN_STATIC_GRPC set (the
# hvrun launcher) links Debian's static archives of them instead: half of hvrun's own start-up
# (~15 of 30 ms here) is the dynamic loader relocating gRPC's and abseil's ~50 shared libraries,
# and every job pays it. Shared objects (libhvrun.so) cannot: the archives are not PIC.
add_library(hvrun_grpc INTERFACE)
add_library(hvrun::grpc ALIAS hvrun_grpc)
set(_static_grpc "$<BOOL:$<TARGET_PROPERTY:HVRUN_STATIC_GRPC>>")
set(_static_libs "")
set(_static_ok TRUE)
find_library(HVRUN_PROTOBUF_ARCHIVE NAMES libprotobuf.a)
if(HVRUN_PROTOBUF_ARCHIVE)
  list(APPEND _static_libs ${HVRUN_PROTOBUF_ARCHIVE})
else()
  set(_static_ok FALSE)
endif()
# pkg-config's --static order lists every library after the ones that need it.
foreach(_flag IN LISTS GRPCPP_STATIC_LDFLAGS)
  if(_flag MATCHES "^-l(.+)$")
    set(_name ${CMAKE_MATCH_1})
    if(_name MATCHES "^(ssl|crypto|z|dl|rt|atomic|pthread|m)$")
      list(APPEND _static_libs ${_flag})  # system libraries stay shared
    else()
      find_library(HVRUN_ARCHIVE_${_name} NAMES lib${_name}.a)
      if(HVRUN_ARCHIVE_${_name})
        list(APPEND _static_libs ${HVRUN_ARCHIVE_${_name}})
      else()
        set(_static_ok FALSE)
      endif()
    endif()
  elseif(_flag STREQUAL "-pthread")
    list(APPEND _static_libs Threads::Threads)
  endif()
endforeach()
if(_static_ok)
  foreach(_lib IN LISTS _static_libs)
    target_link_libraries(hvrun_grpc INTERFACE "$<${_static_grpc}:${_lib}>")
  endforeach()
  target_link_libraries(hvrun_grpc INTERFACE "$<$<NOT:${_static_grpc}>:protobuf::libprotobuf>"
                                             "$<$<NOT:${_static_grpc}>:PkgConfig::GRPCPP>")
  set(HVRUN_HAVE_STATIC_GRPC ON)
else()
  message(STATUS "hvrun: static gRPC/protobuf archives not found; hvrun links them shared")
  target_link_libraries(hvrun_grpc INTERFACE protobuf::libprotobuf PkgConfig::GRPCPP)
  set(HVRUN_HAVE_STATIC_GRPC OFF)
endif()

find_package(Boost 1.74 REQUIRED)

# elfutils' libdwfl declarations (libdw-dev): the worker library's autopsy symbolises stack
# addresses with it (function, file:line), opening libdw.so.1 at run time, so that nothing
# links it and a machine without it falls back to the dynamic symbol table.
find_path(HVRUN_LIBDWFL_INCLUDE_DIR elfutils/libdwfl.h)
if(NOT HVRUN_LIBDWFL_INCLUDE_DIR)
  message(FATAL_ERROR "elfutils/libdwfl.h not found (apt-get install libdw-dev)")
endif()
find_package(spdlog REQUIRED)
find_package(Gloo REQUIRED)
if(NOT TARGET gloo)
  message(FATAL_ERROR "Gloo's CMake config did not define the 'gloo' target")
endif()

if(HVRUN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

set(HVRUN_HAVE_MPI OFF)
if(NOT HVRUN_WITH_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(HVRUN_HAVE_MPI ON)
  elseif(HVRUN_WITH_MPI STREQUAL "ON")
    message(FATAL_ERROR "HVRUN_WITH_MPI=ON but Open MPI was not found (apt-get install libopenmpi-dev openmpi-bin)")
  endif()
endif()

# Dependencies come from Debian 12's packages (scripts/install-deps installs them).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)

# protobuf: CMake's own FindProtobuf module (Debian ships no protobuf CMake config).
find_package(Protobuf 3.12 REQUIRED)

# gRPC++: Debian 12 ships only pkg-config files for it.
pkg_check_modules(GRPCPP REQUIRED IMPORTED_TARGET grpc++>=1.46)
find_program(HVRUN_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

find_package(Boost 1.74 REQUIRED)
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

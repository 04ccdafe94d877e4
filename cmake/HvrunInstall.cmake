# Where `cmake --install` (and `pip install .`, which runs it into the wheel) puts each part, and
# the CMake package that lets another project `find_package(hvrun)` and link `hvrun::worker`.
#
#   prefix layout (cmake --install)         wheel layout (site-packages = the install prefix)
#   bin/hvrun, bin/hvrun-coordinator        <scripts>/hvrun, <scripts>/hvrun-coordinator
#   libexec/hvrun/train (the example)       hvrun/examples/train
#   bin/horovodrun (runs hvrun beside it)   <scripts>/horovodrun
#   lib/libhvrun.so*, lib/libhvrun_cuda.so  hvrun/lib/libhvrun.so*, hvrun/lib/libhvrun_cuda.so
#   include/hvrun/...                       hvrun/include/hvrun/...
#   lib/cmake/hvrun/                        hvrun/lib/cmake/hvrun/  (hvrun.cmake_prefix_path)
#   lib/python3/dist-packages/hvrun/        hvrun/  (hvrun/tensorflow/_hvrun_tf_ops.so when built)
include(CMakePackageConfigHelpers)

if(SKBUILD)
  # Fixed by the wheel's layout (and SKBUILD_SCRIPTS_DIR is a new temporary folder every build).
  set(HVRUN_INSTALL_BINDIR "${SKBUILD_SCRIPTS_DIR}")
  set(HVRUN_INSTALL_LIBDIR "hvrun/lib")
  set(HVRUN_INSTALL_INCLUDEDIR "hvrun/include")
  set(HVRUN_PYTHON_INSTALL_DIR ".")
else()
  set(HVRUN_INSTALL_BINDIR "bin" CACHE STRING "Where hvrun and hvrun-coordinator are installed")
  set(HVRUN_INSTALL_LIBDIR "lib" CACHE STRING "Where libhvrun.so and its CMake package are installed")
  set(HVRUN_INSTALL_INCLUDEDIR "include" CACHE STRING "Where the public headers are installed")
  set(HVRUN_PYTHON_INSTALL_DIR "lib/python3/dist-packages" CACHE STRING
      "Where the hvrun Python package is installed (relative to the prefix)")
endif()
set(_cmakedir "${HVRUN_INSTALL_LIBDIR}/cmake/hvrun")

install(TARGETS hvrun hvrun-coordinator RUNTIME DESTINATION ${HVRUN_INSTALL_BINDIR} COMPONENT runtime)
# The example trainer (the README's main job), for images, installs and wheels that want a job
# to run without a compiler.
if(TARGET train)
  if(SKBUILD)
    set(_train_dir hvrun/examples)
  else()
    set(_train_dir libexec/hvrun)
  endif()
  file(RELATIVE_PATH _train_to_lib "/prefix/${_train_dir}" "/prefix/${HVRUN_INSTALL_LIBDIR}")
  set_target_properties(train PROPERTIES INSTALL_RPATH "$ORIGIN/${_train_to_lib}")
  install(TARGETS train RUNTIME DESTINATION ${_train_dir} COMPONENT examples)
endif()
install(PROGRAMS ${PROJECT_SOURCE_DIR}/launcher/cli/horovodrun DESTINATION ${HVRUN_INSTALL_BINDIR}
        COMPONENT runtime)

# libhvrun.so with only its public headers on the interface of the installed target.
target_include_directories(hvrun_worker INTERFACE $<INSTALL_INTERFACE:${HVRUN_INSTALL_INCLUDEDIR}>)
set_target_properties(hvrun_worker PROPERTIES EXPORT_NAME worker)
install(TARGETS hvrun_worker EXPORT hvrunTargets
        LIBRARY DESTINATION ${HVRUN_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT development)
if(TARGET hvrun_cuda)  # libhvrun loads it from its own folder on the first CUDA tensor
  set_target_properties(hvrun_cuda PROPERTIES INSTALL_RPATH "$ORIGIN")
  install(TARGETS hvrun_cuda LIBRARY DESTINATION ${HVRUN_INSTALL_LIBDIR} COMPONENT runtime)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/hvrun
        DESTINATION ${HVRUN_INSTALL_INCLUDEDIR} COMPONENT development FILES_MATCHING PATTERN "*.h")
install(EXPORT hvrunTargets NAMESPACE hvrun:: DESTINATION ${_cmakedir} COMPONENT development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/hvrunConfig.cmake.in
  ${PROJECT_BINARY_DIR}/generated/hvrunConfig.cmake INSTALL_DESTINATION ${_cmakedir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/generated/hvrunConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/generated/hvrunConfig.cmake
              ${PROJECT_BINARY_DIR}/generated/hvrunConfigVersion.cmake
        DESTINATION ${_cmakedir} COMPONENT development)

# The Python package finds libhvrun.so through its RPATH, relative to where both are installed.
if(TARGET hvrun_python_core)
  file(RELATIVE_PATH _to_lib "/prefix/${HVRUN_PYTHON_INSTALL_DIR}/hvrun" "/prefix/${HVRUN_INSTALL_LIBDIR}")
  set_target_properties(hvrun_python_core PROPERTIES INSTALL_RPATH "$ORIGIN/${_to_lib}")
  install(TARGETS hvrun_python_core LIBRARY DESTINATION ${HVRUN_PYTHON_INSTALL_DIR}/hvrun
          COMPONENT python)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/hvrun/ DESTINATION ${HVRUN_PYTHON_INSTALL_DIR}/hvrun
          COMPONENT python FILES_MATCHING PATTERN "*.py")
  if(TARGET hvrun_tensorflow_ops)  # hvrun/tensorflow/, one folder below _core
    set_target_properties(hvrun_tensorflow_ops PROPERTIES INSTALL_RPATH "$ORIGIN/../${_to_lib}")
    install(TARGETS hvrun_tensorflow_ops LIBRARY DESTINATION ${HVRUN_PYTHON_INSTALL_DIR}/hvrun/tensorflow
            COMPONENT python)
    install(FILES ${PROJECT_BINARY_DIR}/python/hvrun/tensorflow/_ops_build.py
            DESTINATION ${HVRUN_PYTHON_INSTALL_DIR}/hvrun/tensorflow COMPONENT python)
  endif()
  if(TARGET hvrun_torch_tensor_api)  # hvrun/torch/; it needs only torch's libraries, loaded by then
    install(TARGETS hvrun_torch_tensor_api LIBRARY DESTINATION ${HVRUN_PYTHON_INSTALL_DIR}/hvrun/torch
            COMPONENT python)
    install(FILES ${PROJECT_BINARY_DIR}/python/hvrun/torch/_tensor_api_build.py
            DESTINATION ${HVRUN_PYTHON_INSTALL_DIR}/hvrun/torch COMPONENT python)
  endif()
  # hvrun.cmake_prefix_path: the prefix find_package(hvrun) searches, as torch.utils has one.
  get_filename_component(_prefix_of_lib "/prefix/${HVRUN_INSTALL_LIBDIR}" DIRECTORY)
  file(RELATIVE_PATH _pkg_to_prefix "/prefix/${HVRUN_PYTHON_INSTALL_DIR}/hvrun" "${_prefix_of_lib}")
  if(_pkg_to_prefix STREQUAL "")
    set(_pkg_to_prefix ".")
  endif()
  file(WRITE ${PROJECT_BINARY_DIR}/generated/_install_layout.py
       "# Written at install time: where this package's CMake prefix is, relative to it.\n"
       "CMAKE_PREFIX_FROM_PACKAGE = \"${_pkg_to_prefix}\"\n")
  install(FILES ${PROJECT_BINARY_DIR}/generated/_install_layout.py
          DESTINATION ${HVRUN_PYTHON_INSTALL_DIR}/hvrun COMPONENT python)
endif()

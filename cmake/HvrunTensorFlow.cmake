# Finds TensorFlow through the project's Python interpreter (HVRUN_WITH_TENSORFLOW: AUTO, ON,
# OFF) and describes it as the imported target hvrun::tensorflow_framework: TensorFlow's
# headers (as system headers: their warnings are not ours), the definitions its ABI needs and
# libtensorflow_framework, all from tf.sysconfig, so the op library matches the installed wheel.
# Sets HVRUN_HAVE_TENSORFLOW and HVRUN_TENSORFLOW_VERSION.
#
# TensorFlow asks for -std=c++17; the op library is compiled as C++20 (the worker library's
# headers need it), which TensorFlow's headers accept, and which changes no type's layout.
include(HvrunPythonProbe)

function(hvrun_find_tensorflow python)
  set(HVRUN_HAVE_TENSORFLOW OFF PARENT_SCOPE)
  if(HVRUN_WITH_TENSORFLOW STREQUAL "OFF")
    message(STATUS "hvrun TensorFlow ops: off (HVRUN_WITH_TENSORFLOW=OFF)")
    return()
  endif()
  set(probe "import tensorflow as tf; s = tf.sysconfig; print(tf.__version__); print(s.get_include()); print('|'.join(s.get_compile_flags())); print('|'.join(s.get_link_flags()))")
  hvrun_python_probe(${python} "${probe}" 4 lines err ENV TF_CPP_MIN_LOG_LEVEL=3)
  if(NOT lines)
    set(why "${python} cannot import tensorflow")
    if(HVRUN_WITH_TENSORFLOW STREQUAL "ON")
      message(FATAL_ERROR "HVRUN_WITH_TENSORFLOW=ON: ${why}:\n${err}")
    endif()
    message(STATUS "hvrun TensorFlow ops: off (${why})")
    return()
  endif()
  list(GET lines 0 version)
  list(GET lines 1 include_dir)
  list(GET lines 2 compile_flags)
  list(GET lines 3 link_flags)
  string(REPLACE "|" ";" compile_flags "${compile_flags}")
  string(REPLACE "|" ";" link_flags "${link_flags}")

  set(definitions)
  set(options)
  foreach(flag IN LISTS compile_flags)
    if(flag MATCHES "^-D(.*)")
      list(APPEND definitions "${CMAKE_MATCH_1}")
    elseif(flag MATCHES "^-I" OR flag MATCHES "^--?std=")
      # The include folder is added as a system folder below; the standard is ours (see above).
    else()
      list(APPEND options "${flag}")
    endif()
  endforeach()
  set(library_dir)
  set(library_name)
  foreach(flag IN LISTS link_flags)
    if(flag MATCHES "^-L(.*)")
      set(library_dir "${CMAKE_MATCH_1}")
    elseif(flag MATCHES "^-l:(.*)")
      set(library_name "${CMAKE_MATCH_1}")
    elseif(flag MATCHES "^-l(.*)")
      set(library_name "lib${CMAKE_MATCH_1}.so")
    endif()
  endforeach()
  if(NOT EXISTS "${library_dir}/${library_name}")
    message(FATAL_ERROR "TensorFlow ${version}: tf.sysconfig.get_link_flags() names "
                        "'${library_dir}/${library_name}', which does not exist")
  endif()

  add_library(hvrun_tensorflow_framework SHARED IMPORTED GLOBAL)
  set_target_properties(hvrun_tensorflow_framework PROPERTIES
    IMPORTED_LOCATION "${library_dir}/${library_name}"
    IMPORTED_NO_SONAME FALSE)
  target_include_directories(hvrun_tensorflow_framework SYSTEM INTERFACE "${include_dir}")
  target_compile_definitions(hvrun_tensorflow_framework INTERFACE ${definitions})
  target_compile_options(hvrun_tensorflow_framework INTERFACE ${options})
  add_library(hvrun::tensorflow_framework ALIAS hvrun_tensorflow_framework)

  set(HVRUN_HAVE_TENSORFLOW ON PARENT_SCOPE)
  set(HVRUN_TENSORFLOW_VERSION "${version}" PARENT_SCOPE)
  message(STATUS "hvrun TensorFlow ops: on (TensorFlow ${version}, ${library_dir}/${library_name})")
endfunction()

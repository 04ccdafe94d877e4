# hvrun_python_probe(<python> <code> <count> <lines_var> <error_var> [ENV VAR=VALUE...]): runs
# `<python> -c <code>`, which prints <count> lines last, and sets <lines_var> to those lines (a
# list; whatever the import printed before them is dropped), or leaves it empty and sets
# <error_var> to the interpreter's stderr when it failed. Shared by the framework probes
# (HvrunTensorFlow.cmake, HvrunTorch.cmake).
function(hvrun_python_probe python code count lines_var error_var)
  cmake_parse_arguments(ARG "" "" "ENV" ${ARGN})
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${ARG_ENV} ${python} -c "${code}"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE failed
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(${lines_var} "" PARENT_SCOPE)
  set(${error_var} "${err}" PARENT_SCOPE)
  if(failed)
    return()
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  list(LENGTH lines have)
  if(have LESS count)
    set(${error_var} "it printed ${have} lines, not ${count}: ${out}" PARENT_SCOPE)
    return()
  endif()
  math(EXPR first "${have} - ${count}")
  list(SUBLIST lines ${first} ${count} lines)
  set(${lines_var} "${lines}" PARENT_SCOPE)
endfunction()

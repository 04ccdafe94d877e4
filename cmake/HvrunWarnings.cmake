# Warnings for our own targets only (hvrun_set_warnings), so third-party and generated code
# Designated initializers leave unnamed members at their defaults on purpose, hence
# -Wno-missing-field-initializers.
# stays quiet.
add_library(hvrun_warnings INTERFACE)
add_library(hvrun::warnings ALIAS hvrun_warnings)
target_compile_options(hvrun_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor
    -Wno-missing-field-initializers>
  $<$<AND:$<BOOL:${HVRUN_WERROR}>,$<COMPILE_LANGUAGE:C,CXX>>:-Werror>)
# GCC 12 at -O3 reports a false -Wrestrict inside std::string's operator+ (GCC bug 105651).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(hvrun_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
endif()

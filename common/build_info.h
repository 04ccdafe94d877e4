// What this build of hvrun contains, as constants: the public API's BuildInfo
// (include/hvrun/build_info.h), which the launcher's --check-build prints too. Code
// inside hvrun includes this header.
#pragma once

#include "hvrun/build_info.h"

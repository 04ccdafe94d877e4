// Status and Result, as every component of hvrun uses them: the public API's own type
// (include/hvrun/status.h, installed for trainers), so that an error made anywhere
// in hvrun reaches a trainer as it is. Code inside hvrun includes this header.
#pragma once

#include "hvrun/status.h"

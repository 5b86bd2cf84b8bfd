// The whole native C++ API of uwarp.
#pragma once

#include "uwarp/cm.h"
#include "uwarp/status.h"
#include "uwarp/types.h"
#include "uwarp/verbs.h"

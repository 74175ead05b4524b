// A directory that the table does not name.
#include "common/logging.h"

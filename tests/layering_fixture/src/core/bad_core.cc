// A core source that reaches for the wire types: forbidden.
#include "core/resources/resource.h"
#include "common/clock.h"
#include <proto/trainyard.pb.h>

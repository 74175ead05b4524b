// A store source that reaches up into the server: forbidden.
#include "store/state_store.h"
#include "api/job_spec.h"
#include "server/job_manager.h"
#include "proto/trainyard.pb.h"

// A test of the client belongs to jobmaster's test program: it may use the
// test master.
#include "jobmaster/test_master.h"
#include "jobmaster/client/job_master_client.h"

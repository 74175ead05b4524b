// The workers' library reaching into the job master's server side: forbidden;
// the wire framing is allowed.
#include "jobmaster/client/job_master_client.h"
#include "jobmaster/frame.h"
#include "jobmaster/master_state.h"

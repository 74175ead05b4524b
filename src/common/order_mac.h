// The text a server's order to checkpoint is authenticated over, for the
// job master's port (proto/jobmaster.proto, ServerOrder): the server MACs
// it with the master's job token (server/master_orders.h), the master checks
// it (jobmaster/master_checkpoint.cc). One definition, so the two agree.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace trainyard {

// Each field on its own line, the free-text reason last and length-prefixed:
// no two orders share a text.
inline std::string OrderMacText(absl::string_view job, int64_t order_id, int64_t deadline_unix_ms,
                                absl::string_view reason) {
  return absl::StrCat("trainyard checkpoint order\njob=", job, "\nid=", order_id, "\ndeadline=", deadline_unix_ms,
                      "\nreason[", reason.size(), "]=", reason);
}

}  // namespace trainyard

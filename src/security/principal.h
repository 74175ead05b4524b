// Who a request speaks for: the authenticated principal that every check of
// authorization reads (docs/security.md). Never a field of the request.
#pragma once

#include <string>

namespace trainyard::security {

struct Principal {
  std::string user;       // the name the token was issued for
  bool admin = false;     // a cluster admin: every job, node verbs, tokens
  bool anonymous = true;  // no credential was checked (security off)
};

}  // namespace trainyard::security

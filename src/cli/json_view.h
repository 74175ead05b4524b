// The JSON that `-o json` prints: every field of the message by its proto
// name, with numbers as JSON numbers (64-bit ones too), enum values named
// as the tables name them (SUCCEEDED, RUNNING, READY; priority and
// framework in lower case, as in a job spec), and every GPU mask also as a
// list of GPU indices ("gpu_mask": 5, "gpu_mask_indices": [0, 2]).
#pragma once

#include <string>

#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"

namespace trainyard::cli {

// The message as a JSON value (see above). Unset sub-messages are printed
// with their defaults, so a script can read any field without checks.
nlohmann::json ViewJson(const google::protobuf::Message& message);

// The enum value's name as `-o json` and the tables show it.
std::string EnumText(const google::protobuf::EnumValueDescriptor* value);

}  // namespace trainyard::cli

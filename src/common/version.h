// The version Trainyard reports in `trainyard --version` and on the wire.
#pragma once

namespace trainyard {
inline constexpr const char kVersion[] = "0.1.0";
}  // namespace trainyard

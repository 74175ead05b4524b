// Ports in use on this node, read from /proc/net/{tcp,tcp6,udp,udp6} (no
// netstat), and the kernel's ephemeral range. The /proc root
// is a parameter so tests read recorded files.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "core/resources/port_ranges.h"

namespace trainyard::agent {

// Returns the local ports of the sockets listed in one /proc/net/{tcp,udp}[6]
// file. TCP: every socket with a local port, whatever its state (LISTEN,
// ESTABLISHED, TIME_WAIT, ...). UDP: every bound socket. An error names the
// line that does not parse.
absl::StatusOr<std::vector<uint32_t>> ParseProcNetPorts(absl::string_view text);

// Returns the ports in use from PROC_ROOT/net/{tcp,tcp6,udp,udp6}. A missing
// file (e.g. no IPv6) counts as empty; an unreadable or malformed one is an
// error naming the file.
absl::StatusOr<core::PortRanges> ReadPortsInUse(const std::string& proc_root = "/proc");

// Returns the kernel's ephemeral range from
// PROC_ROOT/sys/net/ipv4/ip_local_port_range ("32768\t60999").
absl::StatusOr<core::PortRanges> ReadEphemeralPortRange(const std::string& proc_root = "/proc");

}  // namespace trainyard::agent

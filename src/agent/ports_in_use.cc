// Reads /proc/net socket tables. Each line after the header looks like
//   "  0: 0100007F:1F90 00000000:0000 0A ..." — the local address ends in
// ":PORT" in hex.
#include "agent/ports_in_use.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace trainyard::agent {
namespace {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, bool* missing) {
  std::ifstream in(path);
  if (!in) {
    *missing = true;
    return std::string();
  }
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return absl::UnavailableError(absl::StrCat("cannot read ", path));
  return out.str();
}

absl::StatusOr<uint32_t> LocalPortOfLine(absl::string_view line, int line_no) {
  std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", line_no, " \"", line, "\": ", why));
  };
  if (fields.size() < 4) return bad("expected at least 4 fields (sl local rem st)");
  absl::string_view local = fields[1];
  size_t colon = local.rfind(':');
  if (colon == absl::string_view::npos) return bad("local address has no ':PORT'");
  uint32_t port = 0;
  if (!absl::SimpleHexAtoi(local.substr(colon + 1), &port) || port > 65535) {
    return bad("local port is not a hex number 0..FFFF");
  }
  return port;
}

}  // namespace

absl::StatusOr<std::vector<uint32_t>> ParseProcNetPorts(absl::string_view text) {
  std::vector<uint32_t> ports;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (trimmed.empty() || line_no == 1) continue;  // header "sl local_address ..."
    absl::StatusOr<uint32_t> port = LocalPortOfLine(trimmed, line_no);
    if (!port.ok()) return port.status();
    if (*port != 0) ports.push_back(*port);
  }
  return ports;
}

absl::StatusOr<core::PortRanges> ReadPortsInUse(const std::string& proc_root) {
  core::PortRanges in_use;
  for (const char* name : {"tcp", "tcp6", "udp", "udp6"}) {
    std::string path = absl::StrCat(proc_root, "/net/", name);
    bool missing = false;
    absl::StatusOr<std::string> text = ReadWholeFile(path, &missing);
    if (!text.ok()) return text.status();
    if (missing) continue;
    absl::StatusOr<std::vector<uint32_t>> ports = ParseProcNetPorts(*text);
    if (!ports.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", ports.status().message()));
    }
    for (uint32_t port : *ports) in_use.Add({port, port});
  }
  return in_use;
}

absl::StatusOr<core::PortRanges> ReadEphemeralPortRange(const std::string& proc_root) {
  std::string path = absl::StrCat(proc_root, "/sys/net/ipv4/ip_local_port_range");
  bool missing = false;
  absl::StatusOr<std::string> text = ReadWholeFile(path, &missing);
  if (!text.ok()) return text.status();
  if (missing) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
  std::vector<absl::string_view> parts =
      absl::StrSplit(*text, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
  uint32_t lo = 0, hi = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &lo) || !absl::SimpleAtoi(parts[1], &hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected two numbers \"LOW HIGH\", got \"", *text, "\""));
  }
  absl::StatusOr<core::PortRanges> range = core::PortRanges::Of(lo, hi);
  if (!range.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", range.status().message()));
  return range;
}

}  // namespace trainyard::agent

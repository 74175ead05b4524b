// The barrier record file (see barrier_record.h).
#include "jobmaster/barrier_record.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace trainyard::jobmaster {

absl::Status WriteBarrierRecord(const std::string& path, int64_t passed) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << passed << "\n";
    if (!out.flush()) {
      return absl::UnavailableError(absl::StrFormat("cannot write %s: %s", tmp,
                                                    std::strerror(errno)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrFormat("cannot rename %s to %s: %s", tmp, path,
                                                  std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ReadBarrierRecord(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("no barrier record at %s", path));
  std::stringstream text;
  text << in.rdbuf();
  int64_t passed = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text.str()), &passed) || passed < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "barrier record %s holds '%s', not a count of barriers", path, text.str()));
  }
  return passed;
}

}  // namespace trainyard::jobmaster

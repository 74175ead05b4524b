// The fuzz targets' scratch files (see fuzz_files.h).
#include "fuzz/fuzz_files.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/check.h"

namespace trainyard::fuzz {

const std::string& ScratchDir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/trainyard-fuzz-XXXXXX";
    TY_CHECK(mkdtemp(pattern.data()) != nullptr, "cannot make a scratch directory %s", pattern.c_str());
    static std::string made = pattern;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(made, ec);  // best effort: it is a temporary directory
    });
    return pattern;
  }();
  return dir;
}

void WriteScratchFile(const std::string& path, std::string_view data) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    TY_CHECK(out.flush().good(), "cannot write %s", path.c_str());
  }
  chmod(path.c_str(), 0600);
}

}  // namespace trainyard::fuzz

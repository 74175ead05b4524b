// Files for the fuzz targets that read them (configs, records, token
// stores): one private temporary directory per process, made at the first
// call and removed at exit, and a helper that writes a file whole.
#pragma once

#include <string>
#include <string_view>

namespace trainyard::fuzz {

// A directory of this process (0700, under $TMPDIR or /tmp), removed with
// everything in it when the process exits.
const std::string& ScratchDir();

// Writes `data` to `path` (replacing it, mode 0600); aborts when it cannot:
// a fuzz target that cannot write its scratch file tests nothing.
void WriteScratchFile(const std::string& path, std::string_view data);

}  // namespace trainyard::fuzz

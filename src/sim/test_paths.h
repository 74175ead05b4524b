// Where the simulator's tests find their input files: the hand-made traces
// in src/sim/testdata, and the public Alibaba openb trace that CI places in
// ../shared/traces beside the repository (absent on some machines).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace trainyard::sim {

// The repository root: $TRAINYARD_SOURCE_DIR (set by ctest), else found from
// this file's path.
inline std::filesystem::path SourceDirForTest() {
  if (const char* dir = std::getenv("TRAINYARD_SOURCE_DIR"); dir != nullptr && *dir) return dir;
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
}

// A file under src/sim/testdata.
inline std::string SimTestdataForTest(const std::string& name) {
  return (SourceDirForTest() / "src" / "sim" / "testdata" / name).string();
}

// The folder of the Alibaba openb trace files, or "" when it is absent.
inline std::string OpenbDirForTest() {
  std::filesystem::path dir = SourceDirForTest() / ".." / "shared" / "traces" / "alibaba-openb";
  return std::filesystem::exists(dir / "openb_node_list_gpu_node.csv") ? dir.string() : "";
}

}  // namespace trainyard::sim

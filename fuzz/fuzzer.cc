// One libFuzzer program per target (the `fuzz` preset builds NAME_fuzzer
// with TRAINYARD_FUZZ_TARGET="NAME"): hands each input to the target's entry
// point (entry_points.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/check.h"
#include "common/logging.h"
#include "fuzz/entry_points.h"
#include "google/protobuf/stubs/logging.h"

#ifndef TRAINYARD_FUZZ_TARGET
#error "TRAINYARD_FUZZ_TARGET names the entry point (fuzz/CMakeLists.txt sets it)"
#endif

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The master logs every refusal; millions of them would be most of the time.
  trainyard::SetLogLevel(trainyard::LogLevel::kError);
  // Protobuf logs each string field that is not UTF-8 (the master refuses
  // such a request either way); printing that is what the fuzzer would do most.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const trainyard::fuzz::Target* target =
      trainyard::fuzz::FindTarget(TRAINYARD_FUZZ_TARGET);
  TY_CHECK(target != nullptr, "no fuzz target %s", TRAINYARD_FUZZ_TARGET);
  target->run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

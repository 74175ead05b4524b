// A deliberately impure file: the purity checks must reject it (src/core's
// and src/server/control's); protobuf is reported for src/core only.
#include <thread>
#include <grpcpp/grpcpp.h>
#include "google/protobuf/arena.h"

int Impure() { return absl::Now() == absl::InfinitePast(); }

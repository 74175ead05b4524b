// TY_CHECK: for true invariants only (a state transition the table forbids,
// an index out of range). A failed check logs where and why and aborts: it
// is a bug in Trainyard, never a user's error (those are absl::Status).
#pragma once

#include <cstdio>
#include <cstdlib>

#define TY_CHECK(cond, ...)                                                            \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);    \
      std::fprintf(stderr, __VA_ARGS__);                                               \
      std::fputc('\n', stderr);                                                        \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

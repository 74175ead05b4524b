// TarGzWriter: a gzip'd tar archive (POSIX ustar) written as a stream, for
// GET /api/v1/jobs/{job}/logs.tar.gz. Entries are regular files whose size
// is known when they begin (a ustar header carries it); the compressed
// bytes leave through the sink as zlib produces them, so the archive is
// never held whole. zlib does the compression; the tar headers, 512-byte
// blocks of fixed fields, are written here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace trainyard::server::http {

inline constexpr int kTarBlock = 512;

// The ustar header of a regular file `name` (mode 0644) of `size` bytes,
// modified at `mtime_unix` seconds. Names up to 255 bytes (split at a '/'
// into the header's prefix and name fields when above 100). InvalidArgument
// naming the entry when the name does not fit or the size is above ustar's
// 8 GiB.
absl::Status TarHeader(const std::string& name, int64_t size, int64_t mtime_unix, char out[kTarBlock]);

class TarGzWriter {
 public:
  // Takes compressed bytes; false when they cannot be delivered (the
  // reader went away), which ends the archive with an error.
  using Sink = std::function<bool(const char* data, size_t size)>;

  explicit TarGzWriter(Sink sink);
  ~TarGzWriter();

  // Begins an entry of `size` bytes; Write then gives exactly that many.
  // REQUIRES: the previous entry was given whole.
  absl::Status BeginFile(const std::string& name, int64_t size, int64_t mtime_unix);
  absl::Status Write(absl::string_view data);
  // The end of the archive (two zero blocks) and the gzip trailer.
  // REQUIRES: the last entry was given whole.
  absl::Status Finish();

 private:
  // Compresses `data` (flush: zlib's Z_NO_FLUSH or Z_FINISH) into the sink.
  absl::Status Deflate(absl::string_view data, int flush);

  struct Zlib;
  Sink sink_;
  std::unique_ptr<Zlib> z_;
  int64_t left_ = 0;     // bytes of the current entry still to come
  int64_t written_ = 0;  // of the current entry
  bool finished_ = false;
};

}  // namespace trainyard::server::http

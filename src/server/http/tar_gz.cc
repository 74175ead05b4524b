// The ustar headers and the gzip stream of TarGzWriter (see tar_gz.h).
#include "server/http/tar_gz.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainyard::server::http {
namespace {

// An octal field of `width` bytes: width - 1 digits, zero-padded, then NUL.
void Octal(char* field, int width, int64_t value) {
  std::string digits = absl::StrFormat("%0*o", width - 1, static_cast<uint64_t>(value));
  memcpy(field, digits.data(), static_cast<size_t>(width - 1));
  field[width - 1] = '\0';
}

void Copy(char* field, size_t width, absl::string_view text) { memcpy(field, text.data(), std::min(width, text.size())); }

}  // namespace

absl::Status TarHeader(const std::string& name, int64_t size, int64_t mtime_unix, char out[kTarBlock]) {
  // ustar's fields (offset, width): name 0/100, mode 100/8, uid 108/8,
  // gid 116/8, size 124/12, mtime 136/12, chksum 148/8, typeflag 156,
  // linkname 157/100, magic 257/6, version 263/2, uname 265/32,
  // gname 297/32, devmajor 329/8, devminor 337/8, prefix 345/155.
  constexpr int64_t kMaxSize = (int64_t{1} << 33) - 1;  // 11 octal digits
  if (size < 0 || size > kMaxSize) {
    return absl::InvalidArgumentError(absl::StrCat("archive entry ", name, ": ", size, " bytes is above tar's 8 GiB"));
  }
  std::string prefix, base = name;
  if (name.size() > 100) {
    size_t cut = name.rfind('/', 155);
    if (cut == std::string::npos || cut == 0 || name.size() - cut - 1 > 100) {
      return absl::InvalidArgumentError(absl::StrCat("archive entry ", name, ": the name is too long for tar"));
    }
    prefix = name.substr(0, cut);
    base = name.substr(cut + 1);
  }
  memset(out, 0, kTarBlock);
  Copy(out, 100, base);
  Octal(out + 100, 8, 0644);
  Octal(out + 108, 8, 0);
  Octal(out + 116, 8, 0);
  Octal(out + 124, 12, size);
  Octal(out + 136, 12, std::max<int64_t>(0, mtime_unix));
  out[156] = '0';  // a regular file
  memcpy(out + 257, "ustar", 6);  // with its NUL
  memcpy(out + 263, "00", 2);
  Copy(out + 265, 32, "trainyard");
  Copy(out + 297, 32, "trainyard");
  Octal(out + 329, 8, 0);
  Octal(out + 337, 8, 0);
  Copy(out + 345, 155, prefix);
  // The checksum counts its own field as eight spaces; it is written as six
  // octal digits, a NUL and a space.
  memset(out + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < kTarBlock; ++i) sum += static_cast<unsigned char>(out[i]);
  std::string digits = absl::StrFormat("%06o", sum);
  memcpy(out + 148, digits.data(), 6);
  out[154] = '\0';
  out[155] = ' ';
  return absl::OkStatus();
}

struct TarGzWriter::Zlib {
  z_stream stream{};
  bool ok = false;
};

TarGzWriter::TarGzWriter(Sink sink) : sink_(std::move(sink)), z_(std::make_unique<Zlib>()) {
  // windowBits 15 + 16: zlib writes the gzip header and trailer.
  z_->ok = deflateInit2(&z_->stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
}

TarGzWriter::~TarGzWriter() {
  if (z_->ok) deflateEnd(&z_->stream);
}

absl::Status TarGzWriter::Deflate(absl::string_view data, int flush) {
  if (!z_->ok) return absl::InternalError("archive: zlib did not start");
  z_stream& z = z_->stream;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  char out[64 << 10];
  do {
    z.next_out = reinterpret_cast<Bytef*>(out);
    z.avail_out = sizeof(out);
    int r = deflate(&z, flush);
    if (r == Z_STREAM_ERROR) return absl::InternalError("archive: zlib failed");
    size_t have = sizeof(out) - z.avail_out;
    if (have > 0 && !sink_(out, have)) return absl::CancelledError("archive: the reader went away");
  } while (z.avail_out == 0 || z.avail_in > 0);
  return absl::OkStatus();
}

absl::Status TarGzWriter::BeginFile(const std::string& name, int64_t size, int64_t mtime_unix) {
  if (left_ != 0 || finished_) {
    return absl::FailedPreconditionError(absl::StrCat("archive entry ", name, ": the previous entry is not whole"));
  }
  char header[kTarBlock];
  if (absl::Status st = TarHeader(name, size, mtime_unix, header); !st.ok()) return st;
  left_ = size;
  written_ = 0;
  return Deflate(absl::string_view(header, kTarBlock), Z_NO_FLUSH);
}

absl::Status TarGzWriter::Write(absl::string_view data) {
  if (static_cast<int64_t>(data.size()) > left_) {
    return absl::FailedPreconditionError("archive: an entry was given more bytes than its header says");
  }
  left_ -= static_cast<int64_t>(data.size());
  written_ += static_cast<int64_t>(data.size());
  if (absl::Status st = Deflate(data, Z_NO_FLUSH); !st.ok()) return st;
  if (left_ > 0 || written_ % kTarBlock == 0) return absl::OkStatus();
  static const char kZeros[kTarBlock] = {};
  return Deflate(absl::string_view(kZeros, kTarBlock - written_ % kTarBlock), Z_NO_FLUSH);
}

absl::Status TarGzWriter::Finish() {
  if (left_ != 0) return absl::FailedPreconditionError("archive: the last entry is not whole");
  if (finished_) return absl::OkStatus();
  finished_ = true;
  static const char kEnd[2 * kTarBlock] = {};
  return Deflate(absl::string_view(kEnd, sizeof(kEnd)), Z_FINISH);
}

}  // namespace trainyard::server::http

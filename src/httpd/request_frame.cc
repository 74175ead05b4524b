// Where a request ends (see request_frame.h).
#include "httpd/request_frame.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace trainyard::httpd {
namespace {

absl::string_view WithoutCr(absl::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// A Content-Length value: digits only (no sign, no spaces inside), at most
// 18 of them.
bool ParseLength(absl::string_view v, int64_t* out) {
  if (v.empty() || v.size() > 18) return false;
  for (char c : v) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return absl::SimpleAtoi(v, out);
}

// One header field of the head at [begin, end) (without its line end).
void ReadField(absl::string_view line, size_t begin, size_t end, RequestHead* h) {
  size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return;  // the library judges the rest of the syntax
  absl::string_view name = line.substr(0, colon);
  absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
  if (absl::EqualsIgnoreCase(name, "Content-Length")) {
    int64_t n = 0;
    if (!ParseLength(value, &n) || (h->has_length && n != h->content_length)) {
      h->error = absl::StrCat("Content-Length: '", value.substr(0, 40), "' is not one length in bytes");
      return;
    }
    h->has_length = true;
    h->content_length = n;
  } else if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
    size_t comma = value.rfind(',');
    absl::string_view last = absl::StripAsciiWhitespace(comma == absl::string_view::npos ? value : value.substr(comma + 1));
    if (!absl::EqualsIgnoreCase(last, "chunked")) {
      h->error = "Transfer-Encoding: a request body must end chunked";
      return;
    }
    h->chunked = true;
  } else if (absl::EqualsIgnoreCase(name, "Expect") && absl::EqualsIgnoreCase(value, "100-continue")) {
    // One line is taken out before the library reads the head (the door
    // answers the 100 itself): a second would reach it.
    if (h->expects_continue) {
      h->error = "Expect: 100-continue is given more than once";
      return;
    }
    h->expects_continue = true;
    h->expect_begin = begin;
    h->expect_end = end;
  } else if (absl::EqualsIgnoreCase(name, "Authorization")) {
    h->authorization = std::string(value);
  }
}

}  // namespace

size_t FindHeadEnd(absl::string_view in, size_t from) {
  for (size_t i = from > 2 ? from - 2 : 0; i < in.size(); ++i) {
    i = in.find('\n', i);
    if (i == absl::string_view::npos) return absl::string_view::npos;
    if (i + 1 < in.size() && in[i + 1] == '\n') return i + 2;
    if (i + 2 < in.size() && in[i + 1] == '\r' && in[i + 2] == '\n') return i + 3;
  }
  return absl::string_view::npos;
}

RequestHead ParseHead(absl::string_view head) {
  RequestHead h;
  h.blank_line = absl::EndsWith(head, "\r\n") && head.size() >= 3 && head[head.size() - 3] == '\n' ? head.size() - 2
                                                                                                    : head.size() - 1;
  size_t at = head.find('\n');  // the request line is the library's to judge
  while (at != absl::string_view::npos && at + 1 < h.blank_line && h.error.empty()) {
    size_t begin = at + 1;
    size_t end = head.find('\n', begin);
    ReadField(WithoutCr(head.substr(begin, end - begin)), begin, end + 1, &h);
    at = end;
  }
  if (h.error.empty() && h.chunked && h.has_length) {
    h.error = "a request has Content-Length or Transfer-Encoding, not both";
  }
  return h;
}

ChunkResult ScanChunks(absl::string_view in, ChunkScan* scan, size_t* end) {
  constexpr size_t kMostLine = 4096;  // a size line (with extensions) or a trailer field
  while (true) {
    size_t eol = in.find('\n', scan->pos);
    if (eol == absl::string_view::npos) {
      return in.size() - scan->pos > kMostLine ? ChunkResult::kMalformed : ChunkResult::kNeedMore;
    }
    // A line past the cap is refused whether its end has come or not, so
    // the answer does not depend on how the client cut its bytes.
    if (eol - scan->pos > kMostLine) return ChunkResult::kMalformed;
    absl::string_view line = WithoutCr(in.substr(scan->pos, eol - scan->pos));
    if (scan->in_trailers) {
      scan->pos = eol + 1;
      if (line.empty()) {
        *end = scan->pos;
        return ChunkResult::kDone;
      }
      continue;
    }
    absl::string_view hex = absl::StripAsciiWhitespace(line.substr(0, line.find(';')));
    uint64_t size = 0;
    bool digits = !hex.empty() && hex.size() <= 15 &&
                  std::all_of(hex.begin(), hex.end(), [](char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)); });
    if (!digits || !absl::SimpleHexAtoi(hex, &size)) return ChunkResult::kMalformed;
    if (size == 0) {
      scan->in_trailers = true;
      scan->pos = eol + 1;
      continue;
    }
    size_t data_end = eol + 1 + size;
    if (in.size() < data_end + 1) return ChunkResult::kNeedMore;
    if (in[data_end] == '\n') {
      scan->pos = data_end + 1;
    } else if (in[data_end] != '\r') {
      return ChunkResult::kMalformed;
    } else if (in.size() < data_end + 2) {
      return ChunkResult::kNeedMore;
    } else if (in[data_end + 1] != '\n') {
      return ChunkResult::kMalformed;
    } else {
      scan->pos = data_end + 2;
    }
  }
}

size_t NormalizeHead(std::string* in, size_t head_end, const RequestHead& head) {
  if (!head.has_length && !head.chunked) {
    static constexpr absl::string_view kNoBody = "Content-Length: 0\r\n";
    in->insert(head.blank_line, kNoBody.data(), kNoBody.size());
    head_end += kNoBody.size();
  }
  if (head.expects_continue) {
    in->erase(head.expect_begin, head.expect_end - head.expect_begin);
    head_end -= head.expect_end - head.expect_begin;
  }
  return head_end;
}

}  // namespace trainyard::httpd

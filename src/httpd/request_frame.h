// Request framing for the HTTP door (http_server.h): where one HTTP/1.1
// request ends in the bytes a connection has sent so far, read before any
// worker thread is given the connection. The door reads every connection
// itself, without blocking, and hands a request to a worker only once it is
// whole, so a client that sends slowly holds a descriptor and a buffer,
// never a thread. Pure functions over bytes: no sockets, no clock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace trainyard::httpd {

// Offset just past the empty line that ends a request's head (request line
// and header fields) in `in`, or npos while it has not come. Scans from
// `from` (a previous call's in.size(), so a head sent a byte at a time is
// scanned once); a CRLF or a bare LF ends a line. Empty lines before the
// request line are skipped as RFC 9112 2.2 allows.
size_t FindHeadEnd(absl::string_view in, size_t from);

// What a request's head says about its body, and the fields the door acts on.
struct RequestHead {
  // The head cannot be framed: a Content-Length that is not one number, or
  // a Transfer-Encoding whose last coding is not chunked. `error` says why
  // (answered 400 and the connection closed: the rest of the bytes cannot
  // be told apart from the next request).
  std::string error;
  bool chunked = false;
  bool has_length = false;
  int64_t content_length = 0;
  // "Expect: 100-continue": the client waits for a 100 before the body.
  bool expects_continue = false;
  size_t expect_begin = 0;  // the Expect line, [begin, end) in the head
  size_t expect_end = 0;
  size_t blank_line = 0;     // where the empty line that ends the head begins
  std::string authorization;  // the Authorization field's value ("" when none)
};

// Parses `head` (the bytes up to FindHeadEnd's offset).
RequestHead ParseHead(absl::string_view head);

// A chunked body's progress: ScanChunks resumes from `pos` (an offset into
// the connection's input, at a chunk's size line or in the trailers).
struct ChunkScan {
  size_t pos = 0;
  bool in_trailers = false;
};
enum class ChunkResult { kNeedMore, kDone, kMalformed };
// Follows chunks in `in` from `scan->pos`; at kDone `*end` is the offset
// just past the body (and its trailers). Each chunk is stepped over once,
// however the bytes arrive.
ChunkResult ScanChunks(absl::string_view in, ChunkScan* scan, size_t* end);

// Rewrites a whole head in `in` (ending at `head_end`) before the library
// parses it: a request with neither Content-Length nor Transfer-Encoding
// gets "Content-Length: 0" (it has no body, RFC 9112 6.3; the library would
// otherwise read until the connection closes), and the Expect line goes
// (the door has answered 100 itself where it was due). Returns the head's
// new end.
size_t NormalizeHead(std::string* in, size_t head_end, const RequestHead& head);

}  // namespace trainyard::httpd

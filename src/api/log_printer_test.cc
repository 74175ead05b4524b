// LogPrinter: what `trainyard logs` and the REST log routes print of the
// chunks a Logs stream brings.
#include "api/log_printer.h"

#include <sstream>

#include "api/log_lines.h"
#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

v1::LogChunk Chunk(const std::string& data, bool err, int attempt = 0) {
  v1::LogChunk c;
  c.set_task("j-worker-0");
  c.set_attempt(attempt);
  c.set_data(data);
  c.set_stderr(err);
  return c;
}

v1::LogChunk End(bool err) {
  v1::LogChunk c = Chunk("", err);
  c.set_output_end(true);
  return c;
}

TEST(LogPrinterTest, ReadWholeStdoutAndStderrInterleaveByTimeWithoutStamps) {
  std::ostringstream out;
  LogPrinter p({}, out, out);
  p.Add(Chunk(LogStamp(1) + "one\n" + LogStamp(3) + "three\n", false));
  EXPECT_EQ(out.str(), "");  // stderr may still have an earlier line
  p.Add(Chunk(LogStamp(2) + "two\n" + LogStamp(4) + "four\n", true));
  p.Add(End(false));
  p.Add(End(true));
  EXPECT_EQ(out.str(), "one\ntwo\nthree\nfour\n");
}

TEST(LogPrinterTest, FollowedPiecesArePrintedAsTheyCome) {
  std::ostringstream out;
  LogPrinter p({.follow = true}, out, out);
  p.Add(Chunk(LogStamp(5) + "late\n", false));
  EXPECT_EQ(out.str(), "late\n");
  p.Add(Chunk(LogStamp(1) + "half", true));
  EXPECT_EQ(out.str(), "late\nhalf");
  p.Add(Chunk(" a line\n", true));
  EXPECT_EQ(out.str(), "late\nhalf a line\n");
}

TEST(LogPrinterTest, AChunksErrorGoesToErrWithThePrefix) {
  std::ostringstream out, err;
  LogPrinter p({.error_prefix = "x: "}, out, err);
  v1::LogChunk c = Chunk("", false);
  c.set_error("node n-1 is LOST");
  p.Add(c);
  EXPECT_EQ(err.str(), "x: node n-1 is LOST\n");
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace trainyard::api

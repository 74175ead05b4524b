// The worker table's encoding: what a worker decodes is what workers
// registered, field by field, and damaged tables are refused, not trusted.
#include "jobmaster/worker_table.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::jobmaster {
namespace {

using ::testing::HasSubstr;

pb::WorkerInfo Info(int id, int port, std::string role, int index) {
  pb::WorkerInfo info;
  info.set_worker_id(id);
  info.set_ip(absl::StrCat("10.0.", id / 8, ".", id % 8));
  info.set_port(port);
  info.set_node_ip(absl::StrCat("10.0.", id / 8, ".1"));
  info.set_role(std::move(role));
  info.set_index(index);
  info.set_task_name(absl::StrCat("gpt-", info.role(), "-", index));
  return info;
}

pb::WorkerTable Parse(const std::string& serialized) {
  pb::WorkerTable table;
  EXPECT_TRUE(table.ParseFromString(serialized));
  return table;
}

TEST(WorkerTable, DecodesEveryFieldAsRegisteredWithGapsInIds) {
  std::vector<pb::WorkerInfo> in = {Info(0, 29500, "chief", 0), Info(1, 29501, "worker", 0),
                                    Info(4, 40000, "worker", 3), Info(5, 80, "worker", 4)};
  in[1].set_task_name("custom-name");   // not the usual job-role-index
  in[2].set_task_name("");              // none at all
  in[2].set_rack("r7");
  in[2].set_data_center("dc2");
  in[2].add_ports(31000);
  in[2].add_ports(30999);
  in[3].mutable_resource()->set_memory_mb(4096);
  in[3].mutable_resource()->set_gpus(8);
  WorkerTableEncoder encoder("gpt");
  for (size_t i = 0; i < in.size(); ++i) {
    encoder.Add(in[i], i == 3 ? "192.168.1.9" : in[i].ip(), static_cast<int>(i));
  }
  pb::WorkerTable table = Parse(encoder.Finish(8, 42));
  EXPECT_EQ(table.num_workers(), 8);
  EXPECT_EQ(table.version(), 42);
  std::vector<TableRow> rows;
  ASSERT_TRUE(DecodeWorkerTable(table, &rows).ok());
  ASSERT_EQ(rows.size(), in.size());
  in[3].set_ip("192.168.1.9");  // the address the master saw, not an empty ip
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(rows[i].info.SerializeAsString(), in[i].SerializeAsString())
        << "row " << i << ": " << rows[i].info.ShortDebugString();
    EXPECT_EQ(rows[i].restart_count, static_cast<int>(i));
  }
}

TEST(WorkerTable, ABigRegularJobTakesFewBytesPerWorker) {
  WorkerTableEncoder encoder("gpt");
  constexpr int kWorkers = 10000;
  for (int id = 0; id < kWorkers; ++id) {
    encoder.Add(Info(id, 29500 + id % 8, "worker", id), Info(id, 0, "", 0).ip(), 0);
  }
  std::string serialized = encoder.Finish(kWorkers, 1);
  // A WorkerStatus row of the same worker takes ~60 bytes.
  EXPECT_LT(serialized.size(), static_cast<size_t>(8 * kWorkers));
  std::vector<TableRow> rows;
  ASSERT_TRUE(DecodeWorkerTable(Parse(serialized), &rows).ok());
  ASSERT_EQ(rows.size(), static_cast<size_t>(kWorkers));
  EXPECT_EQ(rows[9999].info.ip(), "10.0.1249.7");
  EXPECT_EQ(rows[9999].info.port(), 29507);
  EXPECT_EQ(rows[9999].info.task_name(), "gpt-worker-9999");
}

TEST(WorkerTable, RefusesDamagedColumnsNamingTheFault) {
  WorkerTableEncoder encoder("gpt");
  encoder.Add(Info(0, 1, "worker", 0), "10.0.0.1", 0);
  pb::WorkerTable table = Parse(encoder.Finish(1, 1));
  std::vector<TableRow> rows;
  pb::WorkerTable flipped = table;
  flipped.mutable_deflated_columns()->back() ^= 0x55;
  absl::Status s = DecodeWorkerTable(flipped, &rows);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("deflated_columns does not inflate"));
  pb::WorkerTable small = table;
  small.set_num_workers(0);  // a row for worker 0 in a job of none
  EXPECT_EQ(DecodeWorkerTable(small, &rows).code(), absl::StatusCode::kDataLoss);
  pb::WorkerTable huge = table;
  huge.set_columns_bytes(1u << 31);
  EXPECT_THAT(DecodeWorkerTable(huge, &rows).message(), HasSubstr("over 256 MiB"));
}

}  // namespace
}  // namespace trainyard::jobmaster

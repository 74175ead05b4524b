#include "store/store_backup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"

namespace trainyard {
namespace {

constexpr char kHeader[] = "trainyard-store-backup 1\n";
// A store transaction holds at most etcd's default 128 keys and 1.5 MiB.
constexpr size_t kKeysPerBatch = 100;
constexpr size_t kBytesPerBatch = 1 << 20;

// FNV-1a, 64 bits, over every record before the end: a file altered by
// accident (a flipped byte, a bad copy) is refused. Not a signature.
uint64_t Fnv1a(const std::string& data, size_t from, size_t to) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = from; i < to; ++i) {
    h ^= static_cast<uint8_t>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutRecord(std::string* out, char kind, const std::string& bytes) {
  out->push_back(kind);
  PutVarint(out, bytes.size());
  out->append(bytes);
}

std::string CountsText(const BackupCounts& c, uint64_t sum) {
  return absl::StrCat(c.jobs, " ", c.tasks, " ", c.events, " ", c.nodes, " ", c.meta, " ", absl::Hex(sum, absl::kZeroPad16));
}

absl::Status WriteWhole(const std::string& path, const std::string& data) {
  // A name of its own, made here (never one that was there, never through
  // a link), 0600 whatever the umask; renamed over `path` when whole.
  std::string tmp = path + ".partial-XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return absl::FailedPreconditionError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  if (::fchmod(fd, 0600) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return absl::FailedPreconditionError(absl::StrCat("cannot set the mode of ", tmp, ": ", std::strerror(err)));
  }
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::ResourceExhaustedError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return absl::FailedPreconditionError(absl::StrCat("cannot write ", path, ": ", std::strerror(err)));
  }
  // The rename itself made durable.
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

// The records of a backup file, checked whole before any is written.
struct Parsed {
  std::vector<v1::JobRecord> jobs;
  std::vector<v1::JobEventRecord> events;
  std::vector<v1::NodeRecord> nodes;
  std::map<std::string, std::string> meta;
  BackupCounts counts;
};

absl::StatusOr<Parsed> Parse(const std::string& path, const std::string& data) {
  auto bad = [&](const std::string& why) { return absl::DataLossError(absl::StrCat(path, ": ", why)); };
  if (data.compare(0, sizeof(kHeader) - 1, kHeader) != 0) return bad("not a Trainyard store backup");
  Parsed p;
  size_t at = sizeof(kHeader) - 1;
  bool ended = false;
  while (at < data.size()) {
    if (ended) return bad("bytes after the end record");
    const size_t record_at = at;
    char kind = data[at++];
    uint64_t size = 0;
    for (int shift = 0;; shift += 7) {
      if (at >= data.size() || shift > 63) return bad("a record's length is cut off");
      uint8_t b = static_cast<uint8_t>(data[at++]);
      size |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) break;
    }
    if (size > data.size() - at) return bad(absl::StrCat("a record of ", size, " bytes is cut off"));
    std::string bytes = data.substr(at, size);
    at += size;
    if (kind == 'j') {
      if (!p.jobs.emplace_back().ParseFromString(bytes)) return bad("a job record does not parse");
      p.counts.tasks += p.jobs.back().tasks_size();
    } else if (kind == 'e') {
      if (!p.events.emplace_back().ParseFromString(bytes)) return bad("an event record does not parse");
    } else if (kind == 'n') {
      if (!p.nodes.emplace_back().ParseFromString(bytes)) return bad("a node record does not parse");
    } else if (kind == 'm') {
      size_t nul = bytes.find('\0');
      if (nul == std::string::npos) return bad("a metadata record has no key");
      p.meta[bytes.substr(0, nul)] = bytes.substr(nul + 1);
    } else if (kind == 'z') {
      ended = true;
      p.counts.jobs = static_cast<int64_t>(p.jobs.size());
      p.counts.events = static_cast<int64_t>(p.events.size());
      p.counts.nodes = static_cast<int64_t>(p.nodes.size());
      p.counts.meta = static_cast<int64_t>(p.meta.size());
      std::string held = CountsText(p.counts, Fnv1a(data, 0, record_at));
      if (bytes != held) return bad(absl::StrCat("altered or cut: its records give ", held, ", its end says ", bytes));
    } else {
      return bad(absl::StrCat("unknown record kind ", static_cast<int>(static_cast<uint8_t>(kind))));
    }
  }
  if (!ended) return bad("cut off: no end record");
  return p;
}

}  // namespace

absl::StatusOr<BackupCounts> WriteBackup(StateStore& from, const std::string& path) {
  absl::StatusOr<std::vector<v1::JobRecord>> jobs = from.ListJobs({});
  if (!jobs.ok()) return jobs.status();
  absl::StatusOr<StoreSnapshot> snap = from.LoadAll();  // metadata read after the jobs: ids only grow
  if (!snap.ok()) return snap.status();
  BackupCounts counts;
  std::string out = kHeader;
  std::string bytes;
  for (const v1::JobRecord& job : *jobs) {
    job.SerializeToString(&bytes);
    PutRecord(&out, 'j', bytes);
    ++counts.jobs;
    counts.tasks += job.tasks_size();
  }
  for (const v1::JobRecord& job : *jobs) {
    absl::StatusOr<std::vector<v1::JobEventRecord>> events = from.ListEvents(job.id());
    if (!events.ok()) return events.status();
    for (const v1::JobEventRecord& e : *events) {
      e.SerializeToString(&bytes);
      PutRecord(&out, 'e', bytes);
      ++counts.events;
    }
  }
  for (const v1::NodeRecord& node : snap->nodes) {
    node.SerializeToString(&bytes);
    PutRecord(&out, 'n', bytes);
    ++counts.nodes;
  }
  for (const auto& [key, value] : snap->meta) {
    PutRecord(&out, 'm', key + std::string(1, '\0') + value);
    ++counts.meta;
  }
  PutRecord(&out, 'z', CountsText(counts, Fnv1a(out, 0, out.size())));
  if (absl::Status st = WriteWhole(path, out); !st.ok()) return st;
  return counts;
}

absl::StatusOr<BackupCounts> RestoreBackup(const std::string& path, StateStore& to) {
  std::string data;
  {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) data.append(buf, n);
    std::fclose(f);
  }
  absl::StatusOr<Parsed> parsed = Parse(path, data);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<StoreSnapshot> there = to.LoadAll();
  if (!there.ok()) return there.status();
  absl::StatusOr<std::vector<v1::JobRecord>> jobs_there = to.ListJobs({.include_tasks = false, .limit = 1});
  if (!jobs_there.ok()) return jobs_there.status();
  if (!jobs_there->empty() || !there->nodes.empty() || !there->meta.empty()) {
    return absl::FailedPreconditionError(
        "the store to restore into is not empty (it holds jobs, nodes or metadata): restore needs a new one");
  }
  // Events in their original order across jobs, appended after their job.
  std::vector<v1::JobEventRecord>& events = parsed->events;
  std::stable_sort(events.begin(), events.end(),
                   [](const v1::JobEventRecord& a, const v1::JobEventRecord& b) { return a.seq() < b.seq(); });
  std::map<uint64_t, std::vector<v1::JobEventRecord>> by_job;
  for (v1::JobEventRecord& e : events) {
    e.clear_seq();
    by_job[e.job_id()].push_back(std::move(e));
  }
  // Writes go in batches of at most kKeysPerBatch keys as the etcd store
  // counts them (a job row, one key per 64 tasks, one per event, node or
  // metadata value): few transactions, each within etcd's limit.
  WriteBatch batch;
  size_t keys = 0, bytes = 0;
  std::string what;
  auto flush = [&]() -> absl::Status {
    if (keys == 0) return absl::OkStatus();
    absl::Status st = to.Commit(std::move(batch));
    batch = WriteBatch();
    keys = 0;
    bytes = 0;
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("restoring ", what, ": ", st.message()));
    return st;
  };
  auto room = [&](size_t more_keys, size_t more_bytes) -> absl::Status {
    if (keys + more_keys > kKeysPerBatch || bytes + more_bytes > kBytesPerBatch) return flush();
    return absl::OkStatus();
  };
  for (v1::JobRecord& job : parsed->jobs) {
    uint64_t id = job.id();
    size_t job_keys = 1 + (static_cast<size_t>(job.tasks_size()) + 63) / 64;
    size_t job_bytes = job.ByteSizeLong();
    if (absl::Status st = room(job_keys, job_bytes); !st.ok()) return st;
    what = absl::StrCat("job ", id);
    batch.CreateJob(std::move(job), v1::JobEventRecord());
    keys += job_keys;
    bytes += job_bytes;
    for (v1::JobEventRecord& e : by_job[id]) {
      if (absl::Status st = room(1, e.ByteSizeLong()); !st.ok()) return st;
      bytes += e.ByteSizeLong();
      batch.AppendEvent(std::move(e));
      ++keys;
    }
  }
  what = "nodes and metadata";
  for (v1::NodeRecord& node : parsed->nodes) {
    if (absl::Status st = room(1, node.ByteSizeLong()); !st.ok()) return st;
    bytes += node.ByteSizeLong();
    batch.PutNode(std::move(node));
    ++keys;
  }
  for (auto& [key, value] : parsed->meta) {
    if (absl::Status st = room(1, key.size() + value.size()); !st.ok()) return st;
    bytes += key.size() + value.size();
    batch.PutMeta(key, value);
    ++keys;
  }
  if (absl::Status st = flush(); !st.ok()) return st;
  return parsed->counts;
}

}  // namespace trainyard

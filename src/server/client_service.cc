// Client RPC handlers: thin translations onto JobManager.
#include "server/client_service.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "api/job_spec.h"

namespace trainyard::server {

grpc::Status ToGrpc(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), std::string(st.message()));
}

grpc::ServerUnaryReactor* ClientService::Submit(grpc::CallbackServerContext* ctx, const v1::SubmitRequest* req,
                                                v1::SubmitResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  v1::JobSpec spec;
  if (req->has_spec()) {
    spec = req->spec();
  } else {
    absl::StatusOr<v1::JobSpec> parsed = api::ParseJobSpecYaml(req->yaml());
    if (!parsed.ok()) {
      reactor->Finish(ToGrpc(parsed.status()));
      return reactor;
    }
    spec = std::move(*parsed);
  }
  manager_->SubmitAsync(std::move(spec), [reactor, resp](absl::StatusOr<v1::SubmitResponse> r) {
    if (r.ok()) *resp = std::move(*r);
    reactor->Finish(r.ok() ? grpc::Status::OK : ToGrpc(r.status()));
  });
  return reactor;
}

grpc::Status ClientService::ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* req,
                                     v1::ListJobsResponse* resp) {
  for (auto& j : manager_->ListJobs(req->include_finished())) *resp->add_jobs() = std::move(j);
  return grpc::Status::OK;
}

grpc::Status ClientService::DescribeJob(grpc::ServerContext*, const v1::DescribeJobRequest* req,
                                        v1::JobView* resp) {
  absl::StatusOr<v1::JobView> v = manager_->Describe(req->job());
  if (!v.ok()) return ToGrpc(v.status());
  *resp = std::move(*v);
  return grpc::Status::OK;
}

grpc::Status ClientService::KillJob(grpc::ServerContext*, const v1::KillJobRequest* req,
                                    v1::KillJobResponse* resp) {
  absl::StatusOr<v1::JobState> st = manager_->Kill(req->job(), req->reason());
  if (!st.ok()) return ToGrpc(st.status());
  resp->set_state(*st);
  return grpc::Status::OK;
}

grpc::Status ClientService::Logs(grpc::ServerContext* ctx, const v1::LogsRequest* req,
                                 grpc::ServerWriter<v1::LogChunk>* writer) {
  auto tasks = manager_->TasksOf(req->job());
  if (!tasks.ok()) return ToGrpc(tasks.status());
  struct Cursor {
    std::string role;
    int index;
    bool err;  // the stderr stream
    int64_t offset = 0;
    bool done = false;
  };
  std::vector<Cursor> cursors;
  for (const auto& [role, index] : *tasks) {
    if (!req->role().empty() && role != req->role()) continue;
    if (req->index() >= 0 && !req->role().empty() && index != req->index()) continue;
    cursors.push_back({role, index, false});
    cursors.push_back({role, index, true});
  }
  if (cursors.empty()) {
    return grpc::Status(grpc::NOT_FOUND, absl::StrCat("job ", req->job(), " has no task ", req->role(),
                                                      req->index() >= 0 ? absl::StrCat("/", req->index()) : ""));
  }
  int attempt = req->attempt();  // -1 = the latest
  while (!ctx->IsCancelled()) {
    bool progress = false, all_done = true;
    for (Cursor& c : cursors) {
      if (c.done) continue;
      absl::StatusOr<v1::LogData> d = manager_->ReadLog(req->job(), c.role, c.index, attempt, c.offset, 64 * 1024, c.err);
      if (!d.ok()) {
        if (cursors.size() == 2) return ToGrpc(d.status());
        c.done = true;  // a task that never ran has no log
        continue;
      }
      if (!d->data().empty()) {
        v1::LogChunk chunk;
        chunk.set_task(absl::StrCat(req->job(), "-", c.role, "-", c.index));
        chunk.set_attempt(d->attempt());
        chunk.set_data(d->data());
        chunk.set_stderr(c.err);
        if (!writer->Write(chunk)) return grpc::Status::CANCELLED;
        c.offset += static_cast<int64_t>(d->data().size());
        progress = true;
      }
      if (d->eof() && (!req->follow() || d->finished())) c.done = true;
      all_done = all_done && c.done;
    }
    if (all_done) break;
    if (!progress) std::this_thread::sleep_for(std::chrono::milliseconds(200));  // follow: poll the node
  }
  return grpc::Status::OK;
}

grpc::Status ClientService::ListNodes(grpc::ServerContext*, const v1::ListNodesRequest*,
                                      v1::ListNodesResponse* resp) {
  for (auto& n : manager_->ListNodes()) *resp->add_nodes() = std::move(n);
  return grpc::Status::OK;
}

grpc::Status ClientService::ListQueues(grpc::ServerContext*, const v1::ListQueuesRequest*,
                                       v1::ListQueuesResponse* resp) {
  *resp = manager_->ListQueues();
  return grpc::Status::OK;
}

grpc::Status ClientService::ReportJobOutcome(grpc::ServerContext*, const v1::JobOutcomeRequest* req,
                                             v1::JobOutcomeResponse*) {
  return ToGrpc(manager_->ReportOutcome(*req));
}

}  // namespace trainyard::server

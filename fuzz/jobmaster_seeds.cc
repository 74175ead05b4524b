// Writes the job master target's seed corpus (fuzz/corpus/jobmaster/seed-*)
// in the script format of jobmaster_entry.cc: real sessions of three
// workers (register, run, list, barriers, complete), a restarted master
// learning the barrier count, pings that stop, the server's pushed order to
// checkpoint, and garbage. Run by hand from
// the fuzz build when the format changes: jobmaster_seeds fuzz/corpus/jobmaster
#include <fstream>
#include <iostream>
#include <string>

#include "fuzz/entry_points.h"
#include "jobmaster/frame.h"
#include "jobmaster/master_state.h"
#include "proto/jobmaster.pb.h"

namespace {

namespace pb = ::trainyard::v1;

// One script being written.
class Seed {
 public:
  explicit Seed(bool learn) { bytes_.push_back(learn ? 1 : 0); }
  // Request `r` arrives on connection `conn`, in chunks of at most 255 bytes.
  Seed& Send(int conn, const pb::JobMasterRequest& r) {
    std::string frame;
    trainyard::jobmaster::AppendFrame(r, &frame);
    return Raw(conn, frame);
  }
  Seed& Raw(int conn, std::string_view frame) {
    for (size_t at = 0; at < frame.size(); at += 255) {
      std::string_view part = frame.substr(at, 255);
      bytes_.push_back(static_cast<char>(conn));
      bytes_.push_back(static_cast<char>(part.size()));
      bytes_.append(part);
    }
    return *this;
  }
  Seed& Close(int conn) {
    bytes_.push_back(static_cast<char>(conn | (2 << 2)));
    return *this;
  }
  // Time passes by `steps` of 100 ms; the master ticks.
  Seed& Wait(int steps) {
    bytes_.push_back(static_cast<char>(3 << 2));
    bytes_.push_back(static_cast<char>(steps));
    return *this;
  }
  bool Write(const std::string& path) const {
    std::ofstream out(path, std::ios::binary);
    out << bytes_;
    return static_cast<bool>(out);
  }

 private:
  std::string bytes_;
};

pb::JobMasterRequest Starting(int id, bool pings, pb::WorkerState resume = pb::UNASSIGNED) {
  pb::JobMasterRequest r;
  r.set_request_id(1);
  r.mutable_starting()->mutable_info()->set_worker_id(id);
  r.mutable_starting()->mutable_info()->set_ip("10.0.0.1");
  r.mutable_starting()->set_pings(pings);
  r.mutable_starting()->set_resume_state(resume);
  return r;
}

pb::JobMasterRequest State(pb::WorkerState s, const char* reason = "") {
  pb::JobMasterRequest r;
  r.set_request_id(2);
  r.mutable_state_change()->set_state(s);
  r.mutable_state_change()->set_reason(reason);
  return r;
}

pb::JobMasterRequest Barrier(int64_t generation) {
  pb::JobMasterRequest r;
  r.set_request_id(3);
  r.mutable_barrier()->set_timeout_ms(1000);
  if (generation >= 0) r.mutable_barrier()->set_generation(generation);
  return r;
}

pb::JobMasterRequest List(pb::ListWorkersMode mode) {
  pb::JobMasterRequest r;
  r.set_request_id(4);
  r.mutable_list_workers()->set_mode(mode);
  r.mutable_list_workers()->set_timeout_ms(500);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: jobmaster_seeds DIR\n";
    return 2;
  }
  std::string dir = argv[1];
  Seed session(false);
  session.Send(0, List(pb::RESPONSE_AFTER_ALL_JOINED));
  for (int id = 0; id < 3; ++id) session.Send(id, Starting(id, false)).Send(id, State(pb::RUNNING));
  for (int g = 0; g < 2; ++g) {
    for (int id = 0; id < 3; ++id) session.Send(id, Barrier(g));
  }
  session.Send(1, List(pb::IMMEDIATE));
  for (int id = 0; id < 3; ++id) session.Send(id, State(pb::COMPLETED));

  Seed restarted(true);  // workers come back to an empty master mid-job
  restarted.Send(0, Starting(0, true, pb::RUNNING)).Send(1, Starting(1, true, pb::RUNNING));
  restarted.Send(0, Barrier(5)).Send(1, Barrier(4)).Send(2, Starting(2, true, pb::RUNNING));
  restarted.Send(1, Barrier(5)).Send(2, Barrier(-1)).Send(0, Barrier(1LL << 62));

  Seed failing(false);  // pings stop, a worker errs, another restarts
  for (int id = 0; id < 3; ++id) failing.Send(id, Starting(id, true));
  failing.Send(0, Barrier(0)).Wait(15).Send(1, State(pb::ERROR, "CUDA out of memory"));
  failing.Close(2).Send(2, Starting(2, true)).Wait(30);
  pb::JobMasterRequest attach;
  attach.mutable_attach()->set_worker_id(1);
  failing.Send(3, attach).Send(3, List(pb::IMMEDIATE));

  Seed ordered(false);  // the server's order pushed to the port; workers poll, save, one never does
  for (int id = 0; id < 3; ++id) ordered.Send(id, Starting(id, id != 2));
  pb::JobMasterRequest push;
  push.set_request_id(1);
  pb::ServerOrder* order = push.mutable_server_order();
  order->set_job("fuzz");
  order->mutable_order()->set_id(1'700'000'000'001);
  order->mutable_order()->set_deadline_unix_ms(1'700'000'030'000);
  order->mutable_order()->set_reason("preempted by job urgent");
  order->set_mac(trainyard::jobmaster::ServerOrderMac(trainyard::fuzz::kJobMasterOrderKey, "fuzz", order->order()));
  ordered.Send(3, push);
  pb::JobMasterRequest poll;
  poll.set_request_id(2);
  poll.mutable_checkpoint_poll();
  pb::JobMasterRequest done;
  done.set_request_id(3);
  done.mutable_checkpoint_done()->set_step(120);
  ordered.Send(0, poll).Send(0, done).Send(1, done).Wait(15).Send(3, push);

  Seed garbage(false);
  garbage.Send(0, Starting(-1, false)).Raw(1, "GET / HTTP/1.1\r\n\r\n");
  garbage.Raw(2, std::string("\x00\x00\x00\x03\xff\xff\xff", 7)).Send(0, pb::JobMasterRequest());
  garbage.Send(3, State(pb::RUNNING)).Send(0, Starting(7, false));

  bool ok = session.Write(dir + "/seed-session") && restarted.Write(dir + "/seed-restarted") &&
            failing.Write(dir + "/seed-failing") && garbage.Write(dir + "/seed-garbage") &&
            ordered.Write(dir + "/seed-ordered");
  if (!ok) std::cerr << "jobmaster_seeds: cannot write under " << dir << "\n";
  return ok ? 0 : 1;
}

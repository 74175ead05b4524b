// What the client verbs share: the --server / -o flags and a listing call
// printed as a table or as JSON.
#pragma once

#include <iostream>
#include <optional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/time/clock.h"
#include "cli/client.h"
#include "cli/table.h"
#include "cli/verbs.h"

namespace trainyard::api {
struct LogPrintOptions;  // api/log_printer.h
}

namespace trainyard::cli {

struct Common {
  std::string server;
  std::string output = "table";
};

// --ca: the CA a TLS server's certificate must be signed by.
inline void AddCaOption(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
      "--ca", [](const std::string& path) { SetCaFlag(path); },
      "the CA certificate a TLS server's must be signed by (default $TRAINYARD_CA_FILE, else the client config's "
      "caFile; none: plaintext)");
}

// --server, --ca, and -o/--output when the verb prints a view.
inline void AddCommon(CLI::App* cmd, Common* c, bool listing) {
  cmd->add_option("--server", c->server, "server address host:port (default $TRAINYARD_SERVER, else the client config's, else 127.0.0.1:7450)");
  AddCaOption(cmd);
  if (listing) cmd->add_option("-o,--output", c->output, "table or json")->check(CLI::IsMember({"table", "json"}));
}

inline int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// A listing verb (jobs, nodes, queues): one call to the server, printed as
// JSON with -o json, else as the table `render` makes of it.
template <typename Request, typename Response, typename Render>
int RunListing(const char* verb, const Common& f,
               grpc::Status (v1::Trainyard::Stub::*rpc)(grpc::ClientContext*, const Request&, Response*),
               const Request& req, Render render) {
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  Response resp;
  auto ctx = Context();
  grpc::Status st = ((*stub).*rpc)(ctx.get(), req, &resp);
  if (!st.ok()) return ReportError(verb, address, st);
  if (f.output == "json") {
    std::cout << ToJson(resp) << "\n";
  } else {
    std::cout << render(resp).Render();
  }
  return kExitOk;
}

// A spec's text: the file, or standard input for "-"; false when it
// cannot be read.
bool ReadSpec(const std::string& file, std::string* text);

// schedule create/list/describe/pause/resume/delete/run (schedule_verbs.cc).
void RegisterScheduleVerbs(CLI::App& app, int* exit_code);
// history, usage (accounting_verbs.cc).
void RegisterAccountingVerbs(CLI::App& app, int* exit_code);
// top (top_verb.cc).
void RegisterTopVerb(CLI::App& app, int* exit_code);
// One Logs stream printed as `trainyard logs` prints it (logs_verb.cc);
// errors reported as `trainyard VERB: ...`. Returns the exit code.
int PrintLogs(const std::string& verb, const std::string& server, const v1::LogsRequest& req,
              const api::LogPrintOptions& options);
// exec, attach (exec_verb.cc)
void RegisterExecVerbs(CLI::App& app, int* exit_code);
// A task named "ROLE" or "ROLE/INDEX" (index 0 when left out) on the
// command line of `verb`; false (said on stderr) when INDEX is not a
// number or ROLE is empty (exec_verb.cc).
bool ParseTask(const std::string& verb, const std::string& text, std::string* role, int* index);
// url, tensorboard (service_verbs.cc): services through the server's proxy
void RegisterServiceVerbs(CLI::App& app, int* exit_code);
// nodes, cordon, uncordon, drain, node remove (node_verbs.cc).
void RegisterNodeVerbs(CLI::App& app, int* exit_code);
// token create (token_verb.cc).
void RegisterTokenVerbs(CLI::App& app, int* exit_code);
// `trainyard login` (login_verb.cc).
void RegisterLoginVerb(CLI::App& app, int* exit_code);

}  // namespace trainyard::cli

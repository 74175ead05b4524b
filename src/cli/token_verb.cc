// `trainyard token create USER [--admin]`: issues a token (docs/security.md).
// Through the server with an admin's token; or, with --data-dir, straight
// into a server's token file by whoever may write it (the first admin).
#include <iostream>

#include "cli/verb_common.h"
#include "absl/time/time.h"
#include "proto/join.grpc.pb.h"
#include "security/certs.h"
#include "security/client_config.h"
#include "security/tokens.h"

namespace trainyard::cli {
namespace {

struct TokenFlags : Common {
  std::string user;
  bool admin = false;
  std::string data_dir;     // write the server's token file directly
  std::string write_config;  // also write a client config with the token here
  std::string join;          // a join token for this node instead
  std::string ttl = "1h";
};

// `token create --join NODE [--ttl D]`: a join token, through the server.
int CreateJoin(const TokenFlags& f) {
  absl::Duration ttl;
  if (!absl::ParseDuration(f.ttl, &ttl) || ttl <= absl::ZeroDuration()) {
    std::cerr << "trainyard token create: --ttl '" << f.ttl << "' is not a positive duration (e.g. 30m, 1h)\n";
    return kExitUsage;
  }
  std::string address = ServerAddress(f.server);
  if (ServerCaPem().empty()) {
    std::cerr << "trainyard token create: join tokens are for a server that serves TLS; give its CA (--ca, "
                 "TRAINYARD_CA_FILE or caFile in the client config)\n";
    return kExitUsage;
  }
  auto stub = v1::NodeJoin::NewStub(MakeChannel(address));
  v1::CreateJoinTokenRequest req;
  req.set_node(f.join);
  req.set_ttl_ms(absl::ToInt64Milliseconds(ttl));
  v1::CreateJoinTokenResponse resp;
  auto ctx = Context();
  grpc::Status st = stub->CreateJoinToken(ctx.get(), req, &resp);
  if (!st.ok()) return ReportError("token create", address, st);
  std::string pin = security::CertPin(ServerCaPem());
  std::cout << resp.token() << "\n";
  std::cerr << "join token for node " << f.join << ", valid " << f.ttl << ", once; shown only this once. On the node:\n"
            << "  trainyard agent --server " << address << " --name " << f.join << " --join-token " << resp.token()
            << " --ca-pin " << pin << " --data-dir DIR ...\n";
  return kExitOk;
}

// Prints the token (or writes it into a client config) for `f.user`.
int Deliver(const TokenFlags& f, const std::string& address, const std::string& token) {
  if (f.write_config.empty()) {
    std::cout << token << "\n";
    std::cerr << "token for " << f.user << (f.admin ? " (admin)" : "")
              << " made; it is shown only this once. The user puts it in a client config "
                 "(~/.config/trainyard/client.yaml: server: " << address << ", token: ...)\n";
    return kExitOk;
  }
  absl::Status st = security::WriteClientConfig(f.write_config, {.server = address, .token = token});
  if (!st.ok()) {
    std::cerr << "trainyard token create: " << st.message() << "\n";
    return kExitFailure;
  }
  std::cout << "token for " << f.user << (f.admin ? " (admin)" : "") << " written to " << f.write_config
            << " (TRAINYARD_CONFIG=" << f.write_config << ")\n";
  return kExitOk;
}

int Create(const TokenFlags& f) {
  if (!f.join.empty()) {
    if (!f.user.empty() || f.admin || !f.data_dir.empty() || !f.write_config.empty()) {
      std::cerr << "trainyard token create: --join makes a node's join token: no USER, --admin, --data-dir or "
                   "--write-config with it\n";
      return kExitUsage;
    }
    return CreateJoin(f);
  }
  if (absl::Status st = security::ValidateUserName(f.user, "USER"); !st.ok()) {
    std::cerr << "trainyard token create: " << st.message() << "\n";
    return kExitUsage;
  }
  std::string address = ServerAddress(f.server);
  if (!f.data_dir.empty()) {
    absl::StatusOr<std::string> token = security::IssueToken(security::TokenFilePath(f.data_dir), f.user, f.admin);
    if (!token.ok()) {
      std::cerr << "trainyard token create: " << token.status().message() << "\n";
      return kExitFailure;
    }
    return Deliver(f, address, *token);
  }
  auto stub = MakeStub(address);
  v1::CreateTokenRequest req;
  req.set_user(f.user);
  req.set_admin(f.admin);
  v1::CreateTokenResponse resp;
  auto ctx = Context();
  grpc::Status st = stub->CreateToken(ctx.get(), req, &resp);
  if (!st.ok()) return ReportError("token create", address, st);
  return Deliver(f, address, resp.token());
}

}  // namespace

void RegisterTokenVerbs(CLI::App& app, int* exit_code) {
  static TokenFlags f;
  auto* token = app.add_subcommand("token", "Issue tokens for users (cluster admins)");
  token->require_subcommand(1);
  auto* c = token->add_subcommand("create", "Make a token for USER; prints it once");
  c->add_option("user", f.user, "the user the token speaks for (none with --join)");
  c->add_option("--join", f.join,
                "a join token for node NODE instead (single use): its agent gets its certificate with it "
                "(server with --tls-dir)");
  c->add_option("--ttl", f.ttl, "with --join: how long the token may be used (30m, 1h, ...)")->capture_default_str();
  c->add_flag("--admin", f.admin, "a cluster admin's token (every job, node verbs, tokens)");
  c->add_option("--data-dir", f.data_dir,
                "write the token straight into this server data dir's token file (no server call; for the "
                "first admin, by whoever may write that dir)");
  c->add_option("--write-config", f.write_config,
                "write a client config file (server and token, mode 0600) here instead of printing the token");
  AddCommon(c, &f, false);
  c->callback([exit_code] { *exit_code = Create(f); });
}

}  // namespace trainyard::cli

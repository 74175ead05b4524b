// Shared client plumbing.
#include "cli/client.h"

#include <atomic>
#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "api/task_env.h"
#include "cli/verbs.h"
#include "cli/json_view.h"
#include "common/server_list_channel.h"
#include "security/certs.h"
#include "security/client_config.h"
#include "security/files.h"

namespace trainyard::cli {

namespace {
// The client config, read once per process.
const security::ClientConfig& Config() {
  static const security::ClientConfig config = [] {
    absl::StatusOr<security::ClientConfig> c = security::FindClientConfig();
    if (!c.ok()) {
      std::cerr << "trainyard: client config: " << c.status().message() << "\n";
      return security::ClientConfig();
    }
    return *c;
  }();
  return config;
}
}  // namespace

std::string ServerAddress(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv(kServerEnv);
  if (env && *env) return env;
  if (!Config().server.empty()) return Config().server;
  return "127.0.0.1:7450";
}

std::string ClientToken() {
  const char* env = std::getenv(kTokenEnv);
  if (env && *env) return env;
  return Config().token;
}

namespace {
std::string& CaFlag() {
  static std::string flag;
  return flag;
}

// The channel's credentials, made once per process.
std::shared_ptr<grpc::ChannelCredentials> Credentials() {
  static const std::shared_ptr<grpc::ChannelCredentials> creds = []() -> std::shared_ptr<grpc::ChannelCredentials> {
    if (ServerCaPem().empty()) return grpc::InsecureChannelCredentials();
    return grpc::SslCredentials({.pem_root_certs = ServerCaPem()});
  }();
  return creds;
}
}  // namespace

const std::string& ServerCaPem() {
  static const std::string pem = [] {
    std::string ca = CaFile();
    if (ca.empty()) return std::string();
    absl::StatusOr<std::string> text = security::ReadWholeFile(ca);
    if (text.ok() && !text->empty()) return *text;
    std::cerr << "trainyard: the server's CA (--ca, TRAINYARD_CA_FILE or caFile): "
              << (text.ok() ? ca + ": empty" : std::string(text.status().message())) << "\n";
    // An unreadable CA trusts nothing: the call then fails (exit 3).
    return std::string("-");
  }();
  return pem;
}

void SetCaFlag(const std::string& path) { CaFlag() = path; }

std::string CaFile() {
  if (!CaFlag().empty()) return CaFlag();
  const char* env = std::getenv(kCaFileEnv);
  if (env && *env) return env;
  return Config().ca_file;
}

std::unique_ptr<v1::Trainyard::Stub> MakeStub(const std::string& address) {
  return v1::Trainyard::NewStub(MakeChannel(address));
}

namespace {
// Set once a channel to another host goes without TLS: the token is then
// not sent (it would cross the network in clear).
std::atomic<bool> g_token_withheld{false};

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  if (ServerCaPem().empty() && !security::IsLocalAddress(address) && !ClientToken().empty() && !g_token_withheld.exchange(true)) {
    std::cerr << "trainyard: not sending the token in clear to " << address
              << ": name the cluster's CA (--ca, TRAINYARD_CA_FILE or the client config's caFile) to talk to it over "
                 "TLS\n";
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // A server that is starting (`up` polls it) is retried within 100 ms, not
  // after gRPC's default backoff (1 s, growing by 1.6x: `up` was ready
  // 5-15 s after its nodes). Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC
  // takes it as the time one connection attempt may take (TCP, TLS and
  // HTTP/2 set-up; 20 s by default), and at 100 ms a TLS handshake with a
  // busy server or on a loaded machine was cut off ("handshaker shutdown")
  // and the command failed as if no server were there.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(ServerListChannelTarget(address, &args), Credentials(), args);
}

void Authorize(grpc::ClientContext* ctx) {
  static const std::string token = ClientToken();
  if (!token.empty() && !g_token_withheld.load()) ctx->AddMetadata("authorization", "Bearer " + token);
}

std::unique_ptr<grpc::ClientContext> Context(int seconds) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  Authorize(ctx.get());
  return ctx;
}

namespace {

// True when a server answers at `address` right now. An UNAVAILABLE that the
// server sent itself (its store cannot keep a job: disk full, read-only data
// dir) is then reported as what it says, not as a server that is not there.
bool ServerAnswers(const std::string& address) {
  v1::ListQueuesRequest req;
  v1::ListQueuesResponse resp;
  return MakeStub(address)->ListQueues(Context(2).get(), req, &resp).ok();
}

}  // namespace

int ReportError(const std::string& verb, const std::string& address, const grpc::Status& st) {
  switch (st.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      if (ServerAnswers(address)) {
        std::cerr << "trainyard " << verb << ": the server at " << address << " answered: " << st.error_message()
                  << "\n";
        return kExitFailure;
      }
      [[fallthrough]];
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::INTERNAL:
      std::cerr << "trainyard " << verb << ": cannot reach a Trainyard server at " << address << ": "
                << st.error_message() << " (is the server running? set --server or TRAINYARD_SERVER"
                << (CaFile().empty()
                        ? "; a server that serves TLS needs its CA: --ca, TRAINYARD_CA_FILE or caFile in the client "
                          "config)\n"
                        : "; TLS: the server's certificate must be signed by the CA in " + CaFile() +
                              " and name the host you reach it by)\n");
      return kExitUnavailable;
    case grpc::StatusCode::INVALID_ARGUMENT:
      std::cerr << "trainyard " << verb << ": " << st.error_message() << "\n";
      return kExitUsage;
    default:
      std::cerr << "trainyard " << verb << ": " << st.error_message() << "\n";
      return kExitFailure;
  }
}

std::string ToJson(const google::protobuf::Message& message) {
  // Invalid UTF-8 in a user's string is replaced, not a reason to fail.
  return ViewJson(message).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Age(int64_t ms) {
  int64_t s = ms / 1000;
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 7200) return absl::StrCat(s / 60, "m");
  if (s < 172800) return absl::StrCat(s / 3600, "h");
  return absl::StrCat(s / 86400, "d");
}

std::string GpuBitmap(uint64_t mask, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out += ((mask >> i) & 1) ? "■" : "□";
  return out;
}

}  // namespace trainyard::cli

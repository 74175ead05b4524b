// What the client verbs share: the server address (--server, else
// $TRAINYARD_SERVER, else the client config's, else 127.0.0.1:7450), the
// user's token (the client config's, docs/security.md), a stub, and turning
// gRPC errors into messages and exit codes a script can rely on.
#pragma once

#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "proto/service.grpc.pb.h"

namespace google::protobuf {
class Message;
}

namespace trainyard::cli {

// The address to use: `flag` when set, else $TRAINYARD_SERVER, else the
// client config's `server`, else the default.
std::string ServerAddress(const std::string& flag);

// The user's token: $TRAINYARD_TOKEN, else the client config's (found as
// security::FindClientConfig says); "" when there is none. A client config
// that cannot be read is reported on stderr once.
std::string ClientToken();

// The CA certificate file the server's must be signed by (TLS): the --ca
// flag (SetCaFlag), else $TRAINYARD_CA_FILE, else the client config's
// caFile; "" = the server is plaintext.
void SetCaFlag(const std::string& path);
std::string CaFile();
// The contents of CaFile(), read once; "" when there is none. A file that
// cannot be read is reported on stderr and trusts nothing ("-").
const std::string& ServerCaPem();

// A stub for the server at `address`: TLS verified with CaFile() when there
// is one, else plaintext. A CA file that cannot be read is reported on
// stderr once (the calls then fail as a server that cannot be verified).
std::unique_ptr<v1::Trainyard::Stub> MakeStub(const std::string& address);
// The channel MakeStub's stub uses (for other services of the server).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

// Puts the user's token (ClientToken) on `ctx`, when there is one.
void Authorize(grpc::ClientContext* ctx);

// A context with a deadline of `seconds`, carrying the user's token.
std::unique_ptr<grpc::ClientContext> Context(int seconds = 30);

// Prints "trainyard VERB: MESSAGE" to stderr and returns the exit code for
// the status: 3 when the server cannot be reached, 2 for bad input, 1 else
// (also for an UNAVAILABLE that a reachable server sent itself, e.g. when its
// store cannot keep a job).
int ReportError(const std::string& verb, const std::string& address, const grpc::Status& status);

// The message as `-o json` prints it (cli/json_view.h), indented.
std::string ToJson(const google::protobuf::Message& message);

// "3s", "5m", "2h", "4d" for a duration in milliseconds.
std::string Age(int64_t ms);
// "0-1,4" style GPU list and a bitmap "■■□□" of `count` GPUs.
std::string GpuBitmap(uint64_t mask, int count);

}  // namespace trainyard::cli

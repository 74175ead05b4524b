#include "store/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace trainyard {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("etcd ", what, " ", path, ": cannot read it"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::Status FromGrpc(const char* what, const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat("etcd ", what, ": ", status.error_message()));
}

// Errors after which another member (or the same one, a moment later) may
// answer: the member is down or cut off, or the etcd cluster is between
// leaders.
bool Retryable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

absl::StatusOr<EtcdConnectOptions> ParseEtcdAddress(const std::string& address) {
  EtcdConnectOptions options;
  absl::string_view rest = address;
  bool tls = false;
  if (absl::ConsumePrefix(&rest, "etcds://")) {
    tls = true;
  } else if (!absl::ConsumePrefix(&rest, "etcd://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store address '", address, "': expected etcd://host:port[,host:port...] or etcds://..."));
  }
  for (absl::string_view endpoint : absl::StrSplit(rest, ',')) {
    size_t colon = endpoint.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(endpoint.substr(colon + 1), &port) || port <= 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("store address '", address, "': member '",
                                                     endpoint, "' is not host:port"));
    }
    options.endpoints.emplace_back(endpoint);
  }
  options.tls = tls;
  return options;
}

std::string EtcdPrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(end.back() + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

struct EtcdClient::Member {
  std::string endpoint;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
};

EtcdClient::EtcdClient(EtcdConnectOptions options) : options_(std::move(options)) {}

EtcdClient::~EtcdClient() = default;

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const EtcdConnectOptions& options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("etcd: no member addresses");
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls || !options.ca_file.empty()) {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_file.empty()) {
      absl::StatusOr<std::string> ca = ReadPem(options.ca_file, "CA file");
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *ca;
    }
    if (!options.cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadPem(options.cert_file, "client certificate");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadPem(options.key_file, "client key");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    credentials = grpc::SslCredentials(ssl);
  }
  std::unique_ptr<EtcdClient> client(new EtcdClient(options));
  for (const std::string& endpoint : options.endpoints) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(256 << 20);
    args.SetMaxSendMessageSize(64 << 20);
    // A member that restarts or comes back is tried again within a second
    // (gRPC's default backoff grows to two minutes).
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    auto channel = grpc::CreateCustomChannel(endpoint, credentials, args);
    auto member = std::make_unique<Member>();
    member->endpoint = endpoint;
    member->kv = etcdserverpb::KV::NewStub(channel);
    member->lease = etcdserverpb::Lease::NewStub(channel);
    client->members_.push_back(std::move(member));
  }
  return client;
}

template <typename Call>
absl::Status EtcdClient::Run(const char* what, Call call) {
  absl::Time deadline = absl::Now() + options_.call_timeout;
  grpc::Status last;
  while (true) {
    size_t at = current_.load() % members_.size();
    Member& member = *members_[at];
    grpc::ClientContext context;
    // One member's attempt is bounded so a cut-off member does not take the
    // whole budget.
    absl::Time attempt_end = std::min(deadline, absl::Now() + absl::Seconds(2));
    context.set_deadline(absl::ToChronoTime(attempt_end));
    // Waits out a reconnect in progress instead of failing at once.
    context.set_wait_for_ready(true);
    last = call(member, context);
    if (last.ok()) return absl::OkStatus();
    if (!Retryable(last) || absl::Now() >= deadline) break;
    if (members_.size() > 1) {
      size_t expected = at;
      current_.compare_exchange_strong(expected, at + 1);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return FromGrpc(what, last);
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(const etcdserverpb::TxnRequest& request) {
  etcdserverpb::TxnResponse response;
  absl::Status status = Run("txn", [&](Member& m, grpc::ClientContext& c) {
    return m.kv->Txn(&c, request, &response);
  });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdClient::Range(
    const etcdserverpb::RangeRequest& request) {
  etcdserverpb::RangeResponse response;
  absl::Status status = Run("range", [&](Member& m, grpc::ClientContext& c) {
    return m.kv->Range(&c, request, &response);
  });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<int64_t> EtcdClient::RangePrefix(
    const std::string& prefix, const std::function<void(const mvccpb::KeyValue&)>& fn) {
  etcdserverpb::RangeRequest request;
  request.set_key(prefix);
  request.set_range_end(EtcdPrefixEnd(prefix));
  request.set_limit(5000);
  int64_t revision = 0;
  while (true) {
    absl::StatusOr<etcdserverpb::RangeResponse> page = Range(request);
    if (!page.ok()) return page.status();
    if (revision == 0) {
      revision = page->header().revision();
      request.set_revision(revision);  // every later page as of the first one
    }
    for (const mvccpb::KeyValue& kv : page->kvs()) fn(kv);
    if (!page->more() || page->kvs().empty()) return revision;
    request.set_key(page->kvs(page->kvs_size() - 1).key() + std::string(1, '\0'));
  }
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(ttl)));
  etcdserverpb::LeaseGrantResponse response;
  absl::Status status = Run("lease grant", [&](Member& m, grpc::ClientContext& c) {
    return m.lease->LeaseGrant(&c, request, &response);
  });
  if (!status.ok()) return status;
  if (!response.error().empty()) return absl::UnavailableError("etcd lease grant: " + response.error());
  return response.id();
}

absl::StatusOr<int64_t> EtcdClient::KeepAliveOnce(int64_t lease_id) {
  etcdserverpb::LeaseKeepAliveResponse response;
  absl::Status status = Run("lease keep-alive", [&](Member& m, grpc::ClientContext& c) {
    auto stream = m.lease->LeaseKeepAlive(&c);
    etcdserverpb::LeaseKeepAliveRequest request;
    request.set_id(lease_id);
    if (!stream->Write(request) || !stream->Read(&response)) {
      stream->WritesDone();
      grpc::Status finished = stream->Finish();
      return finished.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "keep-alive stream closed")
                           : finished;
    }
    stream->WritesDone();
    return stream->Finish();
  });
  if (!status.ok()) return status;
  return response.ttl();
}

absl::Status EtcdClient::RevokeLease(int64_t lease_id) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease_id);
  etcdserverpb::LeaseRevokeResponse response;
  return Run("lease revoke", [&](Member& m, grpc::ClientContext& c) {
    return m.lease->LeaseRevoke(&c, request, &response);
  });
}

}  // namespace trainyard

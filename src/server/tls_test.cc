// TLS on the server's gRPC listener and the node identity it gives agents
// (docs/security.md, "Components"), against a real server on loopback: who
// gets through the handshake, and which node an agent may register.
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/service.grpc.pb.h"
#include "security/certs.h"
#include "security/client_config.h"
#include "security/files.h"
#include "server/server.h"

namespace trainyard::server {
namespace {

using ::testing::HasSubstr;

// What one agent stream got: registered, or the status it ended with.
struct Registration {
  bool registered = false;
  grpc::Status status;
};

v1::NodeInfo TlsNode(const std::string& name) {
  v1::NodeInfo info;
  info.set_name(name);
  info.set_address("127.0.0.1");
  info.mutable_capacity()->set_memory_mb(1024);
  info.mutable_capacity()->set_vcores_milli(1000);
  return info;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "trainyard-tls-XXXXXX").string();
    root_ = mkdtemp(tmpl.data());
    certs_ = root_ + "/certs";
    other_ = root_ + "/other";
    ASSERT_TRUE(security::InitCertDir(certs_, {}).ok());
    ASSERT_TRUE(security::InitCertDir(other_, {}).ok());  // another cluster's CA
    for (const char* n : {"node-0", "node-1"}) {
      ASSERT_TRUE(security::MakeNodeCert(certs_, n).ok());
      ASSERT_TRUE(security::MakeNodeCert(other_, n).ok());
    }
    ServerConfig config;
    config.listen = "127.0.0.1:0";
    config.data_dir = root_ + "/data";
    config.tls_dir = certs_;
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(config);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    admin_token_ = security::LoadClientConfig(config.data_dir + "/admin-client.yaml").value().token;
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(root_);
  }

  std::string Read(const std::string& path) { return security::ReadWholeFile(path).value(); }
  security::KeyPair Pair(const std::string& dir, const std::string& node) {
    return {Read(security::NodeCertPath(dir, node)), Read(security::NodeKeyPath(dir, node))};
  }
  std::shared_ptr<grpc::ChannelCredentials> Creds(const std::string& ca_dir, const security::KeyPair& client = {}) {
    return grpc::SslCredentials({.pem_root_certs = Read(security::CaCertPath(ca_dir)),
                                 .pem_private_key = client.key_pem,
                                 .pem_cert_chain = client.cert_pem});
  }

  // Opens an agent stream with `creds` and registers `name`.
  Registration Register(std::shared_ptr<grpc::ChannelCredentials> creds, const std::string& name) {
    auto stub = v1::AgentChannel::NewStub(grpc::CreateChannel(server_->agent_address(), creds));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto stream = stub->Connect(&ctx);
    v1::AgentMessage reg;
    *reg.mutable_register_() = TlsNode(name);
    Registration out;
    v1::ServerMessage msg;
    if (stream->Write(reg) && stream->Read(&msg) && msg.has_registered()) {
      out.registered = msg.registered().node() == name;
      ctx.TryCancel();
    }
    out.status = stream->Finish();
    return out;
  }

  // ListQueues as the admin over `creds`.
  grpc::Status ClientCall(std::shared_ptr<grpc::ChannelCredentials> creds) {
    auto stub = v1::Trainyard::NewStub(grpc::CreateChannel(server_->address(), creds));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ctx.AddMetadata("authorization", "Bearer " + admin_token_);
    v1::ListQueuesResponse resp;
    return stub->ListQueues(&ctx, v1::ListQueuesRequest(), &resp);
  }

  std::string root_, certs_, other_, admin_token_;
  std::unique_ptr<Server> server_;
};

TEST_F(TlsTest, AnAgentWithItsNodesCertificateRegistersThatNodeAndGetsItBackAfterARestart) {
  Registration first = Register(Creds(certs_, Pair(certs_, "node-1")), "node-1");
  EXPECT_TRUE(first.registered) << first.status.error_message();
  // The stream ended (the agent restarted): the same certificate gets the
  // name again, once the server has seen the old stream go.
  Registration again;
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  do {
    again = Register(Creds(certs_, Pair(certs_, "node-1")), "node-1");
  } while (!again.registered && again.status.error_code() == grpc::ALREADY_EXISTS && absl::Now() < deadline);
  EXPECT_TRUE(again.registered) << again.status.error_message();
}

TEST_F(TlsTest, AnotherNodesCertificateCannotRegisterANameEvenWhileItIsFree) {
  Registration r = Register(Creds(certs_, Pair(certs_, "node-0")), "node-1");
  EXPECT_FALSE(r.registered);
  EXPECT_EQ(r.status.error_code(), grpc::PERMISSION_DENIED) << r.status.error_message();
  EXPECT_THAT(r.status.error_message(), HasSubstr("certificate is node 'node-0''s"));
}

TEST_F(TlsTest, AnAgentWithoutACertificateIsRefusedAtTheAgentListenersHandshake) {
  Registration r = Register(Creds(certs_), "node-1");
  EXPECT_FALSE(r.registered);
  // The agent listener requires a node certificate: the connection ends in
  // its TLS handshake, before any call.
  EXPECT_EQ(r.status.error_code(), grpc::UNAVAILABLE) << r.status.error_message();
  // A client without a certificate (the CLI) is served: it speaks with a token.
  grpc::Status cli = ClientCall(Creds(certs_));
  EXPECT_TRUE(cli.ok()) << cli.error_message();
}

TEST_F(TlsTest, ACertificateFromAnotherCaIsRefused) {
  // It trusts our CA (the server is verified) but its own is another's.
  Registration r = Register(Creds(certs_, Pair(other_, "node-1")), "node-1");
  EXPECT_FALSE(r.registered);
  EXPECT_FALSE(r.status.ok());
}

TEST_F(TlsTest, AnExpiredCertificateIsRefused) {
  security::KeyPair ca{Read(security::CaCertPath(certs_)), Read(security::CaKeyPath(certs_))};
  absl::StatusOr<security::KeyPair> expired = security::IssueCert(
      ca, {.common_name = "node-1", .dns_names = {"node-1"}, .use = security::CertUse::kClient,
           .valid_for = absl::Hours(24), .starts = -absl::Hours(48)});
  ASSERT_TRUE(expired.ok()) << expired.status();
  Registration r = Register(Creds(certs_, *expired), "node-1");
  EXPECT_FALSE(r.registered);
  EXPECT_FALSE(r.status.ok());
}

TEST_F(TlsTest, TheServersCertificateUsedAsAClientsIsRefused) {
  security::KeyPair server{Read(security::ServerCertPath(certs_)), Read(security::ServerKeyPath(certs_))};
  for (const char* name : {"trainyard server", "localhost"}) {
    Registration r = Register(Creds(certs_, server), name);
    EXPECT_FALSE(r.registered) << name;
    EXPECT_FALSE(r.status.ok()) << name;
  }
  EXPECT_EQ(security::NodeNameOfPeerCert(server.cert_pem), "");
  EXPECT_EQ(security::NodeNameOfPeerCert(Read(security::CaCertPath(certs_))), "");
  EXPECT_EQ(security::NodeNameOfPeerCert(Pair(certs_, "node-0").cert_pem), "node-0");
}

TEST_F(TlsTest, PlaintextIsRefused) {
  Registration r = Register(grpc::InsecureChannelCredentials(), "node-1");
  EXPECT_FALSE(r.registered);
  EXPECT_EQ(r.status.error_code(), grpc::UNAVAILABLE) << r.status.error_message();
  EXPECT_EQ(ClientCall(grpc::InsecureChannelCredentials()).error_code(), grpc::UNAVAILABLE);
}

TEST_F(TlsTest, AClientTrustingAnotherCaRefusesTheServer) {
  grpc::Status cli = ClientCall(Creds(other_));
  EXPECT_EQ(cli.error_code(), grpc::UNAVAILABLE) << cli.error_message();
  Registration r = Register(Creds(other_, Pair(other_, "node-1")), "node-1");
  EXPECT_FALSE(r.registered);
  EXPECT_EQ(r.status.error_code(), grpc::UNAVAILABLE) << r.status.error_message();
}

// Logs, statuses and heartbeats count only on a stream that registered.
TEST_F(TlsTest, AgentMessagesBeforeRegistrationAreRefused) {
  std::vector<v1::AgentMessage> msgs(3);
  msgs[0].mutable_log()->set_data("forged line\n");
  msgs[1].mutable_heartbeat();
  msgs[2].mutable_status()->set_job("j");
  for (const v1::AgentMessage& m : msgs) {
    auto stub = v1::AgentChannel::NewStub(
        grpc::CreateChannel(server_->agent_address(), Creds(certs_, Pair(certs_, "node-1"))));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto stream = stub->Connect(&ctx);
    stream->Write(m);
    v1::ServerMessage answer;
    EXPECT_FALSE(stream->Read(&answer));
    grpc::Status st = stream->Finish();
    EXPECT_EQ(st.error_code(), grpc::FAILED_PRECONDITION) << m.DebugString() << st.error_message();
  }
}

TEST_F(TlsTest, AStreamThatRegisteredANodeCannotRegisterAnother) {
  auto stub =
      v1::AgentChannel::NewStub(grpc::CreateChannel(server_->agent_address(), Creds(certs_, Pair(certs_, "node-1"))));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->Connect(&ctx);
  v1::AgentMessage reg;
  *reg.mutable_register_() = TlsNode("node-1");
  v1::ServerMessage answer;
  ASSERT_TRUE(stream->Write(reg) && stream->Read(&answer) && answer.has_registered());
  *reg.mutable_register_() = TlsNode("node-0");
  stream->Write(reg);
  while (stream->Read(&answer)) {
  }
  grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::PERMISSION_DENIED) << st.error_message();
}

TEST_F(TlsTest, TheAdminsClientConfigNamesTheCa) {
  security::ClientConfig admin = security::LoadClientConfig(root_ + "/data/admin-client.yaml").value();
  EXPECT_EQ(admin.ca_file, std::filesystem::absolute(security::CaCertPath(certs_)).string());
  EXPECT_TRUE(ClientCall(Creds(certs_)).ok());
}

TEST(TlsConfigTest, AServerWhoseTlsDirHoldsNoCertificatesSaysHowToMakeThem) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "trainyard-tls-XXXXXX").string();
  std::string root = mkdtemp(tmpl.data());
  ServerConfig config;
  config.listen = "127.0.0.1:0";
  config.data_dir = root + "/data";
  config.tls_dir = root + "/none";
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(config);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("tlsDir: "));
  EXPECT_THAT(s.status().message(), HasSubstr("trainyard certs init --dir " + root + "/none"));
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace trainyard::server

// HTTPS on the server's HTTP API (httpTls), against a real server: a client
// that trusts the cluster's CA gets its answers; plain HTTP and a client
// trusting another CA get nothing; a loopback listener stays HTTP on auto.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "security/certs.h"
#include "security/client_config.h"
#include "server/config.h"
#include "server/server.h"

namespace trainyard::server {
namespace {

class HttpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "trainyard-https-XXXXXX").string();
    root_ = mkdtemp(tmpl.data());
    certs_ = root_ + "/certs";
    ASSERT_TRUE(security::InitCertDir(certs_, {}).ok());
    ASSERT_TRUE(security::InitCertDir(root_ + "/other", {}).ok());  // another cluster's CA
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(root_);
  }
  void Start(const std::string& http_tls) {
    ServerConfig config;
    config.listen = "127.0.0.1:0";
    config.data_dir = root_ + "/data";
    config.tls_dir = certs_;
    config.http_listen = "127.0.0.1:0";
    config.http_tls = http_tls;
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(config);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    const std::string& a = server_->http_address();
    ASSERT_TRUE(absl::SimpleAtoi(a.substr(a.rfind(':') + 1), &port_)) << a;
    token_ = security::LoadClientConfig(config.data_dir + "/admin-client.yaml").value().token;
  }
  std::unique_ptr<httplib::SSLClient> Trusting(const std::string& ca_dir) {
    auto c = std::make_unique<httplib::SSLClient>("127.0.0.1", port_);
    c->set_ca_cert_path(security::CaCertPath(ca_dir).c_str());
    c->enable_server_certificate_verification(true);
    c->set_connection_timeout(5, 0);
    c->set_read_timeout(5, 0);
    return c;
  }

  std::string root_, certs_, token_;
  int port_ = 0;
  std::unique_ptr<Server> server_;
};

TEST_F(HttpsTest, TheApiAnswersOverTlsOnlyToAClientThatTrustsTheClustersCa) {
  Start("on");
  EXPECT_EQ(server_->http_scheme(), "https");
  std::unique_ptr<httplib::SSLClient> client = Trusting(certs_);
  auto health = client->Get("/healthz");
  ASSERT_TRUE(health) << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  auto nodes = client->Get("/api/v1/nodes", {{"Authorization", "Bearer " + token_}});
  ASSERT_TRUE(nodes);
  EXPECT_EQ(nodes->status, 200) << nodes->body;
  auto anonymous = client->Get("/api/v1/nodes");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);

  httplib::Client plain("127.0.0.1", port_);
  plain.set_read_timeout(5, 0);
  auto in_clear = plain.Get("/healthz");
  EXPECT_FALSE(in_clear && in_clear->status == 200) << "plain HTTP was answered";
  EXPECT_FALSE(Trusting(root_ + "/other")->Get("/healthz")) << "a client trusting another CA got an answer";
  // The server still serves after both.
  EXPECT_TRUE(Trusting(certs_)->Get("/healthz"));
}

TEST_F(HttpsTest, OnAutoALoopbackListenerStaysPlainHttp) {
  Start("auto");
  EXPECT_EQ(server_->http_scheme(), "http");
  httplib::Client plain("127.0.0.1", port_);
  auto health = plain.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

}  // namespace
}  // namespace trainyard::server

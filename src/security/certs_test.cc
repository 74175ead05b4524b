// The cluster's certificates as `trainyard certs` makes them: where they go,
// who may read them, what they name, and what is refused.
#include "security/certs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <filesystem>

#include "gtest/gtest.h"
#include "security/files.h"

namespace trainyard::security {
namespace {

class CertsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "trainyard-certs-XXXXXX").string();
    root_ = mkdtemp(tmpl.data());
    dir_ = root_ + "/certs";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  static int Mode(const std::string& path) {
    struct stat st {};
    stat(path.c_str(), &st);
    return st.st_mode & 0777;
  }
  std::string root_;
  std::string dir_;
};

TEST(IsLocalAddressTest, AListIsLocalOnlyWhenEveryServerOfItIs) {
  EXPECT_TRUE(IsLocalAddress("127.0.0.1:7450"));
  EXPECT_TRUE(IsLocalAddress("127.0.0.1:7450,[::1]:7460"));
  EXPECT_FALSE(IsLocalAddress("10.0.0.2:7450"));
  // A token is not sent in clear to the second server because the first is local.
  EXPECT_FALSE(IsLocalAddress("127.0.0.1:7450,10.0.0.2:7450"));
}

TEST_F(CertsTest, InitMakesACaAndAServerCertificateThatOnlyTheOwnerCanRead) {
  absl::StatusOr<InitResult> init = InitCertDir(dir_, {"gpu-head.example", "10.1.2.3"});
  ASSERT_TRUE(init.ok()) << init.status();
  EXPECT_TRUE(init->made_ca);
  EXPECT_EQ(Mode(dir_), 0700);
  EXPECT_EQ(Mode(CaKeyPath(dir_)), 0600);
  EXPECT_EQ(Mode(ServerKeyPath(dir_)), 0600);
  EXPECT_EQ(CertCommonName(ReadWholeFile(CaCertPath(dir_)).value()), "trainyard cluster CA");
  EXPECT_EQ(CertCommonName(ReadWholeFile(ServerCertPath(dir_)).value()), "trainyard server");
  for (const char* name : {"localhost", "127.0.0.1", "::1", "gpu-head.example", "10.1.2.3"}) {
    EXPECT_NE(std::find(init->server_names.begin(), init->server_names.end(), name), init->server_names.end())
        << name;
  }
}

TEST_F(CertsTest, AnExistingCaIsNeverReplaced) {
  ASSERT_TRUE(InitCertDir(dir_, {}).ok());
  std::string ca = ReadWholeFile(CaCertPath(dir_)).value();
  std::string server = ReadWholeFile(ServerCertPath(dir_)).value();
  absl::StatusOr<InitResult> again = InitCertDir(dir_, {"other-host"});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->made_ca);
  EXPECT_EQ(ReadWholeFile(CaCertPath(dir_)).value(), ca);
  EXPECT_NE(ReadWholeFile(ServerCertPath(dir_)).value(), server);  // a new one, from the same CA
}

TEST_F(CertsTest, ANodeCertificateNamesItsNode) {
  ASSERT_TRUE(InitCertDir(dir_, {}).ok());
  ASSERT_TRUE(MakeNodeCert(dir_, "node-7").ok());
  EXPECT_EQ(CertCommonName(ReadWholeFile(NodeCertPath(dir_, "node-7")).value()), "node-7");
  EXPECT_EQ(Mode(NodeKeyPath(dir_, "node-7")), 0600);
  EXPECT_EQ(Mode(dir_ + "/nodes"), 0700);
  absl::StatusOr<TlsFiles> files = LoadTlsFiles(CaCertPath(dir_), NodeCertPath(dir_, "node-7"),
                                                NodeKeyPath(dir_, "node-7"));
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_FALSE(files->key_pem.empty());
}

TEST_F(CertsTest, BadNodeNamesAndAMissingCaAreRefusedWithWhatToDo) {
  absl::Status no_ca = MakeNodeCert(dir_, "node-1");
  EXPECT_TRUE(absl::IsNotFound(no_ca)) << no_ca;
  EXPECT_NE(no_ca.message().find("trainyard certs init"), std::string::npos) << no_ca;
  ASSERT_TRUE(InitCertDir(dir_, {}).ok());
  for (const char* bad : {"", "a,DNS:evil", "../x", "a b"}) {
    absl::Status st = MakeNodeCert(dir_, bad);
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << bad << ": " << st;
  }
  EXPECT_TRUE(absl::IsInvalidArgument(InitCertDir(dir_, {"bad host"}).status()));
}

// Servers compare the CA key by its DER bytes: a copy in another PEM form
// (PKCS#8 or the algorithm's own, CRLF line ends) is the same key.
TEST(PrivateKeyDerTest, OneKeyInAnyPemFormGivesTheSameBytesAndAnotherKeyOthers) {
  KeyPair ca = MakeCa("test CA").value();
  absl::StatusOr<std::string> der = PrivateKeyDer(ca.key_pem);
  ASSERT_TRUE(der.ok()) << der.status();
  ASSERT_FALSE(der->empty());
  // The same key written in the other PEM form.
  BIO* in = BIO_new_mem_buf(ca.key_pem.data(), static_cast<int>(ca.key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(in, nullptr, nullptr, nullptr);
  BIO_free(in);
  ASSERT_NE(key, nullptr);
  std::string forms[2];
  for (int traditional = 0; traditional < 2; ++traditional) {
    BIO* out = BIO_new(BIO_s_mem());
    ASSERT_EQ(traditional ? PEM_write_bio_PrivateKey_traditional(out, key, nullptr, nullptr, 0, nullptr, nullptr)
                          : PEM_write_bio_PrivateKey(out, key, nullptr, nullptr, 0, nullptr, nullptr),
              1);
    char* data = nullptr;
    long n = BIO_get_mem_data(out, &data);
    forms[traditional].assign(data, static_cast<size_t>(n));
    BIO_free(out);
  }
  EVP_PKEY_free(key);
  ASSERT_NE(forms[0], forms[1]);
  std::string crlf;
  for (char c : forms[1]) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  for (const std::string& pem : {forms[0], forms[1], crlf}) EXPECT_EQ(PrivateKeyDer(pem).value_or(""), *der);
  EXPECT_NE(PrivateKeyDer(MakeCa("another CA").value().key_pem).value_or(""), *der);
  absl::StatusOr<std::string> bad = PrivateKeyDer("not a key");
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
}

TEST_F(CertsTest, AKeyOthersMayReadIsRefusedNamingTheFile) {
  ASSERT_TRUE(InitCertDir(dir_, {}).ok());
  ASSERT_EQ(chmod(ServerKeyPath(dir_).c_str(), 0644), 0);
  absl::StatusOr<TlsFiles> files = LoadTlsFiles(CaCertPath(dir_), ServerCertPath(dir_), ServerKeyPath(dir_));
  EXPECT_TRUE(absl::IsPermissionDenied(files.status())) << files.status();
  EXPECT_NE(files.status().message().find(ServerKeyPath(dir_)), std::string::npos);
  EXPECT_NE(files.status().message().find("0644"), std::string::npos);
  // The CA's key too: a node certificate is not made with it.
  ASSERT_EQ(chmod(CaKeyPath(dir_).c_str(), 0640), 0);
  EXPECT_TRUE(absl::IsPermissionDenied(MakeNodeCert(dir_, "n1")));
}

TEST_F(CertsTest, ACertificateWithoutItsKeyIsAnError) {
  ASSERT_TRUE(InitCertDir(dir_, {}).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(LoadTlsFiles(CaCertPath(dir_), ServerCertPath(dir_), "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(LoadTlsFiles(ServerKeyPath(dir_), "", "").status()));  // not a certificate
  EXPECT_TRUE(absl::IsNotFound(LoadTlsFiles(root_ + "/none.crt", "", "").status()));
}

}  // namespace
}  // namespace trainyard::security

// The cluster's certificates with libcrypto (see certs.h).
#include "security/certs.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "security/crypto.h"
#include "security/files.h"

namespace trainyard::security {
namespace {

struct Free {
  void operator()(X509* p) const { X509_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
  void operator()(X509_REQ* p) const { X509_REQ_free(p); }
};
using X509Ptr = std::unique_ptr<X509, Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Free>;
using BioPtr = std::unique_ptr<BIO, Free>;

// The newest OpenSSL error, for a message.
std::string SslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

absl::Status Failed(absl::string_view what) { return absl::InternalError(absl::StrCat(what, ": ", SslError())); }

X509Ptr ParseCert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

KeyPtr ParseKey(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return KeyPtr(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

absl::StatusOr<KeyPair> Pem(X509* cert, EVP_PKEY* key) {
  BioPtr c(BIO_new(BIO_s_mem()));
  BioPtr k(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(c.get(), cert) != 1) return Failed("writing a certificate");
  if (PEM_write_bio_PrivateKey(k.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Failed("writing a key");
  }
  return KeyPair{BioText(c.get()), BioText(k.get())};
}

absl::Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Free> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return Failed(absl::StrCat("certificate extension ", OBJ_nid2sn(nid), " = ", value));
  }
  return absl::OkStatus();
}

// A certificate for `key` named `cn`, its validity set, not yet signed.
absl::StatusOr<X509Ptr> NewCert(EVP_PKEY* key, const std::string& cn, absl::Duration starts,
                                absl::Duration valid_for) {
  X509Ptr cert(X509_new());
  std::unique_ptr<BIGNUM, Free> serial(BN_new());
  if (!cert || !serial || X509_set_version(cert.get(), 2) != 1 ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return Failed("making a certificate");
  }
  long from = static_cast<long>(absl::ToInt64Seconds(starts));
  long until = static_cast<long>(absl::ToInt64Seconds(starts + valid_for));
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), from) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), until) == nullptr || X509_set_pubkey(cert.get(), key) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1,
                                 -1, 0) != 1) {
    return Failed("making a certificate");
  }
  return cert;
}

KeyPtr NewKey() { return KeyPtr(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")); }

bool IsIp(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

bool IsDnsName(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' && c != '*') {
      return false;
    }
  }
  return true;
}

absl::Status WriteCert(const std::string& path, const std::string& pem) {
  if (absl::Status s = WritePrivateFile(path, pem); !s.ok()) return s;
  // A certificate is public: the CA's is read by job masters' tasks.
  chmod(path.c_str(), 0644);
  return absl::OkStatus();
}

absl::Status MakePrivateDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(dir, ": cannot create: ", ec.message()));
  if (chmod(dir.c_str(), 0700) != 0) return absl::PermissionDeniedError(absl::StrCat(dir, ": cannot make it 0700"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<KeyPair> MakeCa(const std::string& common_name, absl::Duration valid_for) {
  KeyPtr key = NewKey();
  if (!key) return Failed("making a key");
  absl::StatusOr<X509Ptr> cert = NewCert(key.get(), common_name, -absl::Hours(1), valid_for);
  if (!cert.ok()) return cert.status();
  X509* c = cert->get();
  if (X509_set_issuer_name(c, X509_get_subject_name(c)) != 1) return Failed("making the CA");
  for (auto [nid, value] : {std::pair<int, const char*>{NID_basic_constraints, "critical,CA:TRUE"},
                            {NID_key_usage, "critical,keyCertSign,cRLSign"},
                            {NID_subject_key_identifier, "hash"}}) {
    if (absl::Status s = AddExt(c, c, nid, value); !s.ok()) return s;
  }
  if (X509_sign(c, key.get(), EVP_sha256()) <= 0) return Failed("signing the CA");
  return Pem(c, key.get());
}

namespace {
// A certificate for `key` (its public half) as `request` says, signed by
// `ca`; PEM.
absl::StatusOr<std::string> SignFor(const KeyPair& ca, EVP_PKEY* key, const CertRequest& request) {
  X509Ptr ca_cert = ParseCert(ca.cert_pem);
  KeyPtr ca_key = ParseKey(ca.key_pem);
  if (!ca_cert || !ca_key) return absl::InvalidArgumentError("the CA's certificate or key does not parse");
  std::vector<std::string> sans;
  for (const std::string& d : request.dns_names) {
    if (!IsDnsName(d)) return absl::InvalidArgumentError(absl::StrCat("'", d, "' is not a host name"));
    sans.push_back("DNS:" + d);
  }
  for (const std::string& ip : request.ip_addresses) {
    if (!IsIp(ip)) return absl::InvalidArgumentError(absl::StrCat("'", ip, "' is not an IP address"));
    sans.push_back("IP:" + ip);
  }
  absl::StatusOr<X509Ptr> cert = NewCert(key, request.common_name, request.starts, request.valid_for);
  if (!cert.ok()) return cert.status();
  X509* c = cert->get();
  if (X509_set_issuer_name(c, X509_get_subject_name(ca_cert.get())) != 1) return Failed("issuing a certificate");
  std::vector<std::pair<int, std::string>> exts = {
      {NID_basic_constraints, "critical,CA:FALSE"},
      {NID_key_usage, "critical,digitalSignature"},
      {NID_ext_key_usage, request.use == CertUse::kServer ? "serverAuth" : "clientAuth"},
      {NID_subject_key_identifier, "hash"},
      {NID_authority_key_identifier, "keyid:always"}};
  if (!sans.empty()) exts.emplace_back(NID_subject_alt_name, absl::StrJoin(sans, ","));
  for (const auto& [nid, value] : exts) {
    if (absl::Status s = AddExt(c, ca_cert.get(), nid, value); !s.ok()) return s;
  }
  if (X509_sign(c, ca_key.get(), EVP_sha256()) <= 0) return Failed("signing a certificate");
  BioPtr out(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(out.get(), c) != 1) return Failed("writing a certificate");
  return BioText(out.get());
}

CertRequest NodeRequest(const std::string& node) {
  CertRequest req;
  req.common_name = node;
  req.dns_names = {node};
  req.use = CertUse::kClient;
  return req;
}
}  // namespace

absl::StatusOr<KeyPair> IssueCert(const KeyPair& ca, const CertRequest& request) {
  KeyPtr key = NewKey();
  if (!key) return Failed("making a key");
  absl::StatusOr<std::string> cert = SignFor(ca, key.get(), request);
  if (!cert.ok()) return cert.status();
  BioPtr k(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PrivateKey(k.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Failed("writing a key");
  }
  return KeyPair{*cert, BioText(k.get())};
}

absl::StatusOr<KeyAndRequest> MakeKeyAndRequest(const std::string& node) {
  if (absl::Status s = CheckNodeNameForCert(node); !s.ok()) return s;
  KeyPtr key = NewKey();
  std::unique_ptr<X509_REQ, Free> req(X509_REQ_new());
  if (!key || !req || X509_REQ_set_pubkey(req.get(), key.get()) != 1 ||
      X509_NAME_add_entry_by_txt(X509_REQ_get_subject_name(req.get()), "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(node.c_str()), -1, -1, 0) != 1 ||
      X509_REQ_sign(req.get(), key.get(), EVP_sha256()) <= 0) {
    return Failed("making a certificate request");
  }
  BioPtr r(BIO_new(BIO_s_mem()));
  BioPtr k(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509_REQ(r.get(), req.get()) != 1 ||
      PEM_write_bio_PrivateKey(k.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Failed("writing a certificate request");
  }
  return KeyAndRequest{BioText(k.get()), BioText(r.get())};
}

absl::StatusOr<std::string> SignNodeRequest(const KeyPair& ca, const std::string& csr_pem, const std::string& node) {
  if (absl::Status s = CheckNodeNameForCert(node); !s.ok()) return s;
  BioPtr bio(BIO_new_mem_buf(csr_pem.data(), static_cast<int>(csr_pem.size())));
  std::unique_ptr<X509_REQ, Free> req(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
  if (!req) return absl::InvalidArgumentError("csr_pem: not a PEM certificate request");
  KeyPtr key(X509_REQ_get_pubkey(req.get()));
  if (!key || X509_REQ_verify(req.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("csr_pem: its signature does not match its key");
  }
  return SignFor(ca, key.get(), NodeRequest(node));
}

std::string CertPin(const std::string& cert_pem) {
  X509Ptr cert = ParseCert(cert_pem);
  if (!cert) return "";
  unsigned char* der = nullptr;
  int n = i2d_X509(cert.get(), &der);
  if (n <= 0) return "";
  std::string pin = "sha256:" + Sha256Hex(absl::string_view(reinterpret_cast<const char*>(der), static_cast<size_t>(n)));
  OPENSSL_free(der);
  return pin;
}

absl::StatusOr<std::string> PrivateKeyDer(const std::string& key_pem) {
  KeyPtr key = ParseKey(key_pem);
  if (!key) {
    ERR_clear_error();
    return absl::InvalidArgumentError("not a PEM private key");
  }
  unsigned char* der = nullptr;
  int n = i2d_PrivateKey(key.get(), &der);
  if (n <= 0) return Failed("encoding the private key");
  std::string bytes(reinterpret_cast<const char*>(der), static_cast<size_t>(n));
  OPENSSL_clear_free(der, static_cast<size_t>(n));
  return bytes;
}

absl::Status CheckNodeNameForCert(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 253;
  for (char c : name) {
    ok = ok && (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "node name '", name, "': a certificate's node name is letters, digits, '.', '-' and '_' (1..253 of them)"));
}

std::string CaCertPath(const std::string& dir) { return dir + "/ca.crt"; }
std::string CaKeyPath(const std::string& dir) { return dir + "/ca.key"; }
std::string ServerCertPath(const std::string& dir) { return dir + "/server.crt"; }
std::string ServerKeyPath(const std::string& dir) { return dir + "/server.key"; }
std::string NodeCertPath(const std::string& dir, const std::string& node) { return dir + "/nodes/" + node + ".crt"; }
std::string NodeKeyPath(const std::string& dir, const std::string& node) { return dir + "/nodes/" + node + ".key"; }

absl::StatusOr<KeyPair> LoadCa(const std::string& dir) {
  absl::StatusOr<std::string> cert = ReadWholeFile(CaCertPath(dir));
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPrivateKey(CaKeyPath(dir));
  if (!key.ok()) return key.status();
  return KeyPair{*cert, *key};
}

namespace {
absl::Status WritePair(const std::string& cert_path, const std::string& key_path, const KeyPair& pair) {
  if (absl::Status s = WritePrivateFile(key_path, pair.key_pem); !s.ok()) return s;
  return WriteCert(cert_path, pair.cert_pem);
}
}  // namespace

absl::StatusOr<InitResult> InitCertDir(const std::string& dir, const std::vector<std::string>& hosts) {
  if (absl::Status s = MakePrivateDir(dir); !s.ok()) return s;
  InitResult out;
  absl::StatusOr<KeyPair> ca = LoadCa(dir);
  if (absl::IsNotFound(ca.status()) && !std::filesystem::exists(CaKeyPath(dir)) &&
      !std::filesystem::exists(CaCertPath(dir))) {
    ca = MakeCa("trainyard cluster CA");
    if (!ca.ok()) return ca.status();
    if (absl::Status s = WritePair(CaCertPath(dir), CaKeyPath(dir), *ca); !s.ok()) return s;
    out.made_ca = true;
  }
  if (!ca.ok()) return ca.status();
  CertRequest req;
  req.common_name = "trainyard server";
  req.use = CertUse::kServer;
  req.dns_names = {"localhost"};
  req.ip_addresses = {"127.0.0.1", "::1"};
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0 && IsDnsName(host) && std::string(host) != "localhost") {
    req.dns_names.push_back(host);
  }
  for (const std::string& h : hosts) {
    if (IsIp(h)) {
      req.ip_addresses.push_back(h);
    } else if (IsDnsName(h)) {
      req.dns_names.push_back(h);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--host: '", h, "' is neither a host name nor an IP address"));
    }
  }
  absl::StatusOr<KeyPair> server = IssueCert(*ca, req);
  if (!server.ok()) return server.status();
  if (absl::Status s = WritePair(ServerCertPath(dir), ServerKeyPath(dir), *server); !s.ok()) return s;
  out.server_names = req.dns_names;
  out.server_names.insert(out.server_names.end(), req.ip_addresses.begin(), req.ip_addresses.end());
  return out;
}

absl::Status MakeNodeCert(const std::string& dir, const std::string& node) {
  if (absl::Status s = CheckNodeNameForCert(node); !s.ok()) return s;
  absl::StatusOr<KeyPair> ca = LoadCa(dir);
  if (absl::IsNotFound(ca.status())) {
    return absl::NotFoundError(
        absl::StrCat(dir, " holds no CA (", ca.status().message(), "); run `trainyard certs init --dir ", dir, "`"));
  }
  if (!ca.ok()) return ca.status();
  absl::StatusOr<KeyPair> pair = IssueCert(*ca, NodeRequest(node));
  if (!pair.ok()) return pair.status();
  if (absl::Status s = MakePrivateDir(dir + "/nodes"); !s.ok()) return s;
  return WritePair(NodeCertPath(dir, node), NodeKeyPath(dir, node), *pair);
}

absl::StatusOr<std::string> ReadPrivateKey(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("%s: a private key that others may read (mode %04o) is not used; chmod 600 it "
                        "(and make a new one if others may have read it)",
                        path, st.st_mode & 07777));
  }
  return ReadWholeFile(path);
}

absl::StatusOr<TlsFiles> LoadTlsFiles(const std::string& ca, const std::string& cert, const std::string& key) {
  TlsFiles out;
  absl::StatusOr<std::string> ca_pem = ReadWholeFile(ca);
  if (!ca_pem.ok()) return ca_pem.status();
  if (!ParseCert(*ca_pem)) return absl::InvalidArgumentError(absl::StrCat(ca, ": not a PEM certificate"));
  out.ca_pem = *ca_pem;
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("a certificate and its key go together: give both or neither");
  }
  if (cert.empty()) return out;
  absl::StatusOr<std::string> cert_pem = ReadWholeFile(cert);
  if (!cert_pem.ok()) return cert_pem.status();
  if (!ParseCert(*cert_pem)) return absl::InvalidArgumentError(absl::StrCat(cert, ": not a PEM certificate"));
  absl::StatusOr<std::string> key_pem = ReadPrivateKey(key);
  if (!key_pem.ok()) return key_pem.status();
  if (!ParseKey(*key_pem)) return absl::InvalidArgumentError(absl::StrCat(key, ": not a PEM private key"));
  out.cert_pem = *cert_pem;
  out.key_pem = *key_pem;
  return out;
}

namespace {
std::string CommonNameOf(X509* cert) {
  char buf[256] = {0};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, sizeof(buf)) < 0) return "";
  return buf;
}
}  // namespace

std::string CertCommonName(const std::string& cert_pem) {
  X509Ptr cert = ParseCert(cert_pem);
  return cert ? CommonNameOf(cert.get()) : "";
}

std::string NodeNameOfPeerCert(const std::string& cert_pem) {
  // Parsed once: OpenSSL 3 decodes the public key of every certificate it
  // parses, which is most of what an agent's registration costs beside its
  // handshake.
  X509Ptr cert = ParseCert(cert_pem);
  if (!cert || X509_check_ca(cert.get()) != 0 || X509_check_purpose(cert.get(), X509_PURPOSE_SSL_CLIENT, 0) != 1) {
    return "";
  }
  return CommonNameOf(cert.get());
}

bool IsLocalAddress(const std::string& address) {
  if (address.find(',') != std::string::npos) {
    // A list of servers: local only when every one of them is.
    for (absl::string_view one : absl::StrSplit(address, ',')) {
      if (!IsLocalAddress(std::string(one))) return false;
    }
    return true;
  }
  if (absl::StartsWith(address, "unix:") || address.find(':') == std::string::npos) return true;
  std::string host = address.substr(0, address.rfind(':'));
  return host == "localhost" || host == "[::1]" || host == "::1" || absl::StartsWith(host, "127.");
}

}  // namespace trainyard::security

// The cluster's certificates (docs/security.md, "Components"): a CA of the
// cluster, the server's certificate and one per node, made with OpenSSL's
// libcrypto (ECDSA P-256, SHA-256). A node's certificate names the node (its
// CN and a DNS SAN): the server binds the node's name to it. Keys are
// private files (0600 in a 0700 directory), and a key others may read is
// refused when loaded.
//
// A certificate directory (`trainyard certs init --dir DIR`):
//   DIR/ca.crt, DIR/ca.key            the cluster CA (10 years; never replaced)
//   DIR/server.crt, DIR/server.key    the server's (1 year)
//   DIR/nodes/NAME.crt, NAME.key      node NAME's (1 year)
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace trainyard::security {

// A certificate and its private key, PEM.
struct KeyPair {
  std::string cert_pem;
  std::string key_pem;
};

// What a certificate is for: a server (TLS serverAuth) or a client
// (clientAuth: a node's agent). One or the other, never both: the server's
// certificate cannot stand in for a node, nor a node's for the server.
enum class CertUse { kServer, kClient };

struct CertRequest {
  std::string common_name;
  std::vector<std::string> dns_names;  // SANs
  std::vector<std::string> ip_addresses;  // SANs: "127.0.0.1", "::1"
  CertUse use = CertUse::kClient;
  absl::Duration valid_for = absl::Hours(24 * 365);
  // The start of validity relative to now (a little in the past, for clocks
  // a bit behind); tests move it to make an expired certificate.
  absl::Duration starts = -absl::Hours(1);
};

inline constexpr absl::Duration kCaValidity = absl::Hours(24 * 365 * 10);
inline constexpr absl::Duration kCertValidity = absl::Hours(24 * 365);

// A new self-signed CA named `common_name`, valid `valid_for`.
absl::StatusOr<KeyPair> MakeCa(const std::string& common_name, absl::Duration valid_for = kCaValidity);

// A new key and a certificate for it as `request` says, signed by `ca`.
// Errors: a CA that does not parse, a SAN that is not valid.
absl::StatusOr<KeyPair> IssueCert(const KeyPair& ca, const CertRequest& request);

// Node names a certificate can carry: letters, digits, '.', '-', '_', at
// most 253 characters. Errors name the node.
absl::Status CheckNodeNameForCert(const std::string& name);

// The paths of a certificate directory.
std::string CaCertPath(const std::string& dir);
std::string CaKeyPath(const std::string& dir);
std::string ServerCertPath(const std::string& dir);
std::string ServerKeyPath(const std::string& dir);
std::string NodeCertPath(const std::string& dir, const std::string& node);
std::string NodeKeyPath(const std::string& dir, const std::string& node);

struct InitResult {
  bool made_ca = false;  // false: the CA was there and is kept
  std::vector<std::string> server_names;  // the server certificate's SANs
};

// Makes DIR (0700) with a CA (unless one is there: it is never replaced) and
// a new server certificate whose SANs are localhost, 127.0.0.1, ::1, this
// host's name and `hosts`. Errors name the file.
absl::StatusOr<InitResult> InitCertDir(const std::string& dir, const std::vector<std::string>& hosts);

// DIR's CA: its certificate and key (the key checked as ReadPrivateKey
// does). NotFound when DIR holds none.
absl::StatusOr<KeyPair> LoadCa(const std::string& dir);

// Makes node `node`'s certificate in DIR/nodes, signed by DIR's CA (which
// must exist). Errors name the node or the file.
absl::Status MakeNodeCert(const std::string& dir, const std::string& node);

// A private key file: its contents, refused (PermissionDenied, naming the
// file and its mode) when group or others may read or change it.
absl::StatusOr<std::string> ReadPrivateKey(const std::string& path);

// The key of `key_pem` in one encoding (DER), whichever PEM form held it
// (PKCS#8 or the algorithm's own, any line ends): the same bytes for the
// same key. InvalidArgument when it is not a PEM private key.
absl::StatusOr<std::string> PrivateKeyDer(const std::string& key_pem);

// The three files of one side of a TLS connection, read: the CA that
// verifies the other side, this side's certificate and key (checked as
// ReadPrivateKey does). `cert` and `key` may both be "" (a client that
// only verifies the server). Errors name the file.
struct TlsFiles {
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
};
absl::StatusOr<TlsFiles> LoadTlsFiles(const std::string& ca, const std::string& cert, const std::string& key);

// A new key and a certificate request for it (PEM), for a joining node.
struct KeyAndRequest {
  std::string key_pem;
  std::string csr_pem;
};
absl::StatusOr<KeyAndRequest> MakeKeyAndRequest(const std::string& node);

// Node `node`'s certificate for the key of `csr_pem` (its signature
// checked; what else it asks is ignored), signed by `ca`.
absl::StatusOr<std::string> SignNodeRequest(const KeyPair& ca, const std::string& csr_pem, const std::string& node);

// "sha256:" and the SHA-256 of the certificate's DER (the CA's pin a
// joining agent checks). "" when it does not parse.
std::string CertPin(const std::string& cert_pem);

// The CN of a certificate (PEM); "" when it does not parse.
std::string CertCommonName(const std::string& cert_pem);

// The node a peer's certificate (PEM, already verified against the CA by
// TLS) speaks for: its CN, when it is a client's certificate (clientAuth,
// not a CA). "" otherwise: the server's certificate names no node.
std::string NodeNameOfPeerCert(const std::string& cert_pem);

// True for an address whose traffic stays on this host, where TLS adds
// nothing: "unix:...", a bare port, localhost, 127.x.x.x or ::1 (as host:port
// or [host]:port); a comma-separated list when every entry is.
bool IsLocalAddress(const std::string& address);

}  // namespace trainyard::security

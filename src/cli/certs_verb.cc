// `trainyard certs init [--dir DIR] [--host NAME]...` makes the cluster's CA
// and the server's certificate; `trainyard certs node NAME [--dir DIR]` a
// node's (docs/security.md, "Components"). Files: security/certs.h.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_join.h"
#include "cli/verbs.h"
#include "security/certs.h"

namespace trainyard::cli {
namespace {

struct CertsFlags {
  std::string dir = ".trainyard/certs";
  std::vector<std::string> hosts;
  std::string node;
};

int Init(const CertsFlags& f) {
  absl::StatusOr<security::InitResult> r = security::InitCertDir(f.dir, f.hosts);
  if (!r.ok()) {
    std::cerr << "trainyard certs init: " << r.status().message() << "\n";
    return absl::IsInvalidArgument(r.status()) ? kExitUsage : kExitFailure;
  }
  std::cout << (r->made_ca ? "made the cluster CA " : "kept the cluster CA ") << security::CaCertPath(f.dir)
            << (r->made_ca ? " (valid 10 years; keep ca.key secret: it makes certificates)" : "") << "\n"
            << "made the server's certificate " << security::ServerCertPath(f.dir)
            << " for " << absl::StrJoin(r->server_names, ", ") << " (valid 1 year)\n"
            << "serve with: trainyard server --tls-dir " << f.dir << "\n";
  return kExitOk;
}

int Node(const CertsFlags& f) {
  absl::Status st = security::MakeNodeCert(f.dir, f.node);
  if (!st.ok()) {
    std::cerr << "trainyard certs node: " << st.message() << "\n";
    return absl::IsInvalidArgument(st) ? kExitUsage : kExitFailure;
  }
  std::cout << "made node " << f.node << "'s certificate " << security::NodeCertPath(f.dir, f.node) << " and key "
            << security::NodeKeyPath(f.dir, f.node) << " (valid 1 year)\n"
            << "run its agent with: trainyard agent --name " << f.node << " --ca " << security::CaCertPath(f.dir)
            << " --cert " << security::NodeCertPath(f.dir, f.node) << " --key "
            << security::NodeKeyPath(f.dir, f.node) << " ...\n";
  return kExitOk;
}

}  // namespace

void RegisterCerts(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<CertsFlags>();
  auto* certs = app.add_subcommand("certs", "Make the cluster's CA and its components' certificates");
  certs->require_subcommand(1);
  auto* init = certs->add_subcommand("init", "Make the cluster CA (unless there is one) and the server's certificate");
  init->add_option("--dir", f->dir, "the certificate directory")->capture_default_str();
  init->add_option("--host", f->hosts,
                   "a name or address clients reach the server by (repeatable; localhost, 127.0.0.1, ::1 and "
                   "this host's name are always in)");
  init->callback([f, exit_code] { *exit_code = Init(*f); });
  auto* node = certs->add_subcommand("node", "Make node NAME's certificate, signed by the cluster CA");
  node->add_option("name", f->node, "the node's name (its agent's --name)")->required();
  node->add_option("--dir", f->dir, "the certificate directory")->capture_default_str();
  node->callback([f, exit_code] { *exit_code = Node(*f); });
}

}  // namespace trainyard::cli

#include "tests/etcd/etcd_test_cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/wait_until.h"
#include "security/certs.h"
#include "security/files.h"
#include "store/etcd_client.h"

namespace trainyard::store_test {
namespace {

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

void StopProcess(pid_t pid, int signal) {
  if (pid <= 0) return;
  kill(pid, signal);
  bool gone = WaitUntil([&] { return waitpid(pid, nullptr, WNOHANG) == pid; }, absl::Seconds(10));
  if (!gone) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}

}  // namespace

absl::StatusOr<EtcdTlsFiles> MakeEtcdTlsFiles(const std::string& dir, const std::vector<std::string>& addresses) {
  absl::StatusOr<security::KeyPair> ca = security::MakeCa("trainyard test etcd CA");
  if (!ca.ok()) return ca.status();
  absl::StatusOr<security::KeyPair> member = security::IssueCert(
      *ca, {.common_name = "etcd", .ip_addresses = addresses, .use = security::CertUse::kServer});
  if (!member.ok()) return member.status();
  absl::StatusOr<security::KeyPair> client =
      security::IssueCert(*ca, {.common_name = "trainyard", .use = security::CertUse::kClient});
  if (!client.ok()) return client.status();
  EtcdTlsFiles files{.ca_file = dir + "/etcd-ca.pem",
                     .cert_file = dir + "/etcd-member.pem",
                     .key_file = dir + "/etcd-member-key.pem",
                     .client_cert_file = dir + "/etcd-client.pem",
                     .client_key_file = dir + "/etcd-client-key.pem"};
  const std::pair<const std::string*, const std::string*> writes[] = {
      {&files.ca_file, &ca->cert_pem},          {&files.cert_file, &member->cert_pem},
      {&files.key_file, &member->key_pem},      {&files.client_cert_file, &client->cert_pem},
      {&files.client_key_file, &client->key_pem}};
  for (const auto& [path, pem] : writes) {
    if (absl::Status written = security::WritePrivateFile(*path, *pem); !written.ok()) return written;
  }
  return files;
}

EtcdTestCluster::EtcdTestCluster(std::vector<EtcdMemberHost> hosts, EtcdTlsFiles tls,
                                 std::vector<std::string> extra_flags)
    : tls_(std::move(tls)), extra_flags_(std::move(extra_flags)) {
  const int members = static_cast<int>(hosts.size());
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/trainyard-etcd-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    status_ = absl::InternalError("cannot make a temporary directory for etcd");
    return;
  }
  dir_ = pattern;
  members_.resize(members);
  for (int i = 0; i < members; ++i) {
    members_[i].host = std::move(hosts[i]);
    members_[i].name = absl::StrCat("m", i);
    members_[i].client_port = FreeLoopbackPort();
    members_[i].peer_port = FreeLoopbackPort();
  }
  for (int i = 0; i < members && status_.ok(); ++i) status_ = Spawn(i);
  if (!status_.ok()) return;
  EtcdConnectOptions options = connect_options();
  options.call_timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Connect(options);
  if (!client.ok()) {
    status_ = client.status();
    return;
  }
  etcdserverpb::RangeRequest probe;
  probe.set_key("probe");
  bool up = WaitUntil([&] { return (*client)->Range(probe).ok(); }, absl::Seconds(60),
                      absl::Milliseconds(100));
  if (!up) status_ = absl::UnavailableError(absl::StrCat("etcd did not answer; see ", dir_, "/*.log"));
}

EtcdTestCluster::~EtcdTestCluster() {
  for (Member& member : members_) {
    StopProcess(member.pid, SIGTERM);
    member.pid = -1;
  }
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::vector<std::string> EtcdTestCluster::endpoints() const {
  std::vector<std::string> out;
  for (const Member& member : members_) out.push_back(absl::StrCat(member.host.address, ":", member.client_port));
  return out;
}

std::string EtcdTestCluster::address() const {
  return absl::StrCat(tls_.ca_file.empty() ? "etcd://" : "etcds://", absl::StrJoin(endpoints(), ","));
}

EtcdConnectOptions EtcdTestCluster::connect_options() const {
  EtcdConnectOptions options;
  options.endpoints = endpoints();
  if (!tls_.ca_file.empty()) {
    options.tls = true;
    options.ca_file = tls_.ca_file;
    options.cert_file = tls_.client_cert_file;
    options.key_file = tls_.client_key_file;
  }
  return options;
}

std::string EtcdTestCluster::initial_cluster() const {
  std::vector<std::string> peers;
  for (const Member& member : members_) {
    peers.push_back(absl::StrCat(member.name, "=http://", member.host.address, ":", member.peer_port));
  }
  return absl::StrJoin(peers, ",");
}

absl::Status EtcdTestCluster::Spawn(int i) {
  Member& member = members_[i];
  std::string client = absl::StrCat(tls_.ca_file.empty() ? "http://" : "https://", member.host.address, ":",
                                    member.client_port);
  std::string peer = absl::StrCat("http://", member.host.address, ":", member.peer_port);
  std::vector<std::string> args = member.host.prefix;
  std::vector<std::string> etcd = {
      "etcd", "--name", member.name, "--data-dir", absl::StrCat(dir_, "/", member.name),
      "--listen-client-urls", client, "--advertise-client-urls", client,
      "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
      "--initial-cluster", initial_cluster(), "--initial-cluster-state", "new",
      "--initial-cluster-token", dir_, "--logger", "zap", "--log-level", "warn",
      // Short elections, so a test that kills a member waits little.
      "--heartbeat-interval", "50", "--election-timeout", "500"};
  if (!tls_.ca_file.empty()) {
    etcd.insert(etcd.end(), {"--cert-file", tls_.cert_file, "--key-file", tls_.key_file, "--trusted-ca-file",
                             tls_.ca_file, "--client-cert-auth"});
  }
  etcd.insert(etcd.end(), extra_flags_.begin(), extra_flags_.end());
  args.insert(args.end(), etcd.begin(), etcd.end());
  std::string log = absl::StrCat(dir_, "/", member.name, ".log");
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  member.pid = pid;
  return absl::OkStatus();
}

void EtcdTestCluster::Kill(int member) {
  StopProcess(members_[member].pid, SIGKILL);
  members_[member].pid = -1;
}

// A member whose data dir holds its membership ignores the --initial-*
// flags: it rejoins as itself. Returns once it answers on its own endpoint
// (a linearizable read: it has rejoined the cluster).
absl::Status EtcdTestCluster::Restart(int member) {
  if (absl::Status st = Spawn(member); !st.ok()) return st;
  EtcdConnectOptions options = connect_options();
  options.endpoints = {endpoints()[member]};
  options.call_timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Connect(options);
  if (!client.ok()) return client.status();
  etcdserverpb::RangeRequest probe;
  probe.set_key("probe");
  if (!WaitUntil([&] { return (*client)->Range(probe).ok(); }, absl::Seconds(60), absl::Milliseconds(100))) {
    return absl::UnavailableError(absl::StrCat("etcd member ", members_[member].name, " did not answer after its restart"));
  }
  return absl::OkStatus();
}

}  // namespace trainyard::store_test

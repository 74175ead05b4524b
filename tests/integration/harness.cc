// Integration test harness: processes, CLI runs, a local cluster.
#include "tests/integration/harness.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "security/certs.h"
#include "security/crypto.h"
#include "security/files.h"
#include "security/tokens.h"

namespace trainyard::testing {

std::string TrainyardBin() {
  const char* bin = std::getenv("TRAINYARD_BIN");
  return bin ? bin : "trainyard";
}

std::string ProgramOnPath(const std::string& name) {
  for (absl::string_view dir : absl::StrSplit(std::getenv("PATH") ? std::getenv("PATH") : "", ':')) {
    std::string path = absl::StrCat(dir, "/", name);
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "trainyard-it-XXXXXX").string();
  char* p = mkdtemp(tmpl.data());
  path_ = p ? p : "/tmp";
}

TempDir::~TempDir() {
  std::error_code ec;
  if (std::getenv("TRAINYARD_KEEP_TMP") == nullptr) std::filesystem::remove_all(path_, ec);
}

Process::Process(const std::vector<std::string>& argv, const std::string& log) : log_(log) {
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
}

Process::~Process() { Stop(absl::Seconds(10)); }

bool Process::Running() {
  if (reaped_ || pid_ <= 0) return false;
  int status;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    if (WIFEXITED(status)) exit_status_ = WEXITSTATUS(status);
    return false;
  }
  return true;
}

void Process::Kill() {
  if (!Running()) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  reaped_ = true;
}

void Process::Stop(absl::Duration grace) {
  if (!Running()) return;
  kill(pid_, SIGTERM);
  if (!WaitUntil([&] { return !Running(); }, grace)) Kill();
}

std::vector<int64_t> NumberLines(const std::string& text) {
  std::vector<int64_t> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    int64_t n = 0;
    if (absl::SimpleAtoi(line, &n)) out.push_back(n);
  }
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string WaitForFile(const std::string& path) {
  return absl::StrCat("while [ ! -e ", path, " ]; do sleep 0.02; done");
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::trunc);
  out << content;
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

namespace {
// A socket bound to 127.0.0.1:port (port 0: any), or -1.
int BoundSocket(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}
// True when `pid` is a keeper of the node whose data dir is `node_dir`: the
// keeper program (`trainyard-keeper`) holds its task's log files open there;
// a keeper forked from its agent (before that program) kept the agent's
// command line, which names the dir.
bool KeeperOfNode(pid_t pid, const std::string& node_dir) {
  std::string cmdline = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  if (cmdline.find(node_dir + " ") != std::string::npos) return true;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/fd"), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::error_code link_ec;
    std::string target = std::filesystem::read_symlink(it->path(), link_ec).string();
    if (!link_ec && absl::StartsWith(target, node_dir + "/")) return true;
  }
  return false;
}

}  // namespace

int FreePortPair() {
  for (int tries = 0; tries < 100; ++tries) {
    int first = BoundSocket(0);
    if (first < 0) continue;
    sockaddr_in addr{};
    socklen_t len = sizeof(addr);
    getsockname(first, reinterpret_cast<sockaddr*>(&addr), &len);
    int port = ntohs(addr.sin_port);
    int second = port < 65535 ? BoundSocket(port + 1) : -1;
    close(first);
    if (second >= 0) {
      close(second);
      return port;
    }
  }
  return FreePort();
}

const std::string& AdminToken() {
  static const std::string token = [] {
    std::string t = "ty_" + security::RandomHex(32).value();
    // Every CLI this process starts speaks as the admin unless told
    // otherwise, however it is started (RunCli, Process, a shell).
    setenv("TRAINYARD_TOKEN", t.c_str(), 1);
    return t;
  }();
  return token;
}

std::string AdminAuthorization() { return "Bearer " + AdminToken(); }

namespace {
struct SharedCerts {
  TempDir root;
  std::string dir;
  std::string ca_file;
};

const SharedCerts& Certs() {
  // Removed when the test process exits.
  static const std::unique_ptr<SharedCerts> certs = [] {
    auto c = std::make_unique<SharedCerts>();
    c->dir = c->root.path() + "/certs";
    absl::StatusOr<security::InitResult> init = security::InitCertDir(c->dir, {});
    if (!init.ok()) std::fprintf(stderr, "harness: %s\n", std::string(init.status().message()).c_str());
    // The CA is public: a copy that another uid (a stranger's CLI) can read.
    chmod(c->root.path().c_str(), 0755);
    c->ca_file = c->root.path() + "/ca.crt";
    WriteFile(c->ca_file, ReadFile(security::CaCertPath(c->dir)));
    chmod(c->ca_file.c_str(), 0644);
    setenv("TRAINYARD_CA_FILE", c->ca_file.c_str(), 1);
    return c;
  }();
  return *certs;
}
}  // namespace

const std::string& ClusterCertDir() { return Certs().dir; }
const std::string& ClusterCaFile() { return Certs().ca_file; }
std::string ClusterCaPem() { return ReadFile(ClusterCaFile()); }

std::vector<std::string> AgentTlsFlags(const std::string& name) {
  const std::string& dir = ClusterCertDir();
  if (!std::filesystem::exists(security::NodeCertPath(dir, name))) {
    absl::Status made = security::MakeNodeCert(dir, name);
    if (!made.ok()) std::fprintf(stderr, "harness: %s\n", std::string(made.message()).c_str());
  }
  // The CA where `up` keeps it, in the cluster's 0700 certificate dir: tasks
  // running as other accounts must not depend on reading the agent's file.
  return {"--ca", security::CaCertPath(dir), "--cert", security::NodeCertPath(dir, name), "--key",
          security::NodeKeyPath(dir, name)};
}

CommandResult RunCli(const std::vector<std::string>& args, absl::Duration timeout,
                     const std::vector<std::string>& env) {
  std::vector<std::string> argv{TrainyardBin()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommandLine(argv, timeout, env);
}

std::vector<std::string> UpClientEnv(const std::string& data_dir) {
  return {"TRAINYARD_TOKEN", "TRAINYARD_CA_FILE", "TRAINYARD_CONFIG=" + data_dir + "/client.yaml"};
}

CommandResult RunCommandLine(const std::vector<std::string>& argv, absl::Duration timeout,
                             const std::vector<std::string>& env) {
  TempDir tmp;
  std::string out = tmp.path() + "/out", err = tmp.path() + "/err";
  const std::string& token = AdminToken();  // made before the fork
  const std::string& ca = ClusterCaFile();
  pid_t pid = fork();
  if (pid == 0) {
    setenv("TRAINYARD_TOKEN", token.c_str(), 1);
    setenv("TRAINYARD_CA_FILE", ca.c_str(), 1);
    for (const std::string& e : env) {
      size_t eq = e.find('=');
      if (eq == std::string::npos) {
        unsetenv(e.c_str());
      } else {
        setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
      }
    }
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  CommandResult r;
  int status = 0;
  bool done = WaitUntil([&] { return waitpid(pid, &status, WNOHANG) == pid; }, timeout);
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    r.exit_code = -2;
  } else {
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

namespace {

// Seconds since boot, as /proc/uptime says.
double Uptime() {
  double up = 0;
  std::istringstream(ReadFile("/proc/uptime")) >> up;
  return up;
}

// When `pid` started, in seconds since boot (field 22 of /proc/PID/stat); -1
// if it is gone.
double StartedAt(pid_t pid) {
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close_paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return -1;
}

}  // namespace

Cluster::Cluster(ClusterOptions options) : options_(std::move(options)), started_uptime_(Uptime() - 1) {
  // Each cluster serves its own block of ports, so two test runs never hand
  // out the same port.
  // A block is claimed with an flock on its lock file, held while the cluster
  // lives: clusters of test programs running at the same time (ctest -j)
  // never share one. The start is random so back-to-back runs spread out.
  std::mt19937 rng(static_cast<unsigned>(getpid()) ^ static_cast<unsigned>(absl::ToUnixNanos(absl::Now())));
  int first = static_cast<int>(rng() % 120);
  std::string lock_dir = std::filesystem::temp_directory_path().string() + "/trainyard-it-ports";
  std::error_code ec;
  std::filesystem::create_directories(lock_dir, ec);
  port_base_ = 20000 + first * 100;
  for (int k = 0; k < 120; ++k) {
    int block = (first + k) % 120;
    int fd = open(absl::StrCat(lock_dir, "/block-", block).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0666);
    if (fd < 0) break;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      port_lock_fd_ = fd;
      port_base_ = 20000 + block * 100;
      break;
    }
    close(fd);
  }
  StartServer("127.0.0.1:0");
  for (int i = 0; i < options_.nodes; ++i) {
    agents_.push_back(nullptr);
    StartAgent(i, options_.gpus, options_.topology);
  }
  WaitNodesReady(options_.nodes);
}

bool Cluster::StartServer(const std::string& listen) {
  // The test process's admin token is this server's too (added once; the
  // token file stays across restarts).
  std::string tokens = security::TokenFilePath(server_data_dir());
  if (ReadFile(tokens).find(security::Sha256Hex(AdminToken())) == std::string::npos) {
    absl::Status added = security::AddToken(tokens, AdminToken(), "admin", /*admin=*/true);
    if (!added.ok()) std::fprintf(stderr, "harness: %s\n", std::string(added.message()).c_str());
  }
  std::vector<std::string> argv = {TrainyardBin(), "server", "--listen", listen, "--data-dir",
                                   server_data_dir(), "--node-timeout-ms", absl::StrCat(options_.node_timeout_ms),
                                   "--heartbeat-interval-ms", absl::StrCat(options_.heartbeat_interval_ms),
                                   "--quiet-heartbeat-interval-ms", absl::StrCat(options_.quiet_heartbeat_interval_ms),
                                   "--kill-grace-ms", "2000", "--checkpoint-root", dir() + "/checkpoints",
                                   "--http-listen", "127.0.0.1:0"};
  if (options_.tls) argv.insert(argv.end(), {"--tls-dir", ClusterCertDir()});
  // Restarted: the agents' listener where the agents look for it.
  if (!agent_address_.empty()) argv.insert(argv.end(), {"--agent-listen", agent_address_});
  argv.insert(argv.end(), options_.server_flags.begin(), options_.server_flags.end());
  // The log is appended to across restarts: look past what is there.
  size_t skip = ReadFile(dir() + "/server.log").size();
  server_ = std::make_unique<Process>(argv, dir() + "/server.log");
  bool up = false;
  WaitUntil([&] {
    if (!server_->Running()) return true;  // it gave up: see its log
    std::string log = ReadFile(dir() + "/server.log");
    size_t at = log.find("listening on ", skip);
    if (at == std::string::npos) return false;
    size_t end = log.find('\n', at);
    if (end == std::string::npos) return false;
    address_ = log.substr(at + 13, end - at - 13);
    // Printed with the line above, in one write.
    const std::string agents = "agents connect to ";
    size_t agent_at = log.find(agents, end);
    size_t agent_end = agent_at == std::string::npos ? agent_at : log.find('\n', agent_at);
    if (agent_end == std::string::npos) return false;
    agent_address_ = log.substr(agent_at + agents.size(), agent_end - agent_at - agents.size());
    // Printed with the line above, in one write.
    const std::string dashboard = "/metrics on http://";
    size_t http = log.find(dashboard, end);
    size_t http_end = http == std::string::npos ? http : log.find('/', http + dashboard.size());
    if (http_end == std::string::npos) return false;
    http_address_ = log.substr(http + dashboard.size(), http_end - http - dashboard.size());
    up = true;
    return true;
  }, absl::Seconds(20), absl::Milliseconds(10));
  return up;
}

void Cluster::KillServer() { server_->Kill(); }

bool Cluster::RestartServer() {
  server_->Stop();
  return StartServer(address_);
}

bool Cluster::WaitNodesReady(int n, absl::Duration timeout) {
  return WaitUntil([&] {
    nlohmann::json nodes = Nodes();
    int ready = 0;
    for (const auto& node : nodes.value("nodes", nlohmann::json::array())) {
      ready += node["info"].value("state", "") == "READY";
    }
    return ready >= n;
  }, timeout, absl::Milliseconds(50));
}

void Cluster::KillLeftoverTasks() {
  // Tasks of an agent that was SIGKILLed (a lost node) outlive it under their
  // keepers; the agent's task records name each keeper, which leads its own
  // session. Only sessions started while this cluster lived are touched.
  for (int i = 0; i < static_cast<int>(agents_.size()); ++i) {
    std::error_code ec;
    std::string tasks = absl::StrCat(dir(), "/node-", i, "/tasks");
    for (auto it = std::filesystem::recursive_directory_iterator(tasks, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->path().extension() != ".json") continue;
      nlohmann::json j = nlohmann::json::parse(ReadFile(it->path().string()), nullptr, false);
      if (j.is_discarded() || !j.contains("pid") || !j["pid"].is_number_integer()) continue;
      pid_t pid = j["pid"].get<int>();
      // The pid may have been reused since the record was written (by
      // another test's server, a session leader too): only a keeper of this
      // node, which holds files in the node's data dir, is killed.
      if (pid > 1 && getsid(pid) == pid && StartedAt(pid) >= started_uptime_ &&
          KeeperOfNode(pid, absl::StrCat(dir(), "/node-", i))) {
        kill(-pid, SIGKILL);
      }
    }
  }
}

Cluster::~Cluster() {
  for (auto& a : agents_) {
    if (a) a->Stop();
  }
  if (server_) server_->Stop();
  KillLeftoverTasks();
  if (port_lock_fd_ >= 0) close(port_lock_fd_);  // the port block is free again
}

void Cluster::StartAgent(int i, int gpus, const std::string& topology) {
  std::string name = absl::StrCat("node-", i);
  int begin = port_base_ + i * 30;
  std::vector<std::string> argv{TrainyardBin(), "agent", "--server", address_, "--agent-server", agent_address_,
                                "--name", name, "--data-dir",
                                dir() + "/" + name, "--simulate-gpus", absl::StrCat(gpus), "--gpu-topology",
                                topology, "--memory-mb", "65536", "--vcores", "32", "--port-range",
                                absl::StrCat("[", begin, "-", begin + 29, "]"), "--address", "127.0.0.1"};
  if (options_.agents_kill_tasks_on_exit) argv.push_back("--kill-tasks-on-exit");
  // One file per agent: the next StartAgent rewriting a shared one while
  // this agent reads it at its start could hand it an empty map.
  std::string task_users = dir() + "/" + name + "-task-users";
  WriteFile(task_users, options_.task_user_map.empty() ? absl::StrCat("\"*\": ", getuid(), "\n")
                                                       : options_.task_user_map);
  argv.insert(argv.end(), {"--task-user-map", task_users});
  if (options_.task_user_map.empty() && getuid() == 0) argv.push_back("--allow-root-tasks");
  if (options_.tls) {
    std::vector<std::string> tls = AgentTlsFlags(name);
    argv.insert(argv.end(), tls.begin(), tls.end());
  }
  argv.insert(argv.end(), options_.agent_flags.begin(), options_.agent_flags.end());
  agents_[i] = std::make_unique<Process>(argv, absl::StrCat(dir(), "/", name, ".log"));
}

void Cluster::RestartAgent(int i) { RestartAgent(i, options_.gpus, options_.topology); }

void Cluster::RestartAgent(int i, int gpus, const std::string& topology) {
  agents_[i]->Stop();
  StartAgent(i, gpus, topology);
}

CommandResult Cluster::Cli(std::vector<std::string> args, const std::vector<std::string>& env) {
  args.push_back("--server");
  args.push_back(address_);
  if (!options_.tls) {
    std::vector<std::string> plain = {"TRAINYARD_CA_FILE"};
    plain.insert(plain.end(), env.begin(), env.end());
    return RunCli(args, absl::Seconds(60), plain);
  }
  return RunCli(args, absl::Seconds(60), env);
}

CommandResult Cluster::CliAs(const std::string& token, std::vector<std::string> args) {
  return Cli(std::move(args), {"TRAINYARD_TOKEN=" + token});
}

std::string Cluster::UserToken(const std::string& user, bool admin) {
  std::vector<std::string> args = {"token", "create", user};
  if (admin) args.push_back("--admin");
  CommandResult r = Cli(args);
  if (r.exit_code != 0) return "";
  return std::string(absl::StripAsciiWhitespace(r.out));
}

std::string Cluster::Submit(const std::string& yaml) {
  static int n = 0;
  std::string path = absl::StrCat(dir(), "/spec-", n++, ".yaml");
  WriteFile(path, yaml);
  CommandResult r = Cli({"submit", path});
  if (r.exit_code != 0) {
    // The test sees only "": why it failed goes to the test's log.
    std::fprintf(stderr, "harness: trainyard submit %s exited %d: %s\n", path.c_str(), r.exit_code, r.err.c_str());
    return "";
  }
  // "job NAME submitted"
  std::string out = r.out;
  size_t a = out.find("job ");
  size_t b = out.find(" submitted");
  return a == std::string::npos || b == std::string::npos ? "" : out.substr(a + 4, b - a - 4);
}

nlohmann::json Cluster::Describe(const std::string& job) {
  CommandResult r = Cli({"describe", job, "-o", "json"});
  if (r.exit_code != 0) {
    // Said, so that a test that sees an empty job can be read after a failure.
    std::fprintf(stderr, "harness: describe %s exited %d: %s\n", job.c_str(), r.exit_code, r.err.c_str());
    return nlohmann::json::object();
  }
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

std::string Cluster::JobState(const std::string& job) { return Describe(job).value("state", ""); }

bool Cluster::WaitForState(const std::string& job, const std::string& state, absl::Duration timeout) {
  return WaitUntil([&] { return JobState(job) == state; }, timeout, absl::Milliseconds(100));
}

nlohmann::json Cluster::Nodes() {
  CommandResult r = Cli({"nodes", "-o", "json"});
  if (r.exit_code != 0) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

nlohmann::json Task(const nlohmann::json& describe, const std::string& role, int index) {
  for (const auto& t : describe.value("tasks", nlohmann::json::array())) {
    if (t.value("role", "") == role && t.value("index", 0) == index) return t;
  }
  return nlohmann::json::object();
}

bool HasEvent(const nlohmann::json& describe, const std::string& kind, const std::string& text) {
  for (const auto& e : describe.value("events", nlohmann::json::array())) {
    if (e.value("kind", "") == kind && e.value("text", "").find(text) != std::string::npos) return true;
  }
  return false;
}

nlohmann::json NodeNamed(Cluster& cluster, const std::string& name) {
  for (const auto& n : cluster.Nodes().value("nodes", nlohmann::json::array())) {
    if (n.contains("info") && n["info"].value("name", "") == name) return n;
  }
  return nlohmann::json::object();
}

int ReadPid(const std::string& path) {
  int pid = 0;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(path)), &pid) ? pid : 0;
}

bool Alive(int pid) {
  if (kill(pid, 0) != 0) return false;
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

std::string MakeOut(const Cluster& cluster) {
  std::string out = cluster.dir() + "/out";
  mkdir(out.c_str(), 0755);
  return out;
}

}  // namespace trainyard::testing

// `trainyard admin backup FILE` and `trainyard admin restore FILE`: a
// store's whole content to a file and back (store/store_backup.h), from and
// into SQLite (--data-dir) or etcd (--store etcd://...). A backup may be
// taken while the server runs (SQLite is opened read-only; etcd is read at
// one revision); a restore needs an empty store, with no server on it.
#include <sys/stat.h>

#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "cli/text.h"
#include "cli/verbs.h"
#include "store/etcd_client.h"
#include "store/etcd_state_store.h"
#include "store/sqlite_state_store.h"
#include "store/store_backup.h"

namespace trainyard::cli {
namespace {

struct StoreFlags {
  std::string file;
  std::string data_dir;
  std::string store;
  std::string etcd_ca, etcd_cert, etcd_key;
  std::string etcd_prefix = "/trainyard/";
};

absl::StatusOr<StateStorePtr> OpenStore(const StoreFlags& f, bool restore) {
  if (f.data_dir.empty() == f.store.empty()) {
    return absl::InvalidArgumentError("give the store: --data-dir DIR (SQLite) or --store etcd://HOST:PORT,...");
  }
  if (!f.data_dir.empty()) {
    SqliteStoreOptions options;
    options.read_only = !restore;          // a backup never writes; the server may run
    options.create_if_missing = restore;   // a restore makes a new store
    return SqliteStateStore::Open(f.data_dir, options);
  }
  absl::StatusOr<EtcdConnectOptions> connect = ParseEtcdAddress(f.store);
  if (!connect.ok()) return connect.status();
  connect->ca_file = f.etcd_ca;
  connect->cert_file = f.etcd_cert;
  connect->key_file = f.etcd_key;
  EtcdStoreOptions options;
  options.connect = *connect;
  options.prefix = f.etcd_prefix;
  absl::StatusOr<std::unique_ptr<EtcdStateStore>> store = EtcdStateStore::Open(options);
  if (!store.ok()) return store.status();
  return StateStorePtr(std::move(*store));
}

std::string CountsText(const BackupCounts& c) {
  return absl::StrCat(Count(c.jobs, "job"), " (", Count(c.tasks, "task"), "), ", Count(c.events, "event"), ", ",
                      Count(c.nodes, "node"), ", ", Count(c.meta, "metadata value"));
}

int Run(const char* verb, const StoreFlags& f, bool restore) {
  // What it makes (a restored data dir and store, the backup's temporary
  // file) is the admin's alone: 0700 and 0600.
  ::umask(077);
  absl::StatusOr<StateStorePtr> store = OpenStore(f, restore);
  if (!store.ok()) {
    std::cerr << "trainyard admin " << verb << ": " << store.status().message() << "\n";
    return store.status().code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  absl::StatusOr<BackupCounts> counts = restore ? RestoreBackup(f.file, **store) : WriteBackup(**store, f.file);
  if (!counts.ok()) {
    std::cerr << "trainyard admin " << verb << ": " << counts.status().message() << "\n";
    return kExitFailure;
  }
  std::cout << (restore ? "restored " : "backed up ") << CountsText(*counts) << (restore ? " from " : " to ")
            << f.file << "\n";
  return kExitOk;
}

void AddStoreFlags(CLI::App* c, StoreFlags* f) {
  c->add_option("--data-dir", f->data_dir, "the SQLite store in this server data dir");
  c->add_option("--store", f->store, "the etcd store: etcd://HOST:PORT,... (etcds:// for TLS)");
  c->add_option("--etcd-ca", f->etcd_ca, "TLS to etcd: the CA certificate (PEM)");
  c->add_option("--etcd-cert", f->etcd_cert, "TLS to etcd: the client certificate (PEM)");
  c->add_option("--etcd-key", f->etcd_key, "TLS to etcd: the client certificate's key (PEM)");
  c->add_option("--etcd-prefix", f->etcd_prefix, "the key prefix of the cluster in etcd (default /trainyard/)");
}

}  // namespace

void RegisterAdmin(CLI::App& app, int* exit_code) {
  auto* admin = app.add_subcommand("admin", "Admin: back up a store's whole content to a file, or restore one");
  admin->require_subcommand(1);
  static StoreFlags backup, restore;
  auto* b = admin->add_subcommand(
      "backup", "Write every job, task, event, node and metadata value of a store to FILE (0600); the server may run");
  b->add_option("FILE", backup.file, "the backup file")->required();
  AddStoreFlags(b, &backup);
  b->callback([exit_code] { *exit_code = Run("backup", backup, false); });
  auto* r = admin->add_subcommand(
      "restore", "Write a backup FILE into an empty store (a new --data-dir, or an etcd prefix no server uses)");
  r->add_option("FILE", restore.file, "the backup file")->required();
  AddStoreFlags(r, &restore);
  r->callback([exit_code] { *exit_code = Run("restore", restore, true); });
}

}  // namespace trainyard::cli

// SharedFiles (see shared_files.h).
#include "server/shared_files.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "security/crypto.h"
#include "security/files.h"

namespace trainyard::server {

const std::vector<std::string>& SharedFiles::Names() {
  static const auto* names = new std::vector<std::string>{kJobSecret, kTokens, kJoinTokens};
  return *names;
}

std::string SharedFiles::MetaKey(const std::string& name) { return absl::StrCat("shared-file/", name); }

std::string SharedFiles::SealKeyFromCaKey(const std::string& ca_key_der) {
  return security::HmacSha256Hex(ca_key_der, "trainyard: the jobs' secret as the store keeps it");
}

absl::StatusOr<std::string> SharedFiles::Held(const std::string& name) {
  absl::StatusOr<std::string> held = store_->GetMeta(MetaKey(name));
  if (absl::IsNotFound(held.status())) return held;
  if (!held.ok()) {
    return absl::Status(held.status().code(), absl::StrCat("the store's copy of ", name, ": ", held.status().message()));
  }
  if (name != kJobSecret) return held;
  absl::StatusOr<std::string> opened = security::Open(seal_key_, *held);
  if (!opened.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the cluster's jobs' secret in the store was sealed under another CA than this server's: give every server "
        "the same --tls-dir, a copy of the first server's (or, to start over with this server's secret, which ends "
        "the credentials of every job running, delete the store's metadata key ",
        MetaKey(kJobSecret), ": etcdctl del PREFIXm/", MetaKey(kJobSecret), ", /trainyard/ the default prefix) (",
        opened.status().message(), ")"));
  }
  return opened;
}

absl::Status SharedFiles::Adopt() {
  absl::MutexLock lock(&mu_);
  for (const std::string& name : Names()) {
    if (name == kJobSecret && seal_key_.empty()) {
      // Leading with a secret of its own would end the credentials of
      // every job running.
      if (absl::IsNotFound(store_->GetMeta(MetaKey(name)).status())) continue;
      return absl::FailedPreconditionError(
          "the cluster's jobs' secret is in the store, sealed under its CA's key, and this server has no CA key (its "
          "--tls-dir holds no ca.key, or it serves plaintext): give every server the same --tls-dir");
    }
    absl::StatusOr<std::string> held = Held(name);
    if (absl::IsNotFound(held.status())) continue;
    if (!held.ok()) return held.status();
    absl::StatusOr<std::string> local = security::ReadWholeFile(PathOf(name));
    if (local.ok() && *local == *held) continue;
    if (absl::Status st = security::WritePrivateFile(PathOf(name), *held); !st.ok()) return st;
    Log(LogLevel::kInfo, "server", "%s: %s the cluster's copy from the store", PathOf(name),
        local.ok() ? "replaced by" : "written from");
  }
  return absl::OkStatus();
}

absl::Status SharedFiles::Publish(const std::string& name) {
  if (name == kJobSecret && seal_key_.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::string> local = security::ReadWholeFile(PathOf(name));
  if (absl::IsNotFound(local.status())) return absl::OkStatus();
  if (!local.ok()) return local.status();
  absl::StatusOr<std::string> held = Held(name);
  if (!held.ok() && !absl::IsNotFound(held.status())) return held.status();
  if (held.ok() && *held == *local) return absl::OkStatus();
  std::string value = *local;
  if (name == kJobSecret) {
    absl::StatusOr<std::string> sealed = security::Seal(seal_key_, *local);
    if (!sealed.ok()) return sealed.status();
    value = *std::move(sealed);
  }
  WriteBatch batch;
  batch.PutMeta(MetaKey(name), std::move(value));
  if (absl::Status st = store_->Commit(std::move(batch)); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat(PathOf(name), ": not kept in the store, so the other servers lack it: ",
                                                st.message()));
  }
  return absl::OkStatus();
}

absl::Status SharedFiles::PublishAll() {
  absl::Status first;
  for (const std::string& name : Names()) first.Update(Publish(name));
  return first;
}

}  // namespace trainyard::server

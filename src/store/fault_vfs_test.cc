// The fault-injecting VFS of fault_vfs.h: each file wraps one of the default
// VFS, forwarding every call except the writes and syncs that the current
// fault makes fail.
#include <sqlite3.h>

#include <atomic>
#include <mutex>

#include "store/fault_vfs.h"

namespace trainyard::store_test {
namespace {

std::atomic<Fault> g_fault{Fault::kNone};
sqlite3_vfs* g_real = nullptr;
sqlite3_vfs g_vfs;
sqlite3_io_methods g_methods;

struct FaultFile {
  sqlite3_file base;
  sqlite3_file* real;
};

sqlite3_file* Real(sqlite3_file* f) { return reinterpret_cast<FaultFile*>(f)->real; }
const sqlite3_io_methods* M(sqlite3_file* f) { return Real(f)->pMethods; }

int Close(sqlite3_file* f) { return M(f)->xClose(Real(f)); }
int Read(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
  return M(f)->xRead(Real(f), buf, n, off);
}
int Write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 off) {
  Fault fault = g_fault.load();
  if (fault == Fault::kWriteFails) return SQLITE_IOERR_WRITE;
  if (fault == Fault::kDiskFull) return SQLITE_FULL;
  return M(f)->xWrite(Real(f), buf, n, off);
}
int Truncate(sqlite3_file* f, sqlite3_int64 size) { return M(f)->xTruncate(Real(f), size); }
int Sync(sqlite3_file* f, int flags) {
  Fault fault = g_fault.load();
  if (fault == Fault::kSyncFails || fault == Fault::kWriteFails) return SQLITE_IOERR_FSYNC;
  return M(f)->xSync(Real(f), flags);
}
int FileSize(sqlite3_file* f, sqlite3_int64* size) { return M(f)->xFileSize(Real(f), size); }
int Lock(sqlite3_file* f, int level) { return M(f)->xLock(Real(f), level); }
int Unlock(sqlite3_file* f, int level) { return M(f)->xUnlock(Real(f), level); }
int CheckReservedLock(sqlite3_file* f, int* out) { return M(f)->xCheckReservedLock(Real(f), out); }
int FileControl(sqlite3_file* f, int op, void* arg) { return M(f)->xFileControl(Real(f), op, arg); }
int SectorSize(sqlite3_file* f) { return M(f)->xSectorSize(Real(f)); }
int DeviceCharacteristics(sqlite3_file* f) { return M(f)->xDeviceCharacteristics(Real(f)); }
int ShmMap(sqlite3_file* f, int page, int size, int extend, void volatile** out) {
  return M(f)->xShmMap(Real(f), page, size, extend, out);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return M(f)->xShmLock(Real(f), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) { M(f)->xShmBarrier(Real(f)); }
int ShmUnmap(sqlite3_file* f, int del) { return M(f)->xShmUnmap(Real(f), del); }
int Fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** out) {
  return M(f)->xFetch(Real(f), off, n, out);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return M(f)->xUnfetch(Real(f), off, p);
}

int Open(sqlite3_vfs*, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  auto* ff = reinterpret_cast<FaultFile*>(file);
  ff->real = reinterpret_cast<sqlite3_file*>(ff + 1);
  ff->base.pMethods = nullptr;
  int rc = g_real->xOpen(g_real, name, ff->real, flags, out_flags);
  if (rc == SQLITE_OK) ff->base.pMethods = &g_methods;
  return rc;
}
int Delete(sqlite3_vfs*, const char* name, int sync) { return g_real->xDelete(g_real, name, sync); }
int Access(sqlite3_vfs*, const char* name, int flags, int* out) {
  return g_real->xAccess(g_real, name, flags, out);
}
int FullPathname(sqlite3_vfs*, const char* name, int n, char* out) {
  return g_real->xFullPathname(g_real, name, n, out);
}

void Register() {
  g_real = sqlite3_vfs_find(nullptr);
  g_methods = {};
  g_methods.iVersion = 3;
  g_methods.xClose = Close;
  g_methods.xRead = Read;
  g_methods.xWrite = Write;
  g_methods.xTruncate = Truncate;
  g_methods.xSync = Sync;
  g_methods.xFileSize = FileSize;
  g_methods.xLock = Lock;
  g_methods.xUnlock = Unlock;
  g_methods.xCheckReservedLock = CheckReservedLock;
  g_methods.xFileControl = FileControl;
  g_methods.xSectorSize = SectorSize;
  g_methods.xDeviceCharacteristics = DeviceCharacteristics;
  g_methods.xShmMap = ShmMap;
  g_methods.xShmLock = ShmLock;
  g_methods.xShmBarrier = ShmBarrier;
  g_methods.xShmUnmap = ShmUnmap;
  g_methods.xFetch = Fetch;
  g_methods.xUnfetch = Unfetch;
  g_vfs = *g_real;
  g_vfs.pNext = nullptr;
  g_vfs.zName = "trainyard_fault";
  g_vfs.szOsFile = static_cast<int>(sizeof(FaultFile)) + g_real->szOsFile;
  g_vfs.xOpen = Open;
  g_vfs.xDelete = Delete;
  g_vfs.xAccess = Access;
  g_vfs.xFullPathname = FullPathname;
  sqlite3_vfs_register(&g_vfs, 0);
}

}  // namespace

const char* FaultVfsName() {
  static std::once_flag once;
  std::call_once(once, Register);
  return g_vfs.zName;
}

void SetFault(Fault fault) { g_fault.store(fault); }

}  // namespace trainyard::store_test

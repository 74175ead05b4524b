// A test-only SQLite VFS over the default one that fails writes or fsyncs on
// demand, the way a dying disk, a full disk or a file system remounted
// read-only does. The code lives in fault_vfs_test.cc (test program only).
#pragma once

namespace trainyard::store_test {

enum class Fault {
  kNone,
  kWriteFails,  // every write returns EIO (also what a read-only remount gives)
  kSyncFails,   // every fsync fails
  kDiskFull,    // every write finds no space
};

// Registers the VFS once and returns its name, for
// SqliteStoreOptions::vfs_for_test.
const char* FaultVfsName();

// Makes every file opened through the VFS misbehave as `fault` says, from now
// on.
void SetFault(Fault fault);

}  // namespace trainyard::store_test

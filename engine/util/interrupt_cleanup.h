// What an interrupted command leaves behind: one process-wide registry of the files being
// written (an export's PATH.partial-XXXXXX, a report's PATH.partial-XXXXXX, a database `import`
// created), and the SIGINT/SIGTERM/SIGHUP handler the CLI installs, which removes each registered
// file from the signal handler (unlink(2) and write(2) only: async-signal-safe), says so on stderr,
// then re-raises the signal with its default action, so the exit status still tells the
// signal. Every command that writes a file registers it here: one mechanism, not copies.
// Thread safety: Register/Unregister from any thread; the registry is a fixed table of slots
// claimed with atomics (no allocation, no lock), which the handler reads.
#pragma once

#include <string>

namespace tracedb::engine {

// A registered file, unregistered on destruction (or by Release()).
class InterruptCleanup {
 public:
  InterruptCleanup() = default;
  // Registers `path` for removal on a signal; `who` prefixes the message ("tracedb export").
  // `sqlite_db`: also PATH-journal, PATH-wal and PATH-shm. A path too long for the table
  // (over 4000 bytes), or a full table (64 files at once), is not registered.
  InterruptCleanup(const std::string& path, const std::string& who, bool sqlite_db = false);
  ~InterruptCleanup() { Release(); }
  InterruptCleanup(InterruptCleanup&& o) noexcept : slot_(o.slot_) { o.slot_ = -1; }
  InterruptCleanup& operator=(InterruptCleanup&& o) noexcept;
  InterruptCleanup(const InterruptCleanup&) = delete;
  InterruptCleanup& operator=(const InterruptCleanup&) = delete;

  // The file is complete (renamed into place) or already removed: no longer cleaned up.
  void Release();
  bool registered() const { return slot_ >= 0; }

 private:
  int slot_ = -1;
};

// Installs the handler for SIGINT, SIGTERM and SIGHUP (the CLI does, once, at start; a command
// that handles a signal itself, e.g. `compact --watch`, replaces it for its run). A library
// linked into another program (Python) never installs it.
void InstallInterruptCleanupHandler();

}  // namespace tracedb::engine

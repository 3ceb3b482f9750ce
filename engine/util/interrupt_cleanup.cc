// The registry of files to remove on an interrupt, and its signal handler. See
// interrupt_cleanup.h.
#include "engine/util/interrupt_cleanup.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace tracedb::engine {
namespace {

constexpr int kSlots = 64;
constexpr size_t kPathMax = 4096;
constexpr size_t kWhoMax = 64;

// state: 0 free, 1 being filled or emptied (the handler skips it), 2 registered.
struct Slot {
  std::atomic<int> state{0};
  bool sqlite_db = false;
  char path[kPathMax];
  char who[kWhoMax];
};
Slot g_slots[kSlots];

void Say(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

// unlink(2) of `base` + `suffix` from a signal handler: no allocation.
bool UnlinkWith(const char* base, const char* suffix) {
  char p[kPathMax + 16];
  const size_t a = std::strlen(base), b = std::strlen(suffix);
  if (a + b >= sizeof(p)) return false;
  std::memcpy(p, base, a);
  std::memcpy(p + a, suffix, b + 1);
  return ::unlink(p) == 0;
}

void OnSignal(int sig) {
  const int saved = errno;
  for (Slot& s : g_slots) {
    if (s.state.load(std::memory_order_acquire) != 2) continue;
    bool removed = UnlinkWith(s.path, "");
    if (s.sqlite_db) {
      for (const char* suffix : {"-journal", "-wal", "-shm"}) UnlinkWith(s.path, suffix);
    }
    if (removed) {
      Say(s.who);
      Say(": interrupted (");
      Say(sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP");
      Say("); removed the unfinished ");
      Say(s.path);
      Say("\n");
    }
  }
  errno = saved;
  // The default action now, so that the exit status says which signal ended the process.
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

InterruptCleanup::InterruptCleanup(const std::string& path, const std::string& who,
                                   bool sqlite_db) {
  if (path.empty() || path.size() >= kPathMax) return;  // nothing of ours to remove
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (!g_slots[i].state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      continue;
    }
    Slot& s = g_slots[i];
    std::memcpy(s.path, path.c_str(), path.size() + 1);
    const size_t w = who.size() < kWhoMax - 1 ? who.size() : kWhoMax - 1;
    std::memcpy(s.who, who.data(), w);
    s.who[w] = '\0';
    s.sqlite_db = sqlite_db;
    s.state.store(2, std::memory_order_release);
    slot_ = i;
    return;
  }
}

InterruptCleanup& InterruptCleanup::operator=(InterruptCleanup&& o) noexcept {
  if (this != &o) {
    Release();
    slot_ = o.slot_;
    o.slot_ = -1;
  }
  return *this;
}

void InterruptCleanup::Release() {
  if (slot_ < 0) return;
  g_slots[slot_].state.store(0, std::memory_order_release);
  slot_ = -1;
}

void InstallInterruptCleanupHandler() {
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  // The three share one handler; while it runs the others wait (no file removed twice).
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  sigaddset(&sa.sa_mask, SIGHUP);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old = {};
    ::sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;  // e.g. started with nohup: keep ignoring it
    ::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace tracedb::engine

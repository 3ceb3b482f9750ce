// Test helpers. See test_util.h.
#include "tests/test_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/segment/segment_dir.h"

namespace tracedb::testing {

namespace {
// The environment variable `name` when it is set and not empty, else `fallback` (what CMake
// compiled in).
std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}
}  // namespace

// Without CMake's definitions (a build by hand): the source tree here, the programs on PATH,
// scratch directories under /tmp.
#ifndef TRACEDB_SOURCE_ROOT
#define TRACEDB_SOURCE_ROOT "."
#endif
#ifndef TRACEDB_BIN_PATH
#define TRACEDB_BIN_PATH "tracedb"
#endif
#ifndef TRACEDB_PYTHON3_PATH
#define TRACEDB_PYTHON3_PATH "python3"
#endif
#ifndef TRACEDB_TEST_TMP_ROOT
#define TRACEDB_TEST_TMP_ROOT "/tmp/tracedb-test"
#endif

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  const std::string root = EnvOr("TRACEDB_TEST_TMP", TRACEDB_TEST_TMP_ROOT);
  std::filesystem::create_directories(root);
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "t";
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  path_ = root + "/" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  if (std::getenv("TRACEDB_KEEP_TMP") == nullptr) RemoveTree(path_);
}

void RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string RunCommand(const std::string& cmd, int* exit_code) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *exit_code = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  *exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

std::string SourceRoot() { return EnvOr("TRACEDB_SOURCE_DIR", TRACEDB_SOURCE_ROOT); }

std::string SharedFixtures() { return SourceRoot() + "/../shared/fixtures"; }

std::string SharedFixturePath(const std::string& sub) {
  const std::string path = sub.empty() ? SharedFixtures() : SharedFixtures() + "/" + sub;
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return path;
  const char* ci = std::getenv("CI");
  if (ci != nullptr && std::string(ci) == "true") {
    ADD_FAILURE() << "CI=true and the shared fixture " << path
                  << " is missing: tests on real files must run in CI, not skip";
  }
  return "";
}

std::string TracedbBin() { return EnvOr("TRACEDB_BIN", TRACEDB_BIN_PATH); }

std::string Python3Bin() { return EnvOr("TRACEDB_TEST_PYTHON3", TRACEDB_PYTHON3_PATH); }

namespace {

class CollectVisitor : public engine::SegmentVisitor {
 public:
  CollectVisitor(Collected* c, int32_t rank, uint32_t pid) : c_(c), rank_(rank), pid_(pid) {}
  void OnMeta(const engine::SegmentMeta& m) override { c_->metas.push_back(m); }
  void OnStrings(uint32_t first, const std::vector<std::string>& s) override {
    for (size_t i = 0; i < s.size(); ++i) strings_[first + static_cast<uint32_t>(i)] = s[i];
  }
  void OnLanes(const std::vector<engine::LaneInfo>& lanes) override {
    for (const auto& l : lanes) lanes_[l.lane] = l.name;
  }
  void OnThreads(const std::vector<engine::ThreadInfo>& t) override {
    for (const auto& x : t) c_->thread_names[x.index] = x.name;
  }
  void OnEvents(uint32_t thread, const std::vector<engine::SegmentEvent>& events) override {
    for (const auto& e : events) {
      ReadEvent r;
      r.rank = rank_;
      r.pid = pid_;
      r.thread = thread;
      r.name = strings_.count(e.name) ? strings_[e.name] : "?";
      if (e.lane != 0) r.lane = lanes_.count(e.lane) ? strings_[lanes_[e.lane]] : "?";
      r.e = e;
      c_->events.push_back(std::move(r));
    }
  }
  void OnStats(const std::vector<engine::DropCount>& d) override {
    for (const auto& x : d) c_->dropped += x.dropped;
  }
  void OnSync(const std::vector<engine::SyncPoint>& p) override {
    c_->sync.insert(c_->sync.end(), p.begin(), p.end());
  }
  void OnComms(const std::vector<engine::CommInfo>& p) override {
    c_->comms.insert(c_->comms.end(), p.begin(), p.end());
  }
  void OnAnchors(const std::vector<engine::AnchorPoint>& p) override {
    c_->anchors.insert(c_->anchors.end(), p.begin(), p.end());
  }

 private:
  Collected* c_;
  int32_t rank_;
  uint32_t pid_;
  std::map<uint32_t, std::string> strings_;
  std::map<uint32_t, uint32_t> lanes_;
};

}  // namespace

Collected CollectDir(const std::string& dir) {
  Collected c;
  auto files = engine::ListSegmentFiles(dir);
  if (!files.ok()) {
    ADD_FAILURE() << files.status().ToString();
    return c;
  }
  for (const auto& f : *files) {
    CollectVisitor v(&c, f.rank, f.pid);
    auto scan = engine::ScanSegment(f.path, &v);
    if (!scan.ok()) {
      ADD_FAILURE() << scan.status().ToString();
      continue;
    }
    c.files++;
    c.corrupt_blocks += scan->corrupt_blocks;
    if (scan->torn_tail_bytes) c.torn_tails++;
    if (scan->closed) c.closed_files++;
  }
  return c;
}

pid_t SpawnChild(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                 ChildOutput output, const std::string& path) {
  if (argv.empty()) return -1;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_store(env);
  for (char** e = environ; *e != nullptr; ++e) env_store.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (output == ChildOutput::kBothToFile) {
    posix_spawn_file_actions_addopen(&fa, 1, path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  } else if (output == ChildOutput::kStderrAppended) {
    posix_spawn_file_actions_addopen(&fa, 2, path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  }
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

void RunAndKillAfter(const std::vector<std::string>& args, int64_t delay_us) {
  const pid_t pid = SpawnChild(args, {});
  ASSERT_GT(pid, 0) << args[0] << ": could not be started";
  std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

MeasuredRun RunMeasured(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                        const std::string& log) {
  MeasuredRun r;
  const pid_t pid = SpawnChild(argv, env, ChildOutput::kBothToFile, log);
  if (pid < 0) return r;
  int status = 0;
  struct rusage ru {};
  if (wait4(pid, &status, 0, &ru) != pid) return r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.peak_kb = ru.ru_maxrss;
  return r;
}

}  // namespace tracedb::testing

// record.* meta keys of `tracedb record`. See record_meta.h.
#include "shell/record_meta.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string_view>

#include "engine/util/json_text.h"

extern char** environ;

namespace tracedb::shell {
namespace {

// A word as a POSIX shell reads it back (quoted when it needs to be).
std::string ShellWord(const std::string& w) {
  if (!w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-./=:,+@%") == std::string::npos) {
    return w;
  }
  std::string out = "'";
  for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `git rev-parse HEAD` in the working directory, "-dirty" appended when the tree has changes;
// "" when git is missing or this is no work tree.
std::string GitRevision() {
  auto run = [](const char* cmd) {
    std::string out;
    FILE* p = popen(cmd, "r");
    if (p == nullptr) return out;
    char buf[256];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    if (pclose(p) != 0) return std::string();
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
  };
  std::string rev = run("git rev-parse HEAD 2>/dev/null");
  if (rev.size() != 40) return "";
  const std::string changes = run("git status --porcelain --untracked-files=no 2>/dev/null");
  return changes.empty() ? rev : rev + "-dirty";
}

bool Kept(std::string_view name) {
  static constexpr std::string_view kPrefixes[] = {"NCCL_",      "CUDA_",   "OMP_",   "OMPI_MCA_",
                                                   "UCX_",       "MKL_",    "TORCH_", "PYTORCH_",
                                                   "SLURM_JOB_", "TRACEDB_"};
  bool kept = false;
  for (std::string_view p : kPrefixes) kept = kept || name.substr(0, p.size()) == p;
  if (!kept) return false;
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (std::string_view secret : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL"}) {
    if (upper.find(secret) != std::string::npos) return false;
  }
  return true;
}

}  // namespace

Status WriteRecordMeta(engine::TraceWriter* writer, const std::vector<std::string>& command,
                       double started_at) {
  std::string cmd;
  for (const std::string& a : command) cmd += (cmd.empty() ? "" : " ") + ShellWord(a);
  TRACEDB_RETURN_IF_ERROR(writer->SetMeta("record.command", cmd));
  const std::string rev = GitRevision();
  if (!rev.empty()) TRACEDB_RETURN_IF_ERROR(writer->SetMeta("record.git_rev", rev));
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') {
    TRACEDB_RETURN_IF_ERROR(writer->SetMeta("record.host", host));
  }
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) != nullptr) {
    TRACEDB_RETURN_IF_ERROR(writer->SetMeta("record.cwd", cwd));
  }
  TRACEDB_RETURN_IF_ERROR(
      writer->SetMeta("record.started_at", std::to_string(static_cast<long long>(started_at))));
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos || !Kept(kv.substr(0, eq))) continue;
    vars[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  std::string env = "{";
  for (const auto& [k, v] : vars) {
    env += (env.size() > 1 ? "," : "") + engine::json::String(k) + ":" + engine::json::String(v);
  }
  return writer->SetMeta("record.env", env + "}");
}

}  // namespace tracedb::shell

// OutputFile's temporary file: unique per export, removed on failure, renamed when complete.
#include "query/export/output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "tests/test_util.h"

namespace tracedb::query {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::TempDir;

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(OutputFile, TwoExportsToOnePathUseTheirOwnTemporaryFiles) {
  TempDir tmp;
  const std::string path = tmp.Sub("out.json");
  auto a = OutputFile::Create(path, 0);
  auto b = OutputFile::Create(path, 0);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->temporary_path(), (*b)->temporary_path());
  EXPECT_EQ((*a)->temporary_path().rfind(path + ".partial-", 0), 0u) << (*a)->temporary_path();
  (*a)->Append(std::string("first"));
  (*b)->Append(std::string("second"));
  EXPECT_FALSE(fs::exists(path));  // nothing under the final name before Close()
  ASSERT_TRUE((*a)->Close().ok());
  EXPECT_EQ(ReadFile(path), "first");
  ASSERT_TRUE((*b)->Close().ok());
  EXPECT_EQ(ReadFile(path), "second");  // whole files only: the last rename wins
  EXPECT_EQ(Names(tmp.path()), std::vector<std::string>{"out.json"});
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_NE(st.st_mode & S_IRUSR, 0u);
  EXPECT_NE(st.st_mode & S_IWUSR, 0u);
}

TEST(OutputFile, AnAbandonedExportLeavesNothing) {
  TempDir tmp;
  const std::string path = tmp.Sub("out.json.gz");
  {
    auto f = OutputFile::Create(path, 6);
    ASSERT_TRUE(f.ok());
    (*f)->Append(std::string(10000, 'x'));
    EXPECT_TRUE(fs::exists((*f)->temporary_path()));
  }  // destroyed unclosed: abandoned
  EXPECT_TRUE(Names(tmp.path()).empty());
}

// A target that is not a regular file (a FIFO here; /dev/null, /dev/stdout alike) is written in
// place: a temporary file renamed over it would replace the FIFO or device itself (as root,
// `export -o /dev/null` once turned the machine's /dev/null into a regular file).
TEST(OutputFile, ANonRegularTargetIsWrittenInPlaceNeverReplaced) {
  TempDir tmp;
  const std::string path = tmp.Sub("pipe");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = ReadFile(path); });  // opens the FIFO's other end
  {
    auto f = OutputFile::Create(path, 0);
    ASSERT_TRUE(f.ok()) << f.status().message();
    EXPECT_EQ((*f)->temporary_path(), "");
    (*f)->Append(std::string("through the pipe"));
    ASSERT_TRUE((*f)->Close().ok());
  }
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(Names(tmp.path()), std::vector<std::string>{"pipe"});  // no temporary file left
}

TEST(OutputFile, AnUncreatableOutputIsAClearError) {
  TempDir tmp;
  auto f = OutputFile::Create(tmp.Sub("no/such/dir/out.json"), 0);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("no/such/dir/out.json"), std::string::npos)
      << f.status().ToString();
}

}  // namespace
}  // namespace tracedb::query

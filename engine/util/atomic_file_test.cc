// Output files (atomic_file.h): the content arrives whole under the final name, nothing else is
// left in the directory, failures leave the old file and no temporary one, a device is written
// in place (never replaced), and a database's sidecar files go with it.
#include "engine/util/atomic_file.h"
#include "engine/util/path.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tracedb::engine {
namespace {

namespace fs = std::filesystem;

struct Dir {
  Dir() {
    std::string t = (fs::temp_directory_path() / "atomic-file-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::vector<std::string> Names() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(path)) v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
  }
  std::string path;
};

std::string Read(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(AtomicFile, WritesWholeAndLeavesNoTemporaryFile) {
  Dir d;
  const std::string out = d.path + "/page.html";
  std::string data(300000, 'x');
  data[12345] = '\0';  // bytes, not a C string
  ASSERT_TRUE(WriteFileAtomically(out, data, "test").ok());
  EXPECT_EQ(Read(out), data);
  ASSERT_TRUE(WriteFileAtomically(out, "second", "test").ok());  // replaces
  EXPECT_EQ(Read(out), "second");
  EXPECT_EQ(d.Names(), std::vector<std::string>{"page.html"});
  struct stat st;
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);  // not mkostemp's 0600
}

TEST(AtomicFile, FailuresNameTheFileAndLeaveNothing) {
  Dir d;
  Status s = WriteFileAtomically(d.path + "/no/such/dir/page.html", "x", "test");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no/such/dir/page.html"), std::string::npos) << s.message();
  fs::create_directory(d.path + "/sub");
  s = WriteFileAtomically(d.path + "/sub", "x", "test");
  EXPECT_NE(s.message().find("is a directory"), std::string::npos) << s.message();
  // InstallFile of a temporary file that is gone: an error, the old file untouched.
  ASSERT_TRUE(WriteFileAtomically(d.path + "/keep", "old", "test").ok());
  s = InstallFile(d.path + "/gone.partial", d.path + "/keep");
  EXPECT_NE(s.message().find("gone.partial"), std::string::npos) << s.message();
  EXPECT_EQ(Read(d.path + "/keep"), "old");
  EXPECT_EQ(d.Names(), (std::vector<std::string>{"keep", "sub"}));
}

TEST(AtomicFile, InstallFileMovesACompleteFileIntoPlace) {
  Dir d;
  std::string temp;
  int fd = -1;
  ASSERT_TRUE(CreateTemporaryBeside(d.path + "/db", &temp, &fd).ok());
  EXPECT_EQ(temp.rfind(d.path + "/db.partial-", 0), 0u) << temp;
  ASSERT_EQ(::write(fd, "abc", 3), 3);
  ::close(fd);
  ASSERT_TRUE(InstallFile(temp, d.path + "/db").ok());
  EXPECT_EQ(Read(d.path + "/db"), "abc");
  EXPECT_EQ(d.Names(), std::vector<std::string>{"db"});
}

// A device is written in place: renaming a file over /dev/null would replace it for everyone.
TEST(AtomicFile, DeviceIsWrittenInPlace) {
  ASSERT_TRUE(WriteFileAtomically("/dev/null", "ignored", "test").ok());
  struct stat st;
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(AtomicFile, RemoveDbFilesTakesTheSidecarsAndNothingElse) {
  Dir d;
  for (const char* n : {"a.tdb", "a.tdb-journal", "a.tdb-wal", "a.tdb-shm", "a.tdb2", "b.tdb"}) {
    std::ofstream(d.path + "/" + n) << "x";
  }
  EXPECT_EQ(RemoveDbFiles(d.path + "/a.tdb"), "");
  EXPECT_EQ(d.Names(), (std::vector<std::string>{"a.tdb2", "b.tdb"}));
  EXPECT_EQ(RemoveDbFiles(d.path + "/missing.tdb"), "");  // nothing there: no error, no removal
  // What cannot be removed is named (here a directory where the -wal file would be); the rest goes.
  fs::create_directory(d.path + "/c.tdb-wal");
  std::ofstream(d.path + "/c.tdb") << "x";
  const std::string problems = RemoveDbFiles(d.path + "/c.tdb");
  EXPECT_NE(problems.find("cannot remove " + d.path + "/c.tdb-wal"), std::string::npos) << problems;
  EXPECT_EQ(d.Names(), (std::vector<std::string>{"a.tdb2", "b.tdb", "c.tdb-wal"}));
}

TEST(Path, DirBaseAndExistence) {
  EXPECT_EQ(DirOf("a.tdb"), ".");
  EXPECT_EQ(DirOf("/a.tdb"), "/");  // not "": a catalog beside a manifest in / resolves
  EXPECT_EQ(DirOf("/x/y/a.tdb"), "/x/y");
  EXPECT_EQ(DirOf("x/a.tdb"), "x");
  EXPECT_EQ(BaseOf("/x/y/a.tdb"), "a.tdb");
  EXPECT_EQ(BaseOf("a.tdb"), "a.tdb");
  EXPECT_EQ(BaseOf("x/"), "");
  Dir d;
  const std::string empty = d.path + "/empty", full = d.path + "/full";
  std::ofstream(empty).flush();
  std::ofstream(full) << "abc";
  EXPECT_TRUE(PathExists(empty));
  EXPECT_FALSE(NonEmptyPathExists(empty));  // a writer lock's empty file counts as absent
  EXPECT_TRUE(NonEmptyPathExists(full));
  EXPECT_EQ(PathSize(full), 3);
  EXPECT_EQ(PathSize(empty), 0);
  EXPECT_EQ(PathSize(d.path + "/missing"), -1);
  EXPECT_FALSE(PathExists(d.path + "/missing"));
}

}  // namespace
}  // namespace tracedb::engine

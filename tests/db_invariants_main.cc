// db_invariants DB...: runs the suite's invariant checker (tests/db_invariants.h) on each
// database, for the tests that make their DBs outside C++ (the Python DDP test, shell tests):
// prints every violation and exits 1 when there is one, else prints the rows checked and exits 0.
#include <cstdio>
#include <string>
#include <vector>

#include "query/open/query_db.h"
#include "tests/db_invariants.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DB...\n", argv[0]);
    return 2;
  }
  int rc = 0;
  for (int i = 1; i < argc; ++i) {
    const std::vector<std::string> bad = tracedb::testing::DbInvariantViolations(argv[i]);
    if (bad.empty()) {
      long long n = 0;
      auto db = tracedb::query::OpenQueryDb(argv[i]);
      if (db.ok()) {
        auto c = (*db)->QueryInt("SELECT count(*) FROM events", 0);
        if (c.ok()) n = *c;
      }
      std::printf("%s: every invariant holds over %lld rows\n", argv[i], n);
      continue;
    }
    rc = 1;
    std::printf("%s: %zu violation(s)\n", argv[i], bad.size());
    for (const std::string& b : bad) std::printf("  %s\n", b.c_str());
  }
  return rc;
}

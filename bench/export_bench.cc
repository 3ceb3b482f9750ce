// Chrome export benchmark, in process: where the time of `tracedb export --chrome` goes.
//   decode   read every block and decode the columns the exporter reads (no JSON)
//   export   the whole export (ExportChrome) to OUT
// Each is run REPS times; prints the median seconds and events/s, the JSON size and this
// process's peak RSS. bench/run_export_bench.sh runs it beside the CLI under /usr/bin/time.
// Usage: export_bench JOB.tdb OUT.json [REPS]
// Thread safety: a single-threaded program (the export itself uses one writer thread).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/db/db_schema.h"
#include "engine/db/event_block.h"
#include "query/export/chrome_exporter.h"

namespace {

double Now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Die(const tracedb::Status& s) {
  std::fprintf(stderr, "export_bench: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s JOB.tdb OUT.json [REPS]\n", argv[0]);
    return 2;
  }
  const int reps = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
  auto db = tracedb::engine::OpenTraceDb(argv[1], false, true);
  if (!db.ok()) return Die(db.status());

  // Decode only: the same columns the exporter asks for.
  std::vector<double> decode;
  uint64_t events = 0;
  for (int r = 0; r < reps; ++r) {
    const double t0 = Now();
    auto st = (*db)->Prepare("SELECT block, data FROM blocks ORDER BY rank, min_ts, block");
    if (!st.ok()) return Die(st.status());
    tracedb::engine::DecodedBlock b;
    events = 0;
    for (;;) {
      auto row = st->Step();
      if (!row.ok()) return Die(row.status());
      if (!*row) break;
      const uint32_t want = tracedb::engine::kColKind | tracedb::engine::kColName |
                            tracedb::engine::kColCat | tracedb::engine::kColTs |
                            tracedb::engine::kColArgs | tracedb::engine::kColValue;
      tracedb::Status s = tracedb::engine::DecodeBlock(st->Blob(1), st->Int(0), &b, want);
      if (!s.ok()) return Die(s);
      events += b.n;
    }
    decode.push_back(Now() - t0);
  }

  std::vector<double> exp;
  tracedb::query::ChromeExportStats stats;
  for (int r = 0; r < reps; ++r) {
    std::remove(argv[2]);
    tracedb::query::ChromeExportOptions o;
    o.output = argv[2];
    const double t0 = Now();
    tracedb::Status s = tracedb::query::ExportChrome(db->get(), o, &stats);
    if (!s.ok()) return Die(s);
    exp.push_back(Now() - t0);
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const double d = Median(decode), e = Median(exp);
  std::printf("events %llu\n", static_cast<unsigned long long>(events));
  std::printf("decode_s %.3f\ndecode_events_per_s %.0f\n", d, events / d);
  std::printf("export_s %.3f\nexport_events_per_s %.0f\n", e, stats.events_written / e);
  std::printf("json_bytes %llu\nbytes_per_event %.1f\n",
              static_cast<unsigned long long>(stats.json_bytes),
              double(stats.json_bytes) / double(std::max<uint64_t>(1, stats.events_written)));
  std::printf("peak_rss_kb %ld\n", ru.ru_maxrss);
  return 0;
}

// The built-in views the views benchmark times (bench/views_bench.cc, and the DuckDB peer
// bench/views_duckdb.mjs reads the same list from `views_bench list`). Row-level views, whose
// result has about as many rows as the events they select, are timed as count(*) over the view
// (a client would not read millions of rows into memory); the aggregates as their full result.
#pragma once

#include <string>

inline constexpr const char* kReportMpi = "report_mpi";

struct ViewQuery {
  const char* view;
  bool count_only;
};

inline constexpr ViewQuery kViewQueries[] = {
    {"spans", true},
    {"span_stats", false},
    {"name_stats_all", false},
    {"name_summary", false},
    {"rank_time_split", false},
    {"step_times", true},
    {"step_summary", false},
    {"collective_calls", true},
    {"collective_arrivals", true},
    {"collectives", true},
    {"stragglers", false},
    {"collective_wait", false},
    {"p2p_sends", true},
    {"p2p_receives", true},
    {"p2p_messages", true},
    {"negotiation_ticks", true},
    {"negotiations", true},
    {"clock_alignment", false},
    {"view_notes", false},
    {"nccl_ops", true},
    {"nccl_collectives", false},
    {"gpu_kernels", false},
    {"gpu_step_time", false},
    // Not a view: what `tracedb report mpi` computes (BuildMpiReport, query/report/mpi_report.h:
    // its aggregates of the MPI events by rank and routine, message size bins, elapsed times),
    // timed against the same aggregates in DuckDB; rows = the report's (rank, routine) rows.
    {kReportMpi, false},
};

inline std::string ViewSql(const ViewQuery& v) {
  return std::string(v.count_only ? "SELECT count(*) FROM " : "SELECT * FROM ") + v.view;
}

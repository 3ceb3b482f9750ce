// The "why" overlay of `tracedb view` (why_overlay.h): the analyses' critical path and wait
// states kept sorted by time, answered per window as JSON.
#include "view/why_overlay.h"

#include <algorithm>

#include "engine/util/coding.h"
#include "engine/util/json_text.h"
#include "query/analysis/why.h"
#include "query/analysis/why_summary.h"

namespace tracedb::view {
namespace {

namespace wa = ::tracedb::query::analysis;

// An event id as JSON: a number when a double holds it exactly, else a string (as /api/flows).
void AppendId(std::string* s, int64_t v) {
  const bool exact = v <= (int64_t{1} << 53) && v >= -(int64_t{1} << 53);
  if (!exact) s->push_back('"');
  s->append(std::to_string(v));
  if (!exact) s->push_back('"');
}

// The first element of `v` (sorted by ts) that may overlap [lo, …): everything before starts
// more than `longest` before lo and so ends before it.
template <typename T>
typename std::vector<T>::const_iterator FirstFrom(const std::vector<T>& v, int64_t lo,
                                                  int64_t longest) {
  return std::lower_bound(v.begin(), v.end(), engine::SaturatingAdd(lo, -longest),
                          [](const T& x, int64_t ts) { return x.ts < ts; });
}

}  // namespace

Status WhyOverlay::Build(engine::Db* db, int64_t max_events) {
  TRACEDB_ASSIGN_OR_RETURN(int64_t events,
                           db->QueryInt("SELECT coalesce(sum(count), 0) FROM main.blocks"));
  if (events > max_events) {
    return Status::NotSupported(
        "the job has " + std::to_string(events) + " events, more than " +
        std::to_string(max_events) +
        ": the analyses would hold about 90 bytes per event; run tracedb explain (--steps A:B)");
  }
  TRACEDB_ASSIGN_OR_RETURN(wa::Analysis a, wa::Analyze(db));
  names_ = a.names;
  pieces_.clear();
  waits_.clear();
  longest_piece_ = longest_wait_ = 0;
  for (const wa::PathPiece& p : a.path) {
    if (p.dur <= 0) continue;
    Piece x;
    x.ts = p.ts;
    x.dur = p.dur;
    x.rank = p.rank;
    x.step = p.step;
    x.order = p.order;
    x.has_step = p.has_step;
    x.name = p.name;
    pieces_.push_back(x);
    longest_piece_ = std::max(longest_piece_, p.dur);
  }
  for (const wa::WaitState& w : a.waits) {
    Wait x;
    x.ts = w.ts;
    x.dur = w.wait_ns;
    x.rank = w.rank;
    x.id = w.id;
    x.waited_for = w.waited_for;
    x.late_id = w.late_id;
    x.step = w.step;
    x.has_step = w.has_step;
    x.pattern = static_cast<uint8_t>(w.pattern);
    x.call = w.call;
    waits_.push_back(x);
    longest_wait_ = std::max(longest_wait_, w.wait_ns);
  }
  std::stable_sort(pieces_.begin(), pieces_.end(),
                   [](const Piece& x, const Piece& y) { return x.ts < y.ts; });
  std::stable_sort(waits_.begin(), waits_.end(),
                   [](const Wait& x, const Wait& y) { return x.ts < y.ts; });
  summary_json_ = wa::WhySummaryJson(a, wa::Summarize(a, wa::StepRange{}, 10));
  return Status::Ok();
}

std::string WhyOverlay::WindowJson(int64_t lo, int64_t hi, int64_t origin, size_t max_rows) const {
  namespace json = engine::json;
  auto name = [this](int32_t n) -> const std::string& {
    static const std::string unknown = "?";
    return n < 0 || static_cast<size_t>(n) >= names_.size() ? unknown
                                                            : names_[static_cast<size_t>(n)];
  };
  bool truncated = false;
  std::string out =
      "{\"pieces\":{\"columns\":[\"rank\",\"ts\",\"dur\",\"name\",\"step\",\"order\"],\"rows\":[";
  size_t n = 0;
  for (auto it = FirstFrom(pieces_, lo, longest_piece_); it != pieces_.end() && it->ts < hi; ++it) {
    if (it->ts + it->dur <= lo) continue;
    if (n == max_rows) {
      truncated = true;
      break;
    }
    out += n++ ? ",[" : "[";
    out += std::to_string(it->rank) + "," + std::to_string(it->ts - origin) + "," +
           std::to_string(it->dur) + ",";
    json::AppendString(&out, name(it->name));
    out += "," + (it->has_step ? std::to_string(it->step) : std::string("null")) + "," +
           std::to_string(it->order) + "]";
  }
  out +=
      "]},\"waits\":{\"columns\":[\"rank\",\"ts\",\"dur\",\"pattern\",\"waited_for\",\"id\","
      "\"late_id\",\"call\",\"step\"],\"rows\":[";
  n = 0;
  for (auto it = FirstFrom(waits_, lo, longest_wait_); it != waits_.end() && it->ts < hi; ++it) {
    if (it->ts + it->dur <= lo) continue;
    if (n == max_rows) {
      truncated = true;
      break;
    }
    out += n++ ? ",[" : "[";
    out += std::to_string(it->rank) + "," + std::to_string(it->ts - origin) + "," +
           std::to_string(it->dur) + ",\"" +
           wa::PatternName(static_cast<wa::Pattern>(it->pattern)) + "\"," +
           std::to_string(it->waited_for) + ",";
    AppendId(&out, it->id);
    out += ",";
    AppendId(&out, it->late_id);
    out += ",";
    json::AppendString(&out, name(it->call));
    out += "," + (it->has_step ? std::to_string(it->step) : std::string("null")) + "]";
  }
  out += "]},\"truncated\":" + std::string(truncated ? "true" : "false") +
         ",\"job_pieces\":" + std::to_string(pieces_.size()) +
         ",\"job_waits\":" + std::to_string(waits_.size()) + ",\"summary\":" + summary_json_ + "}";
  return out;
}

}  // namespace tracedb::view

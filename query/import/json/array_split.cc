// SplitElements implementation. See array_split.h.
#include "query/import/json/array_split.h"

#include <algorithm>
#include <thread>

#include "query/import/json/json_scan.h"

namespace tracedb::query::json {
namespace {

// A walk notes an element start at least this far after the previous note, so that a redone
// walk can tell where it joins the first one (see Walk::marks).
constexpr size_t kMarkEvery = 64 << 10;

struct Walk {
  enum class Stop : uint8_t { kLanded, kClosed, kBadOrCut, kEnd };
  size_t pos = 0;  // the landing element start, the ']', the bad/cut element, or the size
  Stop stop = Stop::kEnd;
  std::vector<size_t> marks;  // some element starts it passed, ascending
};

size_t SkipSeparators(std::string_view s, size_t p) {
  while (p < s.size() && (IsJsonSpace(s[p]) || s[p] == ',')) ++p;
  return p;
}

// Walks whole elements from `from` (a position before an element or its separators) until the
// first element start at or after `stop`. With `join` (the marks of an earlier walk of the same
// part), stops early at an element start the earlier walk also passed: from there on both agree,
// and *joined is set to it.
Walk WalkElements(std::string_view s, size_t from, size_t stop, const std::vector<size_t>* join,
                  size_t* joined) {
  Walk w;
  const char* const base = s.data();
  const char* const end = base + s.size();
  size_t p = from;
  size_t next_mark = from + kMarkEvery;
  for (;;) {
    p = SkipSeparators(s, p);
    w.pos = p;
    if (p >= s.size()) {
      w.stop = Walk::Stop::kEnd;
      return w;
    }
    if (p >= stop) {
      w.stop = Walk::Stop::kLanded;
      return w;
    }
    if (s[p] == ']') {
      w.stop = Walk::Stop::kClosed;
      return w;
    }
    if (s[p] != '{') {  // not a record: the serial reader reports and resyncs from here
      w.stop = Walk::Stop::kBadOrCut;
      return w;
    }
    if (join != nullptr && std::binary_search(join->begin(), join->end(), p)) {
      *joined = p;
      w.stop = Walk::Stop::kLanded;
      return w;
    }
    if (join == nullptr && p >= next_mark) {
      w.marks.push_back(p);
      next_mark = p + kMarkEvery;
    }
    const char* after = nullptr;
    if (SkipValue(base + p, end, &after) != Scan::kOk) {
      w.stop = Walk::Stop::kBadOrCut;
      return w;
    }
    p = static_cast<size_t>(after - base);
  }
}

}  // namespace

size_t GuessElementStart(std::string_view s, size_t from) {
  for (size_t i = from; i < s.size(); ++i) {
    if (s[i] != '{') continue;
    size_t j = i;
    while (j > 0 && (s[j - 1] == ' ' || s[j - 1] == '\t')) --j;
    if (j == 0) return i;  // the first byte after '['
    const char c = s[j - 1];
    if (c == ',' || c == '[' || c == '}' || c == '\n' || c == '\r') return i;
  }
  return s.size();
}

ElementCuts SplitElements(std::string_view s, size_t parts) {
  parts = std::max<size_t>(parts, 1);
  // Guessed starts; guess[0] is 0 (a real start) and guess[parts] the end of the bytes.
  std::vector<size_t> guess(parts + 1, s.size());
  guess[0] = 0;
  std::vector<Walk> walks(parts);
  auto run = [&](size_t i) {
    // Part i's own guess and the next part's (where this walk stops) are found by this thread.
    const size_t start = i == 0 ? 0 : GuessElementStart(s, s.size() / parts * i);
    const size_t stop = i + 1 < parts ? GuessElementStart(s, s.size() / parts * (i + 1)) : s.size();
    guess[i] = start;
    walks[i] = WalkElements(s, start, stop, nullptr, nullptr);
  };
  {
    std::vector<std::thread> threads;
    threads.reserve(parts - 1);
    for (size_t i = 1; i < parts; ++i) threads.emplace_back(run, i);
    run(0);
    for (std::thread& t : threads) t.join();
  }

  // Validate in order: `real` is where part i really starts.
  ElementCuts cuts;
  size_t real = SkipSeparators(s, 0);
  for (size_t i = 0; i < parts; ++i) {
    const size_t stop = i + 1 < parts ? guess[i + 1] : s.size();
    Walk w;
    if (real == guess[i] || (i == 0)) {
      w = std::move(walks[i]);
    } else {
      // The guess was wrong (inside a value, or behind an earlier landing): walk from the real
      // start until this walk meets the guessed walk on a common element start (from there the
      // guessed walk is right), or to the stop.
      ++cuts.rewalks;
      size_t joined = s.size();
      w = WalkElements(s, real, stop, &walks[i].marks, &joined);
      if (joined < s.size()) w = std::move(walks[i]);
    }
    if (w.pos > real && (cuts.starts.empty() || cuts.starts.back() != real)) {
      cuts.starts.push_back(real);
    }
    if (w.stop != Walk::Stop::kLanded) {
      cuts.end = w.pos;
      cuts.closed = w.stop == Walk::Stop::kClosed;
      if (cuts.starts.empty()) cuts.starts.push_back(w.pos);
      return cuts;
    }
    real = w.pos;
  }
  // Unreachable: the last part's stop is the size, where a walk ends with kEnd.
  cuts.end = real;
  if (cuts.starts.empty()) cuts.starts.push_back(real);
  return cuts;
}

}  // namespace tracedb::query::json

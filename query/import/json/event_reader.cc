// EventReader implementation. See event_reader.h.
#include "query/import/json/event_reader.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "engine/util/parse_number.h"
#include "query/import/json/array_split.h"
#include "query/import/json/json_scan.h"

namespace tracedb::query::json {
namespace {

// Scratch slots for decoded strings of one event.
enum Slot { kName, kCat, kPid, kTid, kId, kBindId, kPh, kScope, kBp, kKey, kNumSlots };

// Parses one event object in [begin, end); begin points at its '{'. On kOk sets *after past the
// closing '}'; on kBad sets *err_at and *reason.
class RecordParser {
 public:
  RecordParser(const char* end, std::string* scratch) : end_(end), scratch_(scratch) {}

  Scan Parse(const char* begin, TraceEvent* ev, const char** after) {
    const char* p = SkipSpace(begin + 1, end_);
    if (p >= end_) return Scan::kNeedMore;
    if (*p == '}') {
      *after = p + 1;
      return Scan::kOk;
    }
    for (;;) {
      if (*p != '"') return Bad(p, "expected a member name");
      const char* close;
      bool escaped;
      Scan s = FindStringEnd(p + 1, end_, &close, &escaped);
      if (s != Scan::kOk) return s;
      std::string_view key(p + 1, static_cast<size_t>(close - p - 1));
      if (escaped) {
        DecodeString(key, &scratch_[kKey]);
        key = scratch_[kKey];
      }
      p = SkipSpace(close + 1, end_);
      if (p >= end_) return Scan::kNeedMore;
      if (*p != ':') return Bad(p, "expected ':' after a member name");
      p = SkipSpace(p + 1, end_);
      if (p >= end_) return Scan::kNeedMore;
      s = Member(key, p, ev, &p);
      if (s != Scan::kOk) return s;
      p = SkipSpace(p, end_);
      if (p >= end_) return Scan::kNeedMore;
      if (*p == ',') {
        p = SkipSpace(p + 1, end_);
        if (p >= end_) return Scan::kNeedMore;
        if (*p != '}') continue;  // else a trailing comma
      }
      if (*p == '}') {
        *after = p + 1;
        return Scan::kOk;
      }
      return Bad(p, "expected ',' or '}' after a member");
    }
  }

  const char* err_at() const { return err_at_; }
  const char* reason() const { return reason_; }

 private:
  Scan Bad(const char* at, const char* reason) {
    err_at_ = at;
    reason_ = reason;
    return Scan::kBad;
  }

  // The value of member `key` at p; *next is set past it.
  Scan Member(std::string_view key, const char* p, TraceEvent* ev, const char** next) {
    switch (key.size()) {
      case 1:
        if (key[0] == 's') return Text(p, kScope, &ev->scope, nullptr, next);
        break;
      case 2:
        if (key == "ph") return Text(p, kPh, &ev->ph, nullptr, next);
        if (key == "ts") return Nanos(p, &ev->ts, &ev->has_ts, next, "bad \"ts\"");
        if (key == "id") return Id(p, kId, &ev->id, next);
        if (key == "bp") return Text(p, kBp, &ev->bp, nullptr, next);
        break;
      case 3:
        if (key == "pid") return Id(p, kPid, &ev->pid, next);
        if (key == "tid") return Id(p, kTid, &ev->tid, next);
        if (key == "cat") return Text(p, kCat, &ev->cat, nullptr, next);
        if (key == "dur") return Nanos(p, &ev->dur, &ev->has_dur, next, "bad \"dur\"");
        if (key == "id2") {
          const Scan s = SkipValue(p, end_, next);
          if (s == Scan::kBad) return Bad(p, "bad \"id2\"");
          if (s == Scan::kOk) {
            ev->id.type = JsonId::Type::kString;
            ev->id.text = std::string_view(p, static_cast<size_t>(*next - p));
          }
          return s;
        }
        break;
      case 4:
        if (key == "name") return Text(p, kName, &ev->name, &ev->has_name, next);
        if (key == "args") {
          const Scan s = SkipValue(p, end_, next);
          if (s == Scan::kBad) return Bad(p, "bad \"args\" value");
          if (s == Scan::kOk) ev->args = std::string_view(p, static_cast<size_t>(*next - p));
          return s;
        }
        break;
      case 7:
        if (key == "bind_id") return Id(p, kBindId, &ev->bind_id, next);
        break;
      default:
        break;
    }
    const Scan s = SkipValue(p, end_, next);
    if (s == Scan::kBad) return Bad(p, "bad value");
    return s;
  }

  // A string member (other values are taken as their raw text; null as absent).
  Scan Text(const char* p, Slot slot, std::string_view* out, bool* present, const char** next) {
    if (*p == '"') {
      const char* close;
      bool escaped;
      const Scan s = FindStringEnd(p + 1, end_, &close, &escaped);
      if (s != Scan::kOk) return s;
      *out = std::string_view(p + 1, static_cast<size_t>(close - p - 1));
      if (escaped) {
        DecodeString(*out, &scratch_[slot]);
        *out = scratch_[slot];
      }
      if (present) *present = true;
      *next = close + 1;
      return Scan::kOk;
    }
    const Scan s = SkipValue(p, end_, next);
    if (s == Scan::kBad) return Bad(p, "bad value");
    if (s != Scan::kOk) return s;
    const std::string_view raw(p, static_cast<size_t>(*next - p));
    if (raw != "null") {
      *out = raw;
      if (present) *present = true;
    }
    return Scan::kOk;
  }

  // A number of microseconds (or a string holding one) as ns.
  Scan Nanos(const char* p, int64_t* out, bool* present, const char** next, const char* what) {
    std::string_view text;
    if (*p == '"') {
      const char* close;
      bool escaped;
      const Scan s = FindStringEnd(p + 1, end_, &close, &escaped);
      if (s != Scan::kOk) return s;
      text = std::string_view(p + 1, static_cast<size_t>(close - p - 1));
      *next = close + 1;
    } else {
      const char* q = p;
      while (q < end_ && ((*q >= '0' && *q <= '9') || *q == '-' || *q == '+' || *q == '.' ||
                          *q == 'e' || *q == 'E' || (*q >= 'a' && *q <= 'z'))) {
        ++q;
      }
      if (q >= end_) return Scan::kNeedMore;
      text = std::string_view(p, static_cast<size_t>(q - p));
      *next = q;
      if (text == "null") return Scan::kOk;
    }
    if (!ParseMicrosToNanos(text, out)) return Bad(p, what);
    *present = true;
    return Scan::kOk;
  }

  // An integer or a string (pid, tid, id).
  Scan Id(const char* p, Slot slot, JsonId* out, const char** next) {
    *out = JsonId();
    if (*p == '"') {
      const char* close;
      bool escaped;
      const Scan s = FindStringEnd(p + 1, end_, &close, &escaped);
      if (s != Scan::kOk) return s;
      out->type = JsonId::Type::kString;
      out->text = std::string_view(p + 1, static_cast<size_t>(close - p - 1));
      if (escaped) {
        DecodeString(out->text, &scratch_[slot]);
        out->text = scratch_[slot];
      }
      *next = close + 1;
      return Scan::kOk;
    }
    // Fast path: a plain non-negative integer of up to 18 digits (what pids and tids are).
    const char* q = p;
    int64_t v = 0;
    while (q < end_ && q - p < 18 && static_cast<unsigned>(*q - '0') < 10)
      v = v * 10 + (*q++ - '0');
    if (q > p && q < end_ && (*q == ',' || *q == '}' || IsJsonSpace(*q))) {
      out->type = JsonId::Type::kInt;
      out->num = v;
      out->text = std::string_view(p, static_cast<size_t>(q - p));
      *next = q;
      return Scan::kOk;
    }
    const Scan s = SkipValue(p, end_, next);
    if (s == Scan::kBad) return Bad(p, "bad value");
    if (s != Scan::kOk) return s;
    const std::string_view raw(p, static_cast<size_t>(*next - p));
    if (raw == "null") return Scan::kOk;
    out->text = raw;
    out->type = ParseInt64(raw, &out->num) ? JsonId::Type::kInt : JsonId::Type::kString;
    return Scan::kOk;
  }

  const char* end_;
  std::string* scratch_;
  const char* err_at_ = nullptr;
  const char* reason_ = "";
};

}  // namespace

StatusOr<std::unique_ptr<EventReader>> EventReader::Open(const std::string& path, Options options) {
  TRACEDB_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> src, ByteSource::Open(path));
  return std::make_unique<EventReader>(std::move(src), options);
}

EventReader::EventReader(std::unique_ptr<ByteSource> source, Options options)
    : source_(std::move(source)), options_(options) {
  static_assert(kNumSlots == kScratchSlots, "one scratch string per decoded field");
  options_.chunk_bytes = std::max<size_t>(options_.chunk_bytes, 16);
  options_.max_record_bytes = std::max<size_t>(options_.max_record_bytes, 16);
  if (options_.threads == 0) {
    // TRACEDB_IMPORT_THREADS=N overrides the default (benchmarks compare N=1 with the rest).
    const char* env = std::getenv("TRACEDB_IMPORT_THREADS");
    int64_t n = 0;  // unset or not a whole number: the default
    if (env == nullptr || !engine::ParseInt64(env, &n)) n = 0;
    // The importers already keep one more core busy (BuilderPipe's writer thread): parsing takes
    // the others, and stays on one thread on 2 cores, where it measured slower in parallel
    // (docs/bench-import.md).
    const unsigned cores = std::thread::hardware_concurrency();
    options_.threads = n > 0 ? static_cast<size_t>(n) : (cores > 2 ? cores - 1 : 1);
  }
  cap_ = options_.chunk_bytes * 2;
  if (options_.threads > 1) {
    options_.parallel_window_bytes = std::max<size_t>(options_.parallel_window_bytes, 16);
    cap_ = std::max(cap_, options_.parallel_window_bytes + options_.chunk_bytes);
  }
  // A plain file smaller than that gets a buffer of its size, and one byte for the read that
  // finds its end (Fill grows it if the file grows meanwhile): most imported files are small,
  // and under ASan every large buffer is a fresh mapping whose shadow is poisoned and cleared.
  if (source_->size_known() && !source_->compressed() && source_->file_size() < cap_) {
    cap_ = std::max<size_t>(source_->file_size() + 1, 4096);
  }
  // Not zeroed: only [0, end_) is ever read. Zeroing the 2 MB cost more than reading a small
  // file (every page touched, and under ASan a fresh mapping per reader).
  buf_ = std::make_unique_for_overwrite<char[]>(cap_);
}

void EventReader::ParseAhead() {
  ready_.clear();
  ready_next_ = 0;
  // Part k starts at a guessed record start and parses records up to the first one at or after
  // part k+1's guess. Part 0 starts at a real record; part k's start is real when part k-1's
  // (real) parse landed exactly on it, which is checked below: a wrong guess (one inside a
  // string or a nested object) ends the parallel reading of this window there.
  const std::string_view window(buf_.get() + pos_, end_ - pos_);
  const size_t parts = options_.threads;
  std::vector<size_t> guess(parts + 1, window.size());
  guess[0] = 0;
  for (size_t k = 1; k < parts; ++k) {
    guess[k] = GuessElementStart(window, std::max(guess[k - 1] + 1, window.size() / parts * k));
  }
  struct Part {
    std::vector<std::pair<TraceEvent, size_t>> events;
    size_t landed = 0;  // window offset where the parse stopped
  };
  std::vector<Part> got(parts);
  arena_.assign(parts, {});
  const uint64_t base = base_;
  auto parse = [&](size_t k) {
    const char* const buf = buf_.get();
    const char* const wend = window.data() + window.size();
    const char* const stop = window.data() + guess[k + 1];
    const char* p = window.data() + guess[k];
    std::string scratch[kScratchSlots];
    RecordParser parser(wend, scratch);
    std::deque<std::string>& arena = arena_[k];
    Part& part = got[k];
    auto own = [&](std::string_view* v) {
      if (v->empty() || (v->data() >= window.data() && v->data() < wend)) return;
      arena.emplace_back(*v);
      *v = arena.back();
    };
    for (;;) {
      while (p < stop && (IsJsonSpace(*p) || *p == ',')) ++p;
      part.landed = static_cast<size_t>(p - window.data());
      // Anything but a whole, well-formed record of at most max_record_bytes (']', a bad or cut
      // record) ends the part; the serial reader goes on from there.
      if (p >= stop || *p != '{') return;
      TraceEvent ev;
      const char* after = nullptr;
      if (parser.Parse(p, &ev, &after) != Scan::kOk ||
          static_cast<size_t>(after - p) > options_.max_record_bytes) {
        return;
      }
      for (std::string_view* v : {&ev.ph, &ev.name, &ev.cat, &ev.scope, &ev.bp, &ev.pid.text,
                                  &ev.tid.text, &ev.id.text, &ev.bind_id.text}) {
        own(v);
      }
      ev.offset = base + static_cast<uint64_t>(p - buf);
      ev.size = static_cast<uint64_t>(after - p);
      part.events.emplace_back(ev, static_cast<size_t>(after - buf));
      p = after;
    }
  };
  {
    std::vector<std::thread> threads;
    for (size_t k = 1; k < parts; ++k) {
      if (guess[k] < guess[k + 1]) threads.emplace_back(parse, k);
    }
    parse(0);
    for (std::thread& t : threads) t.join();
  }
  // Part 0 is real; part k follows only when part k-1 stopped at its stop, exactly on part k's
  // guess (its parse did not end early at a ']', a bad record or a record over the guess).
  ready_ = std::move(got[0].events);
  for (size_t k = 1; k < parts; ++k) {
    if (got[k - 1].landed != guess[k] || guess[k] >= guess[k + 1]) break;
    ready_.insert(ready_.end(), got[k].events.begin(), got[k].events.end());
  }
}

std::optional<std::string_view> EventReader::Member(std::string_view key) const {
  for (const auto& [k, v] : members_) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

StatusOr<bool> EventReader::Fill(size_t keep_from) {
  if (eof_) return false;
  if (keep_from > 0) {
    std::memmove(buf_.get(), buf_.get() + keep_from, end_ - keep_from);
    base_ += keep_from;
    end_ -= keep_from;
    pos_ -= std::min(pos_, keep_from);
  }
  // A buffer that already holds the rest of a plain file of known size needs no more room: the
  // read below finds its end (or what the file grew by, and the next call grows it).
  const bool rest_held = cap_ > end_ && source_->size_known() && !source_->compressed() &&
                         base_ + end_ >= source_->file_size();
  if (cap_ - end_ < std::min(options_.chunk_bytes, cap_) / 2 && !rest_held) {
    // The kept bytes (a long record) fill the buffer: grow it, up to the record limit. (A
    // buffer sized to a small file doubles.)
    const size_t want = std::max(cap_ * 2, end_ + std::min(options_.chunk_bytes, cap_));
    auto bigger = std::make_unique_for_overwrite<char[]>(want);
    std::memcpy(bigger.get(), buf_.get(), end_);
    buf_ = std::move(bigger);
    cap_ = want;
  }
  TRACEDB_ASSIGN_OR_RETURN(size_t got, source_->Read(buf_.get() + end_, cap_ - end_));
  if (got == 0) {
    eof_ = true;
    return false;
  }
  end_ += got;
  return true;
}

void EventReader::Report(uint64_t at, std::string_view reason) {
  if (errors_.size() >= options_.max_reported_errors) return;
  errors_.push_back(source_->name() + ": byte offset " + std::to_string(at) + ": " +
                    std::string(reason));
}

Status EventReader::SkipBad(uint64_t at, std::string_view reason) {
  ++skipped_;
  Report(at, reason);
  // Resume at the next '{' that follows ',', '[', '}' or a line break (spaces and tabs between
  // them allowed): the start of a record at the event-array level.
  size_t i = std::max<size_t>(pos_ + 1, static_cast<size_t>(at - base_) + 1);
  char prev = '\0';  // the last significant byte before buf_[i], when it is no longer kept
  for (;;) {
    for (; i < end_; ++i) {
      if (buf_[i] != '{') continue;
      size_t j = i;
      char before = prev;
      while (j > pos_) {
        const char c = buf_[j - 1];
        if (c != ' ' && c != '\t') {
          before = c;
          break;
        }
        --j;
      }
      if (before == ',' || before == '[' || before == '}' || before == '\n' || before == '\r') {
        pos_ = i;
        return Status::Ok();
      }
    }
    // Nothing here: remember the last significant byte and read on.
    for (size_t j = end_; j > pos_; --j) {
      const char c = buf_[j - 1];
      if (c != ' ' && c != '\t') {
        prev = c;
        break;
      }
    }
    pos_ = end_;
    TRACEDB_ASSIGN_OR_RETURN(bool more, Fill(pos_));
    if (!more) {
      state_ = State::kDone;
      return Status::Ok();
    }
    i = pos_;
  }
}

Status EventReader::ReadMembers() {
  for (;;) {
    while (pos_ < end_ && (IsJsonSpace(buf_[pos_]) || buf_[pos_] == ',')) ++pos_;
    if (pos_ == end_) {
      TRACEDB_ASSIGN_OR_RETURN(bool more, Fill(pos_));
      if (!more) {
        state_ = State::kDone;
        return Status::Ok();
      }
      continue;
    }
    const char* begin = buf_.get() + pos_;
    const char* end = buf_.get() + end_;
    if (*begin == '}') {
      ++pos_;
      state_ = State::kDone;
      return Status::Ok();
    }
    Scan s = Scan::kBad;
    const char* p = begin;
    const char* value = nullptr;
    const char* after = nullptr;
    std::string key;
    if (*p == '"') {
      const char* close;
      bool escaped;
      s = FindStringEnd(p + 1, end, &close, &escaped);
      if (s == Scan::kOk) {
        key.assign(p + 1, static_cast<size_t>(close - p - 1));
        if (escaped) DecodeString(std::string(key), &key);
        p = SkipSpace(close + 1, end);
        if (p >= end) {
          s = Scan::kNeedMore;
        } else if (*p != ':') {
          s = Scan::kBad;
        } else {
          value = SkipSpace(p + 1, end);
          if (value >= end) {
            s = Scan::kNeedMore;
          } else if (key == "traceEvents" && *value == '[') {
            pos_ = static_cast<size_t>(value + 1 - buf_.get());
            state_ = State::kEvents;
            return Status::Ok();
          } else {
            s = SkipValue(value, end, &after);
          }
        }
      }
    }
    const uint64_t at = base_ + pos_;
    if (s == Scan::kOk) {
      members_.emplace_back(std::move(key), std::string(value, static_cast<size_t>(after - value)));
      pos_ = static_cast<size_t>(after - buf_.get());
      continue;
    }
    if (s == Scan::kNeedMore) {
      if (end_ - pos_ > options_.max_record_bytes) {
        s = Scan::kBad;
      } else {
        TRACEDB_ASSIGN_OR_RETURN(bool more, Fill(pos_));
        if (more) continue;
        truncated_bytes_ += end_ - pos_;  // a member cut by the end of the file
        pos_ = end_;
        state_ = State::kDone;
        return Status::Ok();
      }
    }
    // A malformed top-level member. Before any event this is not a trace at all.
    if (skipped_ == 0 && members_.empty() && !saw_events_) {
      return Status::Corruption(source_->name() + ": byte offset " + std::to_string(at) +
                                ": not a JSON trace (malformed top-level member)");
    }
    Report(at, "malformed top-level member; the rest of the file is ignored");
    state_ = State::kDone;
    return Status::Ok();
  }
}

StatusOr<bool> EventReader::Next(TraceEvent* ev) {
  for (;;) {
    switch (state_) {
      case State::kDone:
        return false;
      case State::kStart: {
        // Skip a UTF-8 byte-order mark and space.
        for (;;) {
          if (end_ - pos_ < 3 && !eof_) {
            TRACEDB_ASSIGN_OR_RETURN(bool more, Fill(pos_));
            if (more) continue;
          }
          if (end_ - pos_ >= 3 && std::memcmp(buf_.get() + pos_, "\xef\xbb\xbf", 3) == 0) {
            pos_ += 3;
            continue;
          }
          while (pos_ < end_ && IsJsonSpace(buf_[pos_])) ++pos_;
          if (pos_ < end_ || eof_) break;
          TRACEDB_ASSIGN_OR_RETURN(bool more, Fill(pos_));
          (void)more;
        }
        if (pos_ == end_) {  // empty (e.g. a Horovod timeline that recorded nothing)
          state_ = State::kDone;
          return false;
        }
        const char c = buf_[pos_];
        if (c == '[') {
          form_ = Form::kArray;
          state_ = State::kEvents;
        } else if (c == '{') {
          form_ = Form::kObject;
          state_ = State::kMembers;
        } else {
          return Status::Corruption(source_->name() + ": byte offset " +
                                    std::to_string(base_ + pos_) +
                                    ": not a JSON trace (expected '[' or '{')");
        }
        ++pos_;
        break;
      }
      case State::kMembers:
        TRACEDB_RETURN_IF_ERROR(ReadMembers());
        break;
      case State::kEvents: {
        while (pos_ < end_ && (IsJsonSpace(buf_[pos_]) || buf_[pos_] == ',')) ++pos_;
        if (pos_ == end_) {
          TRACEDB_ASSIGN_OR_RETURN(bool more, Fill(pos_));
          if (!more) {  // the array was never closed
            state_ = State::kDone;
            return false;
          }
          continue;
        }
        const char c = buf_[pos_];
        if (c == ']') {
          ++pos_;
          state_ = form_ == Form::kObject ? State::kMembers : State::kDone;
          break;
        }
        if (c != '{') {
          TRACEDB_RETURN_IF_ERROR(SkipBad(base_ + pos_, "expected an event object"));
          break;
        }
        if (ready_next_ < ready_.size()) {  // parsed ahead
          *ev = ready_[ready_next_].first;
          pos_ = ready_[ready_next_].second;
          ++ready_next_;
          saw_events_ = true;
          return true;
        }
        if (options_.threads > 1 && base_ + pos_ >= serial_until_) {
          // Buffer a window, then parse it ahead on every thread.
          while (!eof_ && end_ - pos_ < options_.parallel_window_bytes) {
            TRACEDB_ASSIGN_OR_RETURN(bool more, Fill(pos_));
            if (!more) break;
          }
          if (end_ - pos_ >= options_.parallel_min_bytes) {
            ParseAhead();
            if (ready_.size() >= 2) break;  // handed out from the top of the loop
          }
          // Too little came of it (a huge or bad record): serially up to the end of this window.
          ready_.clear();
          ready_next_ = 0;
          serial_until_ = base_ + end_;
        }
        RecordParser parser(buf_.get() + end_, scratch_);
        ev->Clear();
        const char* after;
        const Scan s = parser.Parse(buf_.get() + pos_, ev, &after);
        if (s == Scan::kOk &&
            static_cast<size_t>(after - (buf_.get() + pos_)) > options_.max_record_bytes) {
          // Whole in the buffer but over the limit: skipped as when it does not fit, so that
          // the result does not depend on how much is buffered.
          TRACEDB_RETURN_IF_ERROR(SkipBad(base_ + pos_, "record too large"));
          break;
        }
        if (s == Scan::kOk) {
          ev->offset = base_ + pos_;
          ev->size = static_cast<uint64_t>(after - (buf_.get() + pos_));
          pos_ = static_cast<size_t>(after - buf_.get());
          saw_events_ = true;
          return true;
        }
        if (s == Scan::kBad) {
          TRACEDB_RETURN_IF_ERROR(
              SkipBad(base_ + static_cast<size_t>(parser.err_at() - buf_.get()), parser.reason()));
          break;
        }
        // The record goes on past the buffer.
        if (end_ - pos_ > options_.max_record_bytes) {
          TRACEDB_RETURN_IF_ERROR(SkipBad(base_ + pos_, "record too large"));
          break;
        }
        TRACEDB_ASSIGN_OR_RETURN(bool more, Fill(pos_));
        if (!more) {
          truncated_bytes_ += end_ - pos_;  // the last record is cut
          pos_ = end_;
          state_ = State::kDone;
          return false;
        }
        break;
      }
    }
  }
}

}  // namespace tracedb::query::json

// Encoders and decoders for the payload of every segment block type (before compression).
//
// Encoders append to a std::string; decoders take the uncompressed payload and return Corruption
// (never crash, never over-read) on malformed input. EventsBlockEncoder is on the recorder's
// flusher path, so its Add() is inline and writes into pre-sized column buffers.
// Thread safety: none; one encoder per thread.
// Format: docs/segment-format.md, sections "META" … "END".
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "engine/segment/segment_format.h"
#include "engine/util/coding.h"
#include "engine/util/status.h"

namespace tracedb::engine {

// Builds one EVENTS block: the events of one thread, in the order it recorded them.
class EventsBlockEncoder {
 public:
  void Reset(uint32_t thread_index);
  size_t count() const { return count_; }

  void Add(EventKind kind, uint8_t cat, int64_t ts, uint32_t name, uint32_t lane,
           const EventArgs* args) {
    Reserve1();
    if (count_ == 0) first_ts_ = prev_ts_ = ts;
    kinds_.PutU8(static_cast<uint8_t>(kind) | (args ? kKindHasArgs : 0));
    cats_.PutU8(cat);
    ts_.PutVarint(ZigZag(WrapSub(ts, prev_ts_)));  // exact for any ts, like the decoder
    prev_ts_ = ts;
    names_.PutVarint(name);
    lanes_.PutVarint(lane);
    if (args) PutArgs(*args);
    ++count_;
  }
  // kComplete (ival = dur) and kStep (ival = step).
  void AddWithInt(EventKind kind, uint8_t cat, int64_t ts, uint32_t name, uint32_t lane,
                  int64_t ival, const EventArgs* args) {
    Add(kind, cat, ts, name, lane, args);
    ints_.Reserve(10);
    ints_.PutVarint(kind == EventKind::kComplete ? static_cast<uint64_t>(ival) : ZigZag(ival));
  }
  void AddCounter(uint8_t cat, int64_t ts, uint32_t name, uint32_t lane, double value) {
    Add(EventKind::kCounter, cat, ts, name, lane, nullptr);
    uint64_t bits;
    std::memcpy(&bits, &value, 8);
    values_.Reserve(8);
    values_.PutFixed64(bits);
  }
  // Appends the uncompressed payload to *dst.
  void Finish(std::string* dst) const;

 private:
  void Reserve1() {
    kinds_.Reserve(1);
    cats_.Reserve(1);
    ts_.Reserve(10);
    names_.Reserve(5);
    lanes_.Reserve(5);
  }
  void PutArgs(const EventArgs& a);

  uint32_t thread_index_ = 0;
  size_t count_ = 0;
  int64_t first_ts_ = 0;
  int64_t prev_ts_ = 0;
  ByteBuf kinds_, cats_, ts_, names_, lanes_, ints_, values_, args_;
};

// Decodes an EVENTS block payload. *events is replaced.
Status DecodeEventsBlock(std::string_view payload, uint32_t* thread_index,
                         std::vector<SegmentEvent>* events);

// A run of events of one EVENTS block decoded column by column (EventsBlockDecoder::
// NextColumns): each column in its own array, decoded in a loop of its own, without a
// SegmentEvent per event. Event i is kind[i] & kKindMask (kKindHasArgs set when it has
// arguments), cat[i], ts[i], name[i], lane[i]. The sparse columns hold one entry per event that
// has one, in event order: `ints` the duration of each kComplete and the step of each kStep,
// `values` the value of each kCounter, `args` the arguments of each event with kKindHasArgs.
// Valid until the decoder's next call; `kind` and `cat` point into the payload.
struct EventColumns {
  size_t n = 0;
  const uint8_t* kind = nullptr;
  const uint8_t* cat = nullptr;
  std::vector<int64_t> ts;
  std::vector<uint32_t> name, lane;
  std::vector<int64_t> ints;
  std::vector<double> values;
  std::vector<EventArgs> args;
  size_t n_ints = 0, n_values = 0, n_args = 0;  // entries of the sparse columns
};

// Decodes an EVENTS block payload a few events at a time, so that a reader can hand events on
// while they are still in cache (a whole block of 64K events decoded at once is 5.8 MB of
// SegmentEvent). Init() checks the header and the column framing; each Next() decodes the
// following events and checks them. Events returned before a Next() that fails were well-formed,
// but the block as a whole is not. REQUIRES: `payload` outlives the decoder.
class EventsBlockDecoder {
 public:
  Status Init(std::string_view payload);
  uint32_t thread_index() const { return thread_index_; }
  uint64_t count() const { return n_; }      // events in the block
  bool done() const { return done_ == n_; }  // every event has been returned
  // Decodes the next min(max, events left) events into *cols (arrays reused from call to
  // call). On the call that returns the last event it also checks that no column holds more
  // values than the events.
  Status NextColumns(size_t max, EventColumns* cols);
  // The same events as SegmentEvents: *events is replaced.
  Status Next(size_t max, std::vector<SegmentEvent>* events);

 private:
  uint32_t thread_index_ = 0;
  uint64_t n_ = 0, done_ = 0;
  int64_t ts_ = 0;
  Reader kinds_, cats_, tss_, names_, lanes_, ints_, values_, args_;
  EventColumns cols_;  // Next()'s columns
};

void EncodeMeta(const SegmentMeta& m, std::string* dst);
Status DecodeMeta(std::string_view payload, SegmentMeta* m);

// STRINGS: consecutive ids first_id, first_id+1, …
void EncodeStrings(uint32_t first_id, const std::vector<std::string_view>& strings,
                   std::string* dst);
Status DecodeStrings(std::string_view payload, uint32_t* first_id,
                     std::vector<std::string>* strings);

void EncodeThreads(const std::vector<ThreadInfo>& threads, std::string* dst);
Status DecodeThreads(std::string_view payload, std::vector<ThreadInfo>* threads);

void EncodeLanes(const std::vector<LaneInfo>& lanes, std::string* dst);
Status DecodeLanes(std::string_view payload, std::vector<LaneInfo>* lanes);

void EncodeSync(const std::vector<SyncPoint>& points, std::string* dst);
Status DecodeSync(std::string_view payload, std::vector<SyncPoint>* points);

void EncodeAnchors(const std::vector<AnchorPoint>& points, std::string* dst);
Status DecodeAnchors(std::string_view payload, std::vector<AnchorPoint>* points);

void EncodeStats(const std::vector<DropCount>& drops, std::string* dst);
Status DecodeStats(std::string_view payload, std::vector<DropCount>* drops);

void EncodeComms(const std::vector<CommInfo>& comms, std::string* dst);
Status DecodeComms(std::string_view payload, std::vector<CommInfo>* comms);

// STEPSTATS: step summaries (docs/segment-format.md "STEPSTATS block").
void EncodeStepStats(const std::vector<StepStat>& steps, std::string* dst);
Status DecodeStepStats(std::string_view payload, std::vector<StepStat>* steps);

void EncodeEnd(const SegmentEnd& e, std::string* dst);
Status DecodeEnd(std::string_view payload, SegmentEnd* e);

}  // namespace tracedb::engine

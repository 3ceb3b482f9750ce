// BuilderPipe implementation. See builder_pipe.h.
#include "query/import/builder_pipe.h"

#include "engine/util/saturating.h"

namespace tracedb::query {

BuilderPipe::BuilderPipe(engine::TraceWriter* writer)
    : w_(writer), cur_(std::make_unique<Batch>()) {
  builder_ = std::make_unique<engine::TraceBuilder>(w_);
  // The first batch grows with its input (most imported files are small: a full batch's 786 KB
  // reserved for each cost more than importing them under ASan); later ones are full-sized.
  cur_->cmds.reserve(kFirstBatchCommands);
}

BuilderPipe::~BuilderPipe() {
  if (!finished_) (void)Finish();
}

BuilderPipe::Cmd& BuilderPipe::Add(Op op, std::string_view text) {
  if (cur_->cmds.size() >= kBatchCommands || cur_->text.size() >= (1u << 20)) Send();
  Cmd& c = cur_->cmds.emplace_back();
  c.op = op;
  c.has_args = false;
  c.text_off = static_cast<uint32_t>(cur_->text.size());
  c.text_len = static_cast<uint32_t>(text.size());
  cur_->text.append(text);
  return c;
}

uint32_t BuilderPipe::Name(std::string_view s) {
  auto it = names_.find(s);
  if (it != names_.end()) return it->second;
  const auto id = static_cast<uint32_t>(names_.size() + 1);
  names_.emplace(std::string(s), id);
  Add(Op::kName, s).name = id;
  return id;
}

uint32_t BuilderPipe::Track(const engine::TrackSpec& spec) {
  const uint32_t id = next_track_++;
  Cmd& c = Add(Op::kTrack, {});
  c.track = id;
  c.text_off = static_cast<uint32_t>(cur_->tracks.size());
  cur_->tracks.push_back(spec);
  return id;
}

void BuilderPipe::Begin(uint32_t track, int64_t ts, uint32_t name, uint32_t cat,
                        const engine::EventArgs* args, std::string_view json) {
  See(ts, ts);
  Cmd& c = Add(Op::kBegin, json);
  c.track = track;
  c.ts = ts;
  c.name = name;
  c.cat = cat;
  if ((c.has_args = args != nullptr)) c.args = *args;
}

void BuilderPipe::End(uint32_t track, int64_t ts, const engine::EventArgs* args,
                      std::string_view json) {
  See(ts, ts);
  Cmd& c = Add(Op::kEnd, json);
  c.track = track;
  c.ts = ts;
  if ((c.has_args = args != nullptr)) c.args = *args;
}

void BuilderPipe::Complete(uint32_t track, int64_t ts, int64_t dur, uint32_t name, uint32_t cat,
                           const engine::EventArgs* args, std::string_view json) {
  const int64_t end = engine::SaturatingAdd(ts, dur);  // a hostile file's ts + dur may not fit
  See(ts, end);
  Cmd& c = Add(Op::kComplete, json);
  c.track = track;
  c.ts = ts;
  c.dur = dur;
  c.name = name;
  c.cat = cat;
  if ((c.has_args = args != nullptr)) c.args = *args;
}

void BuilderPipe::Instant(uint32_t track, int64_t ts, uint32_t name, uint32_t cat,
                          const engine::EventArgs* args, std::string_view json,
                          engine::RowKind kind) {
  See(ts, ts);
  Cmd& c = Add(Op::kInstant, json);
  c.track = track;
  c.ts = ts;
  c.name = name;
  c.cat = cat;
  c.kind = kind;
  if ((c.has_args = args != nullptr)) c.args = *args;
}

void BuilderPipe::Counter(uint32_t track, int64_t ts, uint32_t name, uint32_t cat, double value) {
  See(ts, ts);
  Cmd& c = Add(Op::kCounter, {});
  c.track = track;
  c.ts = ts;
  c.name = name;
  c.cat = cat;
  c.value = value;
}

void BuilderPipe::Send() {
  // The thread starts with the first full batch: small inputs never pay for one.
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return full_.size() < kMaxBatchesInFlight; });
  full_.push_back(std::move(cur_));
  if (!free_.empty()) {
    cur_ = std::move(free_.back());
    free_.pop_back();
  }
  lock.unlock();
  cv_.notify_all();
  if (!cur_) {
    cur_ = std::make_unique<Batch>();
    cur_->cmds.reserve(kBatchCommands);
  }
}

Status BuilderPipe::Finish() {
  if (finished_) return Status::Ok();
  finished_ = true;
  if (!thread_.joinable()) return Apply(*cur_);  // everything fit in one batch: no thread
  if (!cur_->cmds.empty()) Send();
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void BuilderPipe::Run() {
  for (;;) {
    std::unique_ptr<Batch> b;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !full_.empty() || closing_; });
      if (full_.empty()) return;  // closing, and everything applied
      b = std::move(full_.front());
      full_.pop_front();
    }
    cv_.notify_all();
    bool failed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      failed = !status_.ok();
    }
    if (!failed) {
      // After an error the rest is dropped (the caller rolls the batch back).
      Status s = Apply(*b);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        status_ = s;
      }
    }
    b->cmds.clear();
    b->text.clear();
    b->tracks.clear();
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(b));
  }
}

Status BuilderPipe::Apply(const Batch& b) {
  for (const Cmd& c : b.cmds) {
    const std::string_view text(b.text.data() + c.text_off, c.text_len);
    const engine::EventArgs* args = c.has_args ? &c.args : nullptr;
    switch (c.op) {
      case Op::kName:
        if (name_ids_.size() <= c.name) name_ids_.resize(c.name + 1, 0);
        name_ids_[c.name] = w_->Intern(text);
        continue;
      case Op::kTrack:
        if (track_ids_.size() <= c.track) track_ids_.resize(c.track + 1, 0);
        track_ids_[c.track] = w_->Track(b.tracks[c.text_off]);
        continue;
      default:
        break;
    }
    const uint32_t track = track_ids_[c.track];
    const uint32_t name = name_ids_[c.name];
    const uint32_t cat = c.cat ? name_ids_[c.cat] : 0;
    Status s;
    switch (c.op) {
      case Op::kBegin:
        s = builder_->Begin(track, c.ts, name, cat, args, text);
        break;
      case Op::kEnd:
        s = builder_->End(track, c.ts, args, text);
        break;
      case Op::kComplete:
        s = builder_->Complete(track, c.ts, c.dur, name, cat, args, text);
        break;
      case Op::kInstant:
        s = builder_->Instant(track, c.ts, name, cat, args, text, c.kind);
        break;
      case Op::kCounter:
        s = builder_->Counter(track, c.ts, name, cat, c.value);
        break;
      default:
        break;
    }
    TRACEDB_RETURN_IF_ERROR(s);
  }
  return Status::Ok();
}

}  // namespace tracedb::query

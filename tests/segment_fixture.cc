// Segment files from a text spec. See segment_fixture.h.
#include "tests/segment_fixture.h"

#include <filesystem>
#include <memory>
#include <sstream>
#include <vector>

#include "engine/segment/segment_blocks.h"
#include "engine/segment/segment_writer.h"

namespace tracedb::testing {
namespace {

using namespace engine;

class SpecWriter {
 public:
  explicit SpecWriter(std::string root) : root_(std::move(root)) {}

  Status Line(int lineno, const std::string& line) {
    std::istringstream in(line);
    std::string op;
    if (!(in >> op) || op[0] == '#') return Status::Ok();
    auto bad = [&](const std::string& why) {
      return Status::InvalidArgument("spec line " + std::to_string(lineno) + ": " + why);
    };
    if (op == "file") {
      TRACEDB_RETURN_IF_ERROR(Close());
      std::string dir;
      int rank;
      uint32_t pid, seq;
      if (!(in >> dir >> rank >> pid >> seq)) return bad("file DIR RANK PID SEQ");
      SegmentMeta m;
      m.rank = rank;
      m.pid = pid;
      m.host = "host0";
      m.world_size = 1;
      m.clock = ClockKind::kMonotonic;
      m.tool_version = "test";
      std::string kv;
      while (in >> kv) {
        if (kv.rfind("host=", 0) == 0) m.host = kv.substr(5);
        if (kv.rfind("world=", 0) == 0) m.world_size = std::stoi(kv.substr(6));
      }
      const std::string rdir = root_ + "/" + dir + "/" + RankDirName(rank);
      std::filesystem::create_directories(rdir);
      writer_ = std::make_unique<SegmentWriter>();
      TRACEDB_RETURN_IF_ERROR(writer_->Open(rdir + "/" + SegmentFileName(pid, seq), pid, seq));
      std::string raw;
      EncodeMeta(m, &raw);
      writer_->AppendBlock(BlockType::kMeta, raw, false);
      return Status::Ok();
    }
    if (!writer_) return bad("no file yet");
    if (op == "anchor") {
      AnchorPoint a;
      std::string kv;
      if (!(in >> a.realtime_ns >> a.clock_ns)) return bad("anchor REALTIME CLOCK");
      a.uncertainty_ns = 10;
      while (in >> kv) {
        if (kv.rfind("unc=", 0) == 0) a.uncertainty_ns = std::stoll(kv.substr(4));
      }
      return Append(BlockType::kAnchor, [&](std::string* raw) { EncodeAnchors({a}, raw); });
    }
    if (op == "sync") {
      SyncPoint p;
      if (!(in >> p.ref_rank >> p.local_ns >> p.offset_ns >> p.uncertainty_ns)) {
        return bad("sync REF LOCAL OFFSET UNC");
      }
      return Append(BlockType::kSync, [&](std::string* raw) { EncodeSync({p}, raw); });
    }
    if (op == "string") {
      uint32_t id;
      std::string text;
      if (!(in >> id)) return bad("string ID TEXT");
      std::getline(in, text);
      if (!text.empty() && text[0] == ' ') text.erase(0, 1);
      return Append(BlockType::kStrings, [&](std::string* raw) { EncodeStrings(id, {text}, raw); });
    }
    if (op == "thread") {
      ThreadInfo t;
      if (!(in >> t.index >> t.os_tid)) return bad("thread INDEX TID [NAME]");
      std::getline(in, t.name);
      if (!t.name.empty() && t.name[0] == ' ') t.name.erase(0, 1);
      return Append(BlockType::kThreads, [&](std::string* raw) { EncodeThreads({t}, raw); });
    }
    if (op == "lane") {
      LaneInfo l;
      if (!(in >> l.lane >> l.name)) return bad("lane ID NAME_ID");
      return Append(BlockType::kLanes, [&](std::string* raw) { EncodeLanes({l}, raw); });
    }
    if (op == "comm") {
      CommInfo c;
      std::string members;
      if (!(in >> c.comm >> c.size >> c.rank_in_comm)) return bad("comm ID SIZE RANK");
      if (in >> members) {
        std::istringstream m(members);
        std::string x;
        while (std::getline(m, x, ',')) c.members.push_back(std::stoi(x));
      }
      return Append(BlockType::kComms, [&](std::string* raw) { EncodeComms({c}, raw); });
    }
    if (op == "events") {
      TRACEDB_RETURN_IF_ERROR(FlushEvents());
      uint32_t thread;
      if (!(in >> thread)) return bad("events THREAD");
      encoder_.Reset(thread);
      in_events_ = true;
      return Status::Ok();
    }
    if (op == "drop") {
      DropCount d;
      if (!(in >> d.thread_index >> d.dropped)) return bad("drop THREAD N");
      TRACEDB_RETURN_IF_ERROR(FlushEvents());
      return Append(BlockType::kStats, [&](std::string* raw) { EncodeStats({d}, raw); });
    }
    if (op == "stepstat") {
      StepStat st;
      if (!(in >> st.step >> st.start_ns >> st.dur_ns >> st.compute_ns >> st.comm_ns >>
            st.wait_ns >> st.bytes >> st.events)) {
        return bad("stepstat STEP START DUR COMPUTE COMM WAIT BYTES EVENTS [NAME:NS...]");
      }
      std::string top;
      while (in >> top) {
        const size_t colon = top.find(':');
        if (colon == std::string::npos) return bad("stepstat top name NAME_ID:NS");
        st.top.emplace_back(static_cast<uint32_t>(std::stoul(top.substr(0, colon))),
                            std::stoll(top.substr(colon + 1)));
      }
      TRACEDB_RETURN_IF_ERROR(FlushEvents());
      return Append(BlockType::kStepStats, [&](std::string* raw) { EncodeStepStats({st}, raw); });
    }
    if (op == "end") {
      TRACEDB_RETURN_IF_ERROR(FlushEvents());
      return Append(BlockType::kEnd, [&](std::string* raw) { EncodeEnd({0}, raw); });
    }
    if (op.size() == 1 && std::string("BEIXCS").find(op[0]) != std::string::npos) {
      if (!in_events_) return bad("event outside an events block");
      int64_t ts, dur = 0, step = 0;
      uint32_t name = 0;
      double value = 0;
      if (!(in >> ts)) return bad("event TS");
      if (op == "X" && !(in >> dur)) return bad("X TS DUR NAME");
      if (op == "S") {
        if (!(in >> step)) return bad("S TS STEP");
      } else if (!(in >> name)) {
        return bad("event NAME_ID");
      }
      if (op == "C" && !(in >> value)) return bad("C TS NAME VALUE");
      uint32_t lane = 0;
      uint8_t cat = 0;
      EventArgs a;
      std::string kv;
      while (in >> kv) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) return bad("expected key=value: " + kv);
        const std::string k = kv.substr(0, eq);
        const long long v = std::stoll(kv.substr(eq + 1));
        if (k == "cat")
          cat = static_cast<uint8_t>(v);
        else if (k == "lane")
          lane = static_cast<uint32_t>(v);
        else if (k == "bytes") {
          a.bytes = static_cast<uint64_t>(v);
          a.mask |= EventArgs::kBytes;
        } else if (k == "peer") {
          a.peer = static_cast<int32_t>(v);
          a.mask |= EventArgs::kPeer;
        } else if (k == "tag") {
          a.tag = static_cast<int32_t>(v);
          a.mask |= EventArgs::kTag;
        } else if (k == "comm") {
          a.comm = static_cast<uint32_t>(v);
          a.mask |= EventArgs::kComm;
        } else if (k == "seq") {
          a.seq = static_cast<uint64_t>(v);
          a.mask |= EventArgs::kSeq;
        } else if (k == "flow") {
          a.flow = static_cast<uint64_t>(v);
          a.mask |= EventArgs::kFlow;
        } else
          return bad("unknown key " + k);
      }
      const EventArgs* ap = a.mask ? &a : nullptr;
      switch (op[0]) {
        case 'B':
          encoder_.Add(EventKind::kBegin, cat, ts, name, lane, ap);
          break;
        case 'E':
          encoder_.Add(EventKind::kEnd, cat, ts, name, lane, ap);
          break;
        case 'I':
          encoder_.Add(EventKind::kInstant, cat, ts, name, lane, ap);
          break;
        case 'X':
          encoder_.AddWithInt(EventKind::kComplete, cat, ts, name, lane, dur, ap);
          break;
        case 'C':
          encoder_.AddCounter(cat, ts, name, lane, value);
          break;
        case 'S':
          encoder_.AddWithInt(EventKind::kStep, 7, ts, 0, 0, step, nullptr);
          break;
      }
      return Status::Ok();
    }
    return bad("unknown item " + op);
  }

  Status Close() {
    TRACEDB_RETURN_IF_ERROR(FlushEvents());
    if (writer_) TRACEDB_RETURN_IF_ERROR(writer_->Close());
    writer_.reset();
    return Status::Ok();
  }

 private:
  template <typename F>
  Status Append(BlockType type, F encode) {
    TRACEDB_RETURN_IF_ERROR(FlushEvents());
    std::string raw;
    encode(&raw);
    writer_->AppendBlock(type, raw, true);
    return Status::Ok();
  }
  Status FlushEvents() {
    if (!in_events_) return Status::Ok();
    in_events_ = false;
    std::string raw;
    encoder_.Finish(&raw);
    writer_->AppendBlock(BlockType::kEvents, raw, true);
    return Status::Ok();
  }

  std::string root_;
  std::unique_ptr<SegmentWriter> writer_;
  EventsBlockEncoder encoder_;
  bool in_events_ = false;
};

}  // namespace

Status WriteSegmentsFromSpec(const std::string& root, const std::string& spec) {
  SpecWriter w(root);
  std::istringstream in(spec);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) TRACEDB_RETURN_IF_ERROR(w.Line(++n, line));
  return w.Close();
}

}  // namespace tracedb::testing

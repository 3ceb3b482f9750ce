// tracedb._tracedb: the CPython extension over the recorder's C ABI (recorder/include/tracedb/
// recorder.h). Written against the limited set of the CPython C API that 3.9+ share; no ctypes,
// no pybind11 on the hot path: `with tracedb.span("forward"):` is one vectorcall that builds a
// small object, a dict lookup of the interned name, and the recorder's begin/end.
//
// Thread safety: every function may be called from any Python thread; the recorder itself is
// thread-safe and the name cache is only touched with the GIL held.
// What the Python API means: docs/python.md.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "tracedb/recorder.h"

namespace {

// name (str) -> id (int); keeps intern calls (which take a lock) off the hot path.
PyObject* g_names = nullptr;

// Returns the id of `name` (a str, or an int that is already an id). -1 with an exception set.
int64_t NameId(PyObject* name) {
  if (PyLong_CheckExact(name)) {
    const unsigned long long v = PyLong_AsUnsignedLongLong(name);
    if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return -1;
    if (v > UINT32_MAX) {
      PyErr_SetString(PyExc_ValueError, "tracedb: a name id is a 32-bit value");
      return -1;
    }
    return static_cast<int64_t>(v);
  }
  PyObject* cached = PyDict_GetItemWithError(g_names, name);  // borrowed
  if (cached != nullptr) return static_cast<int64_t>(PyLong_AsUnsignedLong(cached));
  if (PyErr_Occurred()) return -1;
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_TypeError, "tracedb: a name must be a str, not %.100s",
                 Py_TYPE(name)->tp_name);
    return -1;
  }
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(name, &size);
  if (utf8 == nullptr) return -1;
  if (std::strlen(utf8) != static_cast<size_t>(size)) {
    PyErr_SetString(PyExc_ValueError, "tracedb: a name may not contain NUL");
    return -1;
  }
  const uint32_t id = tracedb_intern(utf8);
  if (id == 0) {
    PyErr_SetString(PyExc_MemoryError, "tracedb: cannot intern the name");
    return -1;
  }
  PyObject* v = PyLong_FromUnsignedLong(id);
  if (v == nullptr) return -1;
  const int rc = PyDict_SetItem(g_names, name, v);
  Py_DECREF(v);
  if (rc != 0) return -1;
  return id;
}

// Category: an int (TRACEDB_CAT_*) or one of the names below.
const char* const kCategories[] = {"user", "compute", "comm", "phase",
                                   "mpi",  "nccl",    "cuda", "step"};
constexpr int kCategoryCount = 8;

int CategoryId(PyObject* cat, uint32_t* out) {
  if (cat == nullptr || cat == Py_None) {
    *out = TRACEDB_CAT_USER;
    return 0;
  }
  if (PyLong_Check(cat)) {
    const long v = PyLong_AsLong(cat);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0 || v >= kCategoryCount) {
      PyErr_Format(PyExc_ValueError, "tracedb: category %ld out of range 0..%d", v,
                   kCategoryCount - 1);
      return -1;
    }
    *out = static_cast<uint32_t>(v);
    return 0;
  }
  if (PyUnicode_Check(cat)) {
    for (int i = 0; i < kCategoryCount; ++i) {
      if (PyUnicode_CompareWithASCIIString(cat, kCategories[i]) == 0) {
        *out = static_cast<uint32_t>(i);
        return 0;
      }
    }
    PyErr_Format(PyExc_ValueError,
                 "tracedb: unknown category %R (one of user, compute, comm, phase, mpi, nccl, "
                 "cuda, step)",
                 cat);
    return -1;
  }
  PyErr_Format(PyExc_TypeError, "tracedb: a category is a str or an int, not %.100s",
               Py_TYPE(cat)->tp_name);
  return -1;
}

int LaneId(PyObject* lane, uint32_t* out) {
  if (lane == nullptr || lane == Py_None) {
    *out = 0;
    return 0;
  }
  if (PyLong_Check(lane)) {
    const unsigned long v = PyLong_AsUnsignedLong(lane);
    if (v == static_cast<unsigned long>(-1) && PyErr_Occurred()) return -1;
    if (v > 65535) {
      PyErr_SetString(PyExc_ValueError, "tracedb: a lane id is at most 65535");
      return -1;
    }
    *out = static_cast<uint32_t>(v);
    return 0;
  }
  if (!PyUnicode_Check(lane)) {
    PyErr_Format(PyExc_TypeError, "tracedb: a lane is a str or an id, not %.100s",
                 Py_TYPE(lane)->tp_name);
    return -1;
  }
  const char* utf8 = PyUnicode_AsUTF8(lane);
  if (utf8 == nullptr) return -1;
  *out = tracedb_lane(utf8);
  return 0;
}

// Reads one optional integer argument into `args`. Returns -1 with an exception set.
int ArgInt(PyObject* v, const char* what, int64_t lo, int64_t hi, uint32_t bit, tracedb_args* args,
           int64_t* out) {
  if (v == nullptr || v == Py_None) return 0;
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (x == -1 && PyErr_Occurred()) return -1;
  if (overflow != 0 || x < lo || x > hi) {
    PyErr_Format(PyExc_ValueError, "tracedb: %s=%R out of range", what, v);
    return -1;
  }
  *out = x;
  args->fields |= bit;
  return 0;
}

// Keyword arguments shared by span/begin/end/instant/complete: cat, lane and the typed
// communication arguments.
struct CommonArgs {
  uint32_t cat = TRACEDB_CAT_USER;
  uint32_t lane = 0;
  tracedb_args args = {};
};

int ParseCommon(PyObject* cat, PyObject* lane, PyObject* bytes, PyObject* peer, PyObject* tag,
                PyObject* comm, PyObject* seq, PyObject* flow, CommonArgs* c) {
  if (CategoryId(cat, &c->cat) < 0 || LaneId(lane, &c->lane) < 0) return -1;
  int64_t v = 0;
  if (ArgInt(bytes, "bytes", 0, INT64_MAX, TRACEDB_ARG_BYTES, &c->args, &v) < 0) return -1;
  if (c->args.fields & TRACEDB_ARG_BYTES) c->args.bytes = static_cast<uint64_t>(v);
  if (ArgInt(peer, "peer", INT32_MIN, INT32_MAX, TRACEDB_ARG_PEER, &c->args, &v) < 0) return -1;
  if (c->args.fields & TRACEDB_ARG_PEER) c->args.peer = static_cast<int32_t>(v);
  if (ArgInt(tag, "tag", INT32_MIN, INT32_MAX, TRACEDB_ARG_TAG, &c->args, &v) < 0) return -1;
  if (c->args.fields & TRACEDB_ARG_TAG) c->args.tag = static_cast<int32_t>(v);
  if (ArgInt(comm, "comm", 0, UINT32_MAX, TRACEDB_ARG_COMM, &c->args, &v) < 0) return -1;
  if (c->args.fields & TRACEDB_ARG_COMM) c->args.comm = static_cast<uint32_t>(v);
  if (ArgInt(seq, "seq", 0, INT64_MAX, TRACEDB_ARG_SEQ, &c->args, &v) < 0) return -1;
  if (c->args.fields & TRACEDB_ARG_SEQ) c->args.seq = static_cast<uint64_t>(v);
  if (ArgInt(flow, "flow", 0, INT64_MAX, TRACEDB_ARG_FLOW, &c->args, &v) < 0) return -1;
  if (c->args.fields & TRACEDB_ARG_FLOW) c->args.flow = static_cast<uint64_t>(v);
  return 0;
}

const tracedb_args* ArgsOrNull(const CommonArgs& c) { return c.args.fields ? &c.args : nullptr; }

// ---- span: the context manager ----

struct SpanObject {
  PyObject_HEAD uint32_t name;
  uint32_t cat;
  uint32_t lane;
  tracedb_args args;
};

PyTypeObject SpanType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// span(name, cat=None, lane=None, *, bytes, peer, tag, comm, seq, flow), as a vectorcall:
// the common case `span("forward")` parses nothing but one positional argument.
PyObject* SpanVectorcall(PyObject* type, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject* values[9] = {nullptr};  // name, cat, lane, bytes, peer, tag, comm, seq, flow
  static const char* const kKeys[] = {"name", "cat",  "lane", "bytes", "peer",
                                      "tag",  "comm", "seq",  "flow"};
  if (nargs < 1 || nargs > 3) {
    PyErr_SetString(PyExc_TypeError, "span(name, cat=None, lane=None, **comm_args)");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) values[i] = args[i];
  if (kwnames != nullptr) {
    const Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nk; ++k) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, k);
      int found = -1;
      for (int j = 0; j < 9; ++j) {
        if (PyUnicode_CompareWithASCIIString(key, kKeys[j]) == 0) found = j;
      }
      if (found < 0 || values[found] != nullptr) {
        PyErr_Format(PyExc_TypeError, "span(): unexpected or repeated argument %R", key);
        return nullptr;
      }
      values[found] = args[nargs + k];
    }
  }
  const int64_t name = NameId(values[0]);
  if (name < 0) return nullptr;
  CommonArgs c;
  if (values[1] != nullptr || values[2] != nullptr || kwnames != nullptr) {
    if (ParseCommon(values[1], values[2], values[3], values[4], values[5], values[6], values[7],
                    values[8], &c) < 0) {
      return nullptr;
    }
  }
  auto* self = PyObject_New(SpanObject, reinterpret_cast<PyTypeObject*>(type));
  if (self == nullptr) return nullptr;
  self->name = static_cast<uint32_t>(name);
  self->cat = c.cat;
  self->lane = c.lane;
  self->args = c.args;
  return reinterpret_cast<PyObject*>(self);
}

PyObject* SpanNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  return PyVectorcall_Call(reinterpret_cast<PyObject*>(type), args, kwargs);
}

PyObject* SpanEnter(PyObject* obj, PyObject*) {
  auto* self = reinterpret_cast<SpanObject*>(obj);
  if (self->cat == TRACEDB_CAT_USER && self->lane == 0 && self->args.fields == 0) {
    tracedb_begin(self->name);
  } else {
    tracedb_begin_ex(self->name, self->cat, self->lane, self->args.fields ? &self->args : nullptr);
  }
  Py_INCREF(obj);
  return obj;
}

PyObject* SpanExit(PyObject* obj, PyObject* const*, Py_ssize_t) {
  auto* self = reinterpret_cast<SpanObject*>(obj);
  if (self->cat == TRACEDB_CAT_USER && self->lane == 0) {
    tracedb_end(self->name);
  } else {
    tracedb_end_ex(self->name, self->cat, self->lane, nullptr);
  }
  Py_RETURN_FALSE;  // never swallows the exception
}

PyMethodDef kSpanMethods[] = {
    {"__enter__", SpanEnter, METH_NOARGS, "Begins the span."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(SpanExit)),
     METH_FASTCALL, "Ends the span (exceptions propagate)."},
    {nullptr, nullptr, 0, nullptr},
};

// ---- module functions ----

PyObject* RaiseCode(int rc, const char* what, const char* dir) {
  switch (rc) {
    case TRACEDB_ERR_STATE:
      PyErr_Format(PyExc_RuntimeError,
                   "tracedb.%s: wrong state (already started, not started, "
                   "or a forked child of a recording process)",
                   what);
      break;
    case TRACEDB_ERR_IO:
      PyErr_Format(PyExc_OSError, "tracedb.%s: cannot write %s", what,
                   dir != nullptr ? dir : "the trace directory");
      break;
    case TRACEDB_ERR_ARG:
      PyErr_Format(PyExc_ValueError, "tracedb.%s: invalid argument", what);
      break;
    case TRACEDB_ERR_TIMEOUT:
      PyErr_Format(PyExc_TimeoutError, "tracedb.%s: the flusher did not finish within 30 s", what);
      break;
    default:
      PyErr_Format(PyExc_RuntimeError, "tracedb.%s: error %d", what, rc);
  }
  return nullptr;
}

PyObject* Start(PyObject*, PyObject* arg) {
  PyObject* bytes = nullptr;
  if (!PyUnicode_FSConverter(arg, &bytes)) return nullptr;
  const char* dir = PyBytes_AS_STRING(bytes);
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = tracedb_start(dir);
  Py_END_ALLOW_THREADS PyObject* result = nullptr;
  if (rc == TRACEDB_OK) {
    Py_INCREF(Py_None);
    result = Py_None;
  } else {
    RaiseCode(rc, "start", dir);
  }
  Py_DECREF(bytes);
  return result;
}

PyObject* Stop(PyObject*, PyObject*) {
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = tracedb_stop();
  Py_END_ALLOW_THREADS if (rc != TRACEDB_OK) return RaiseCode(rc, "stop", nullptr);
  Py_RETURN_NONE;
}

PyObject* Flush(PyObject*, PyObject*) {
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = tracedb_flush();
  Py_END_ALLOW_THREADS if (rc != TRACEDB_OK) return RaiseCode(rc, "flush", nullptr);
  Py_RETURN_NONE;
}

PyObject* Enabled(PyObject*, PyObject*) { return PyBool_FromLong(tracedb_enabled()); }
PyObject* Rank(PyObject*, PyObject*) { return PyLong_FromLong(tracedb_rank()); }
PyObject* WorldSize(PyObject*, PyObject*) { return PyLong_FromLong(tracedb_world_size()); }
PyObject* Now(PyObject*, PyObject*) { return PyLong_FromLongLong(tracedb_now()); }

PyObject* Intern(PyObject*, PyObject* name) {
  const int64_t id = NameId(name);
  return id < 0 ? nullptr : PyLong_FromLongLong(id);
}

PyObject* Lane(PyObject*, PyObject* name) {
  uint32_t id = 0;
  if (!PyUnicode_Check(name)) {
    PyErr_SetString(PyExc_TypeError, "tracedb.lane(name): name must be a str");
    return nullptr;
  }
  if (LaneId(name, &id) < 0) return nullptr;
  if (id == 0) {
    PyErr_SetString(PyExc_RuntimeError, "tracedb.lane: no lane left (at most 65535)");
    return nullptr;
  }
  return PyLong_FromUnsignedLong(id);
}

PyObject* ThreadName(PyObject*, PyObject* name) {
  const char* utf8 = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : nullptr;
  if (utf8 == nullptr) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "tracedb.thread_name(str)");
    return nullptr;
  }
  tracedb_thread_name(utf8);
  Py_RETURN_NONE;
}

// begin/end/instant(name, cat=None, lane=None, *, bytes, peer, tag, comm, seq, flow)
enum class Kind { kBegin, kEnd, kInstant };

template <Kind kKind>
PyObject* Mark(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"name", "cat",  "lane", "bytes", "peer",
                             "tag",  "comm", "seq",  "flow",  nullptr};
  PyObject *name, *cat = nullptr, *lane = nullptr, *bytes = nullptr, *peer = nullptr,
                  *tag = nullptr, *comm = nullptr, *seq = nullptr, *flow = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO$OOOOOO", const_cast<char**>(kw), &name, &cat,
                                   &lane, &bytes, &peer, &tag, &comm, &seq, &flow)) {
    return nullptr;
  }
  const int64_t id = NameId(name);
  if (id < 0) return nullptr;
  CommonArgs c;
  if (ParseCommon(cat, lane, bytes, peer, tag, comm, seq, flow, &c) < 0) return nullptr;
  const uint32_t n = static_cast<uint32_t>(id);
  if constexpr (kKind == Kind::kBegin) tracedb_begin_ex(n, c.cat, c.lane, ArgsOrNull(c));
  if constexpr (kKind == Kind::kEnd) tracedb_end_ex(n, c.cat, c.lane, ArgsOrNull(c));
  if constexpr (kKind == Kind::kInstant) tracedb_instant_ex(n, c.cat, c.lane, ArgsOrNull(c));
  Py_RETURN_NONE;
}

// complete(name, ts, dur, cat=None, lane=None, *, bytes, peer, tag, comm, seq, flow)
PyObject* Complete(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"name", "ts",  "dur",  "cat", "lane", "bytes",
                             "peer", "tag", "comm", "seq", "flow", nullptr};
  PyObject *name, *cat = nullptr, *lane = nullptr, *bytes = nullptr, *peer = nullptr,
                  *tag = nullptr, *comm = nullptr, *seq = nullptr, *flow = nullptr;
  long long ts = 0, dur = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OLL|OO$OOOOOO", const_cast<char**>(kw), &name,
                                   &ts, &dur, &cat, &lane, &bytes, &peer, &tag, &comm, &seq,
                                   &flow)) {
    return nullptr;
  }
  if (dur < 0) {
    PyErr_SetString(PyExc_ValueError, "tracedb.complete: dur < 0");
    return nullptr;
  }
  const int64_t id = NameId(name);
  if (id < 0) return nullptr;
  CommonArgs c;
  if (ParseCommon(cat, lane, bytes, peer, tag, comm, seq, flow, &c) < 0) return nullptr;
  tracedb_complete_ex(static_cast<uint32_t>(id), c.cat, c.lane, ts, dur, ArgsOrNull(c));
  Py_RETURN_NONE;
}

// counter(name, value, cat=None, lane=None)
PyObject* Counter(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"name", "value", "cat", "lane", nullptr};
  PyObject *name, *cat = nullptr, *lane = nullptr;
  double value = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Od|OO", const_cast<char**>(kw), &name, &value,
                                   &cat, &lane)) {
    return nullptr;
  }
  const int64_t id = NameId(name);
  if (id < 0) return nullptr;
  CommonArgs c;
  if (CategoryId(cat, &c.cat) < 0 || LaneId(lane, &c.lane) < 0) return nullptr;
  tracedb_counter_ex(static_cast<uint32_t>(id), c.cat, c.lane, value);
  Py_RETURN_NONE;
}

PyObject* Step(PyObject*, PyObject* arg) {
  const long long n = PyLong_AsLongLong(arg);
  if (n == -1 && PyErr_Occurred()) return nullptr;
  tracedb_step(n);
  Py_RETURN_NONE;
}

// clock_sync(ref_rank, local_ns, offset_ns, uncertainty_ns)
PyObject* ClockSync(PyObject*, PyObject* args) {
  int ref = 0;
  long long local = 0, offset = 0, unc = 0;
  if (!PyArg_ParseTuple(args, "iLLL", &ref, &local, &offset, &unc)) return nullptr;
  if (unc < 0) {
    PyErr_SetString(PyExc_ValueError, "tracedb.clock_sync: uncertainty_ns < 0");
    return nullptr;
  }
  tracedb_clock_sync(ref, local, offset, unc);
  Py_RETURN_NONE;
}

// comm_define(comm, size, rank_in_comm, members=None)
PyObject* CommDefine(PyObject*, PyObject* args) {
  unsigned long comm = 0;
  int size = 0, rank_in_comm = 0;
  PyObject* members = Py_None;
  if (!PyArg_ParseTuple(args, "kii|O", &comm, &size, &rank_in_comm, &members)) return nullptr;
  if (comm > UINT32_MAX || size < 1 || rank_in_comm < 0 || rank_in_comm >= size) {
    PyErr_SetString(PyExc_ValueError, "tracedb.comm_define: need 0 <= rank_in_comm < size");
    return nullptr;
  }
  if (members == Py_None) {
    tracedb_comm_define(static_cast<uint32_t>(comm), size, rank_in_comm, nullptr);
    Py_RETURN_NONE;
  }
  PyObject* seq = PySequence_Fast(members, "tracedb.comm_define: members must be a sequence");
  if (seq == nullptr) return nullptr;
  if (PySequence_Fast_GET_SIZE(seq) != size) {
    Py_DECREF(seq);
    PyErr_SetString(PyExc_ValueError, "tracedb.comm_define: len(members) != size");
    return nullptr;
  }
  int32_t* ranks = static_cast<int32_t*>(PyMem_Malloc(sizeof(int32_t) * size));
  if (ranks == nullptr) {
    Py_DECREF(seq);
    return PyErr_NoMemory();
  }
  for (int i = 0; i < size; ++i) {
    const long r = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
    if ((r == -1 && PyErr_Occurred()) || r < 0 || r > INT32_MAX) {
      PyMem_Free(ranks);
      Py_DECREF(seq);
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "tracedb.comm_define: bad rank");
      return nullptr;
    }
    ranks[i] = static_cast<int32_t>(r);
  }
  tracedb_comm_define(static_cast<uint32_t>(comm), size, rank_in_comm, ranks);
  PyMem_Free(ranks);
  Py_DECREF(seq);
  Py_RETURN_NONE;
}

// trigger(reason) -> bool: a flight-recorder trigger (docs/flight.md); False when refused by the
// rate limit (one a second), RuntimeError when not recording.
PyObject* Trigger(PyObject*, PyObject* arg) {
  const char* reason = PyUnicode_AsUTF8(arg);
  if (reason == nullptr) return nullptr;
  const int rc = tracedb_trigger(reason);
  if (rc == TRACEDB_ERR_RATE) Py_RETURN_FALSE;
  if (rc != TRACEDB_OK) return RaiseCode(rc, "trigger", nullptr);
  Py_RETURN_TRUE;
}

PyObject* Counters(PyObject*, PyObject*) {
  tracedb_counters c = {};
  tracedb_get_counters(&c);
  return Py_BuildValue("{sKsKsKsKsK}", "written", c.written, "dropped", c.dropped, "flushed_bytes",
                       c.flushed_bytes, "write_errors", c.write_errors, "flusher_cpu_ns",
                       c.flusher_cpu_ns);
}

PyMethodDef kMethods[] = {
    {"start", Start, METH_O, "start(dir): start recording into dir (created if missing)."},
    {"stop", Stop, METH_NOARGS, "stop(): stop recording and write everything buffered."},
    {"flush", Flush, METH_NOARGS, "flush(): write every event recorded so far."},
    {"enabled", Enabled, METH_NOARGS, "enabled(): True while events are recorded."},
    {"rank", Rank, METH_NOARGS, "rank(): this process's rank, from the environment."},
    {"world_size", WorldSize, METH_NOARGS, "world_size(): the job's size, from the environment."},
    {"now", Now, METH_NOARGS, "now(): the recorder's clock in ns."},
    {"intern", Intern, METH_O, "intern(name) -> id: a name id for the hot path."},
    {"lane", Lane, METH_O, "lane(name) -> id: a named track (e.g. one per tensor)."},
    {"thread_name", ThreadName, METH_O, "thread_name(name): names the calling thread's track."},
    {"begin", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Mark<Kind::kBegin>)),
     METH_VARARGS | METH_KEYWORDS, "begin(name, cat=None, lane=None, **comm_args)"},
    {"end", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Mark<Kind::kEnd>)),
     METH_VARARGS | METH_KEYWORDS, "end(name, cat=None, lane=None, **comm_args)"},
    {"instant", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Mark<Kind::kInstant>)),
     METH_VARARGS | METH_KEYWORDS, "instant(name, cat=None, lane=None, **comm_args)"},
    {"complete", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Complete)),
     METH_VARARGS | METH_KEYWORDS, "complete(name, ts, dur, cat=None, lane=None, **comm_args)"},
    {"counter", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Counter)),
     METH_VARARGS | METH_KEYWORDS, "counter(name, value, cat=None, lane=None)"},
    {"step", Step, METH_O, "step(n): marks the start of training step n."},
    {"clock_sync", ClockSync, METH_VARARGS,
     "clock_sync(ref_rank, local_ns, offset_ns, uncertainty_ns): one clock measurement."},
    {"comm_define", CommDefine, METH_VARARGS,
     "comm_define(comm, size, rank_in_comm, members=None): declares a communicator."},
    {"counters", Counters, METH_NOARGS, "counters() -> dict of the recorder's counters."},
    {"trigger", Trigger, METH_O,
     "trigger(reason) -> bool: a flight-recorder trigger (False when rate-limited)."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "tracedb._tracedb",
                       "The recorder's C ABI (see the tracedb package).", -1, kMethods};

}  // namespace

extern "C" PyMODINIT_FUNC PyInit__tracedb(void) {
  SpanType.tp_name = "tracedb.span";
  SpanType.tp_basicsize = sizeof(SpanObject);
  SpanType.tp_flags = Py_TPFLAGS_DEFAULT;
  SpanType.tp_doc =
      "span(name, cat=None, lane=None, *, bytes, peer, tag, comm, seq, flow): a context manager "
      "that records one span.";
  SpanType.tp_methods = kSpanMethods;
  SpanType.tp_new = SpanNew;
  SpanType.tp_vectorcall = SpanVectorcall;
  if (PyType_Ready(&SpanType) < 0) return nullptr;
  g_names = PyDict_New();
  if (g_names == nullptr) return nullptr;
  PyObject* m = PyModule_Create(&kModule);
  if (m == nullptr) return nullptr;
  Py_INCREF(&SpanType);
  if (PyModule_AddObject(m, "span", reinterpret_cast<PyObject*>(&SpanType)) < 0) return nullptr;
  for (int i = 0; i < kCategoryCount; ++i) {
    char key[32];
    std::snprintf(key, sizeof(key), "CAT_%s", kCategories[i]);
    for (char* p = key; *p; ++p) *p = static_cast<char>(std::toupper(*p));
    if (PyModule_AddIntConstant(m, key, i) < 0) return nullptr;
  }
  return m;
}

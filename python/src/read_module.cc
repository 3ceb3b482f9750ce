// tracedb._tracedb_read: the read path of the Python package (tracedb/read.py). scan() runs the
// scan of event_columns.h and hands each decoded column over as a Column object, an owned buffer
// that NumPy wraps without a copy (the buffer protocol).
// Thread safety: scan() releases the GIL while it decodes; its results belong to the caller.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "python/src/event_columns.h"

namespace {

using tracedb::python::Buffer;
using tracedb::python::kNumCols;
using tracedb::python::kSpecs;
using tracedb::python::Out;
using tracedb::python::Query;
using tracedb::python::Range;
using tracedb::python::ScanResult;

// ---- Column: an owned buffer exposed through the buffer protocol ----

struct ColumnObject {
  PyObject_HEAD Buffer* data;  // owned
  Py_ssize_t n;                // items
  Py_ssize_t itemsize;
  char format[4];
  Py_ssize_t shape[1];
  Py_ssize_t strides[1];
};

PyTypeObject ColumnType = {PyVarObject_HEAD_INIT(nullptr, 0)};

void ColumnDealloc(PyObject* o) {
  delete reinterpret_cast<ColumnObject*>(o)->data;
  Py_TYPE(o)->tp_free(o);
}

int ColumnGetBuffer(PyObject* o, Py_buffer* view, int flags) {
  auto* c = reinterpret_cast<ColumnObject*>(o);
  c->shape[0] = c->n;
  c->strides[0] = c->itemsize;
  view->buf = c->data->data();
  view->obj = o;
  Py_INCREF(o);
  view->len = c->n * c->itemsize;
  view->readonly = 0;
  view->itemsize = c->itemsize;
  view->format = (flags & PyBUF_FORMAT) ? c->format : nullptr;
  view->ndim = 1;
  view->shape = (flags & PyBUF_ND) ? c->shape : nullptr;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? c->strides : nullptr;
  view->suboffsets = nullptr;
  view->internal = nullptr;
  return 0;
}

PyBufferProcs kColumnBuffer = {ColumnGetBuffer, nullptr};

PyObject* MakeColumn(Buffer&& data, Py_ssize_t n, Py_ssize_t itemsize, const char* format) {
  auto* c = PyObject_New(ColumnObject, &ColumnType);
  if (c == nullptr) return nullptr;
  c->data = new Buffer(std::move(data));
  c->n = n;
  c->itemsize = itemsize;
  std::strncpy(c->format, format, sizeof(c->format) - 1);
  c->format[sizeof(c->format) - 1] = '\0';
  return reinterpret_cast<PyObject*>(c);
}

bool ReadInts(PyObject* seq, std::vector<int64_t>* out, const char* what) {
  if (seq == nullptr || seq == Py_None) return true;
  PyObject* fast = PySequence_Fast(seq, what);
  if (fast == nullptr) return false;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); ++i) {
    const long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
    out->push_back(v);
  }
  Py_DECREF(fast);
  if (out->empty()) out->push_back(-1);  // an empty list matches nothing (no id is -1)
  return true;
}

bool ReadRange(PyObject* pair, Range* r) {
  if (pair == nullptr || pair == Py_None) return true;
  PyObject *lo = nullptr, *hi = nullptr;
  if (!PyArg_ParseTuple(pair, "OO", &lo, &hi)) return false;
  if (lo != Py_None) {
    r->lo = PyLong_AsLongLong(lo);
    if (r->lo == -1 && PyErr_Occurred()) return false;
  }
  if (hi != Py_None) {
    r->hi = PyLong_AsLongLong(hi);
    if (r->hi == -1 && PyErr_Occurred()) return false;
  }
  return true;
}

// scan(path, columns, ranks=None, names=None, cats=None, kinds=None, ts=None, dur=None,
//      step=None) -> (n, {column: (values, nulls or None)}, lanes, blocks_read, blocks_total)
// Ranges are inclusive (lo, hi) pairs with None for an open end; names/cats are string ids.
PyObject* ScanPy(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"path",  "columns", "ranks", "names", "cats",
                             "kinds", "ts",      "dur",   "step",  nullptr};
  PyObject *path = nullptr, *columns = nullptr, *ranks = nullptr, *names = nullptr, *cats = nullptr,
           *kinds = nullptr, *ts = nullptr, *dur = nullptr, *step = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&O|OOOOOOO", const_cast<char**>(kw),
                                   PyUnicode_FSConverter, &path, &columns, &ranks, &names, &cats,
                                   &kinds, &ts, &dur, &step)) {
    return nullptr;
  }
  Query q;
  q.path = PyBytes_AS_STRING(path);
  Py_DECREF(path);
  PyObject* fast = PySequence_Fast(columns, "columns must be a sequence of names");
  if (fast == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); ++i) {
    PyObject* c = PySequence_Fast_GET_ITEM(fast, i);
    int found = -1;
    for (int j = 0; j < kNumCols && PyUnicode_Check(c); ++j) {
      if (PyUnicode_CompareWithASCIIString(c, kSpecs[j].name) == 0) found = j;
    }
    if (found < 0) {
      Py_DECREF(fast);
      PyErr_Format(PyExc_ValueError, "tracedb: no column %R in events", c);
      return nullptr;
    }
    q.want[found] = true;
  }
  Py_DECREF(fast);
  if (!ReadInts(ranks, &q.ranks, "ranks") || !ReadInts(names, &q.names, "names") ||
      !ReadInts(cats, &q.cats, "cats") || !ReadInts(kinds, &q.kinds, "kinds") ||
      !ReadRange(ts, &q.ts) || !ReadRange(dur, &q.dur) || !ReadRange(step, &q.step)) {
    return nullptr;
  }
  ScanResult r;
  Py_BEGIN_ALLOW_THREADS tracedb::python::ScanEvents(q, &r);
  Py_END_ALLOW_THREADS if (!r.error.empty()) {
    PyErr_SetString(PyExc_ValueError, r.error.c_str());
    return nullptr;
  }
  PyObject* cols = PyDict_New();
  if (cols == nullptr) return nullptr;
  for (int c = 0; c < kNumCols; ++c) {
    if (!q.want[c]) continue;
    Out& o = r.cols[c];
    o.data.resize(r.n * o.itemsize);
    PyObject* values = MakeColumn(std::move(o.data), static_cast<Py_ssize_t>(r.n),
                                  static_cast<Py_ssize_t>(o.itemsize), o.format);
    PyObject* nulls = Py_None;
    Py_INCREF(Py_None);
    if (values != nullptr && o.nullable) {
      o.null.resize(r.n);
      Py_DECREF(Py_None);
      nulls = MakeColumn(std::move(o.null), static_cast<Py_ssize_t>(r.n), 1, "?");
    }
    PyObject* pair = values && nulls ? PyTuple_Pack(2, values, nulls) : nullptr;
    Py_XDECREF(values);
    Py_XDECREF(nulls);
    if (pair == nullptr || PyDict_SetItemString(cols, kSpecs[c].name, pair) < 0) {
      Py_XDECREF(pair);
      Py_DECREF(cols);
      return nullptr;
    }
    Py_DECREF(pair);
  }
  PyObject* lanes = PyList_New(static_cast<Py_ssize_t>(r.lanes.size()));
  if (lanes == nullptr) {
    Py_DECREF(cols);
    return nullptr;
  }
  for (size_t i = 0; i < r.lanes.size(); ++i) {
    PyObject* s = PyUnicode_DecodeUTF8(r.lanes[i].data(),
                                       static_cast<Py_ssize_t>(r.lanes[i].size()), "replace");
    if (s == nullptr) {
      Py_DECREF(cols);
      Py_DECREF(lanes);
      return nullptr;
    }
    PyList_SET_ITEM(lanes, static_cast<Py_ssize_t>(i), s);
  }
  return Py_BuildValue("(KNNKK)", static_cast<unsigned long long>(r.n), cols, lanes,
                       static_cast<unsigned long long>(r.blocks_read),
                       static_cast<unsigned long long>(r.blocks_total));
}

PyMethodDef kMethods[] = {
    {"scan", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(ScanPy)),
     METH_VARARGS | METH_KEYWORDS,
     "scan(path, columns, ranks, names, cats, kinds, ts, dur, step): decode events."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "tracedb._tracedb_read",
                       "Columns of a trace database's events, decoded from its blocks.", -1,
                       kMethods};

}  // namespace

extern "C" PyMODINIT_FUNC PyInit__tracedb_read(void) {
  ColumnType.tp_name = "tracedb.Column";
  ColumnType.tp_basicsize = sizeof(ColumnObject);
  ColumnType.tp_flags = Py_TPFLAGS_DEFAULT;
  ColumnType.tp_doc = "An owned column buffer (wrap it with numpy.frombuffer).";
  ColumnType.tp_dealloc = ColumnDealloc;
  ColumnType.tp_as_buffer = &kColumnBuffer;
  if (PyType_Ready(&ColumnType) < 0) return nullptr;
  return PyModule_Create(&kModule);
}

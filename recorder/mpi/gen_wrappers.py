#!/usr/bin/env python3
"""Generates the MPI interposer's wrappers (C++) from mpi_functions.txt.

Run by CMake at build time:
    gen_wrappers.py --table mpi_functions.txt --out mpi_wrappers.cc

Each entry of the table (format in the table's header comment) becomes one
`extern "C" int MPI_X(...)` that calls PMPI_X with the arguments unchanged, returns its return
code unchanged, and records one event through the runtime in runtime.h / requests.h /
comm_registry.h. The templates below are the only place where wrapper code is written; a table
entry the generator cannot check (unknown kind or attribute, attribute naming a parameter that
does not exist, `st` used without `status=`) fails the build.
"""

import argparse
import re
import sys

KINDS = {
    # kind: (required attributes, optional attributes)
    "call": (set(), {"comm", "win", "seq", "bytes", "peer", "tag", "status", "when",
                     "message_out", "message_in", "entry_peer", "entry_tag"}),
    "start": ({"request"}, {"comm", "win", "seq", "bytes", "peer", "tag", "recv", "persistent",
                            "message_in"}),
    "start_one": ({"request"}, set()),
    "start_all": ({"count", "requests"}, set()),
    "wait_one": ({"request", "status"}, {"flag"}),
    "wait_any": ({"count", "requests", "index", "status"}, {"flag"}),
    "wait_all": ({"count", "requests", "statuses"}, {"flag"}),
    "wait_some": ({"count", "requests", "outcount", "indices", "statuses"}, set()),
    "request_free": ({"request"}, set()),
    "comm_new": ({"comm", "newcomm"}, {"seq"}),
    "comm_idup": ({"comm", "newcomm", "request"}, {"seq"}),
    "comm_free": ({"comm"}, set()),
    "win_new": ({"comm", "win"}, {"seq", "bytes"}),
    "win_free": ({"win"}, {"seq"}),
    "abort": ({"comm"}, set()),
}
# Attributes whose value names a parameter.
PARAM_ATTRS = {"comm", "win", "status", "message_out", "message_in", "request", "count",
               "requests", "index", "flag", "statuses", "outcount", "indices", "newcomm"}
FLAG_ATTRS = {"seq", "recv", "persistent"}


class TableError(Exception):
    pass


class Entry:
    def __init__(self, name, params, kind, attrs, line):
        self.name = name
        self.params = params  # [(type, name)]
        self.kind = kind
        self.attrs = attrs
        self.line = line

    @property
    def pnames(self):
        return [n for _, n in self.params]


def parse_param(text, where):
    text = " ".join(text.split())
    m = re.fullmatch(r"(.+?)\s*\b([A-Za-z_]\w*)\s*(\[\])?", text)
    if not m:
        raise TableError(f"{where}: cannot parse parameter '{text}'")
    ptype = m.group(1).strip()
    if m.group(3):
        ptype += "*"
    ptype = re.sub(r"\s*\*", "*", ptype)
    return ptype, m.group(2)


def parse_table(path):
    entries = []
    current = None
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            if not line[0].isspace():
                m = re.fullmatch(r"(MPI_\w+)\((.*)\)", line.strip())
                if not m:
                    raise TableError(f"{where}: expected a prototype 'MPI_X(...)'")
                params = []
                if m.group(2).strip() not in ("", "void"):
                    params = [parse_param(p, where) for p in m.group(2).split(",")]
                current = Entry(m.group(1), params, None, {}, where)
                entries.append(current)
                continue
            if current is None:
                raise TableError(f"{where}: attributes before any prototype")
            tokens = line.split()
            if current.kind is None:
                current.kind = tokens.pop(0)
            for tok in tokens:
                key, eq, value = tok.partition("=")
                if key in current.attrs:
                    raise TableError(f"{where}: attribute '{key}' given twice")
                current.attrs[key] = value if eq else True
    names = set()
    for e in entries:
        validate(e)
        if e.name in names:
            raise TableError(f"{e.line}: {e.name} listed twice")
        names.add(e.name)
    return entries


def validate(e):
    if e.kind not in KINDS:
        raise TableError(f"{e.line}: {e.name}: unknown kind '{e.kind}'")
    required, optional = KINDS[e.kind]
    for key in required:
        if key not in e.attrs:
            raise TableError(f"{e.line}: {e.name}: kind '{e.kind}' needs '{key}='")
    for key, value in e.attrs.items():
        if key not in required and key not in optional:
            raise TableError(f"{e.line}: {e.name}: attribute '{key}' not allowed for '{e.kind}'")
        if key in FLAG_ATTRS and value is not True:
            raise TableError(f"{e.line}: {e.name}: '{key}' takes no value")
        if key not in FLAG_ATTRS and value is True:
            raise TableError(f"{e.line}: {e.name}: '{key}' needs a value")
        if key in PARAM_ATTRS and value not in e.pnames:
            raise TableError(f"{e.line}: {e.name}: '{key}={value}' is not a parameter")
    if "comm" in e.attrs and "win" in e.attrs and e.kind not in ("win_new",):
        raise TableError(f"{e.line}: {e.name}: both comm= and win=")
    if "seq" in e.attrs and e.kind in ("call", "start") and not (
            "comm" in e.attrs or "win" in e.attrs):
        raise TableError(f"{e.line}: {e.name}: 'seq' needs comm= or win=")
    for key in ("entry_peer", "entry_tag"):
        if isinstance(e.attrs.get(key), str) and re.search(r"\bst\b", e.attrs[key]):
            raise TableError(f"{e.line}: {e.name}: '{key}' is known at entry: it cannot use st")
    for key in ("bytes", "peer", "tag", "when"):
        expr = e.attrs.get(key)
        if isinstance(expr, str):
            if re.search(r"\bst\b", expr) and "status" not in e.attrs:
                raise TableError(f"{e.line}: {e.name}: '{key}' uses st without status=")
            if re.search(r"\bhs\b", expr) and not ("comm" in e.attrs or "win" in e.attrs):
                raise TableError(f"{e.line}: {e.name}: '{key}' uses hs without comm= or win=")


# ---------------------------------------------------------------------------------------------
# Templates

def signature(e):
    if not e.params:
        return "void"
    return ", ".join(f"{t} {n}" for t, n in e.params)


def call_args(e, replace=None):
    replace = replace or {}
    return ", ".join(replace.get(n, n) for n in e.pnames)


def var(e):
    return f"k{e.name}"


def passthrough(e):
    return f"P{e.name}({call_args(e)})"


def head(e):
    return [f'extern "C" TRACEDB_MPI_EXPORT int {e.name}({signature(e)}) {{',
            f"  if (!rt::Tracking()) return {passthrough(e)};"]


def handle_lookup(e):
    if "comm" in e.attrs:
        return f"rt::FindComm({e.attrs['comm']})"
    return f"rt::FindWin({e.attrs['win']})"


def field_lines(e, indent):
    out = []
    pad = " " * indent
    if "bytes" in e.attrs:
        out.append(f"{pad}rt::SetBytes(&a, {e.attrs['bytes']});")
    if "peer" in e.attrs:
        out.append(f"{pad}rt::SetPeer(&a, {e.attrs['peer']});")
    if "tag" in e.attrs:
        out.append(f"{pad}rt::SetTag(&a, {e.attrs['tag']});")
    return out


def gen_call_or_start(e):
    """`call` and `start`: a recorded call with arguments from the table."""
    has_handle = "comm" in e.attrs or "win" in e.attrs
    seq = "seq" in e.attrs
    lines = head(e)
    if seq:
        lines += [f"  rt::HandleState* const hs = {handle_lookup(e)};",
                  "  const uint64_t seq = rt::NextSeq(hs);"]
    if "message_in" in e.attrs:
        lines.append(f"  const rt::MessageComm mc = rt::TakeMessage(*{e.attrs['message_in']});")
    lines.append(f"  if (!tracedb_enabled()) return {passthrough(e)};")
    if has_handle and not seq:
        lines.append(f"  rt::HandleState* const hs = {handle_lookup(e)};")
    replace = {}
    if "status" in e.attrs:
        s = e.attrs["status"]
        lines += ["  MPI_Status st_local;",
                  f"  MPI_Status* const st = {s} == MPI_STATUS_IGNORE ? &st_local : {s};"]
        replace[s] = "st"
    if e.kind == "call":
        # A blocking call is a begin at entry and an end at exit: a call that never returns
        # (a hang, a crash) is still in the trace, as an open span (docs/mpi-capture.md).
        lines.append("  tracedb_args a0{};")
        if has_handle:
            lines.append("  rt::SetComm(&a0, hs);")
            if seq:
                lines.append("  rt::SetSeq(&a0, hs, seq);")
        if "message_in" in e.attrs:
            lines.append("  rt::SetComm(&a0, mc);")
        lines += entry_field_lines(e)
        lines += [f"  tracedb_begin_ex({var(e)}.id(), TRACEDB_CAT_MPI, 0, &a0);",
                  f"  const int rc = P{e.name}({call_args(e, replace)});",
                  "  tracedb_args a{};"]
    else:
        lines += ["  const int64_t t0 = tracedb_now();",
                  f"  const int rc = P{e.name}({call_args(e, replace)});",
                  "  const int64_t t1 = tracedb_now();",
                  "  tracedb_args a{};"]
    if has_handle:
        lines.append("  rt::SetComm(&a, hs);")
        if seq:
            lines.append("  rt::SetSeq(&a, hs, seq);")
    if "message_in" in e.attrs:
        lines.append("  rt::SetComm(&a, mc);")
    cond = "rc == MPI_SUCCESS"
    if "when" in e.attrs:
        cond += f" && ({e.attrs['when']})"
    body = field_lines(e, 4)
    if "message_out" in e.attrs:
        body.append(f"    rt::RememberMessage(*{e.attrs['message_out']}, hs);")
    if e.kind == "start":
        req = e.attrs["request"]
        flags = []
        if "recv" in e.attrs:
            flags.append("rt::ReqInfo::kRecv")
        if "persistent" in e.attrs:
            flags.append("rt::ReqInfo::kPersistent")
        flags_expr = " | ".join(flags) if flags else "0"
        if "persistent" in e.attrs:
            body.append(f"    rt::TrackRequest(*{req}, a, {flags_expr});")
        else:
            body += ["    rt::SetFlow(&a, rt::NewFlow());",
                     f"    if (!rt::TrackRequest(*{req}, a, {flags_expr})) "
                     "a.fields &= ~TRACEDB_ARG_FLOW;"]
    if body:
        lines += [f"  if ({cond}) {{"] + body + ["  }"]
    if e.kind == "call":
        lines += [f"  tracedb_end_ex({var(e)}.id(), TRACEDB_CAT_MPI, 0, &a);", "  return rc;", "}"]
    else:
        lines += [f"  rt::Emit({var(e)}, t0, t1, &a);", "  return rc;", "}"]
    return lines


def entry_field_lines(e):
    """The begin event's fields: those known before the call. `entry_peer=`/`entry_tag=` give
    them where the end's come from the status; a value that reads the status, or is guarded
    by `when=`, waits for the end."""
    if "when" in e.attrs:
        return []
    out = []
    for field, setter in (("bytes", "SetBytes"), ("peer", "SetPeer"), ("tag", "SetTag")):
        expr = e.attrs.get("entry_" + field, e.attrs.get(field))
        if expr is None or re.search(r"\bst\b", expr):
            continue
        out.append(f"  rt::{setter}(&a0, {expr});")
    return out


def timed_call(e, replace=None):
    return ["  const int64_t t0 = rec ? tracedb_now() : 0;",
            f"  const int rc = P{e.name}({call_args(e, replace)});",
            "  const int64_t t1 = rec ? tracedb_now() : 0;"]


def gen_wait(e):
    """The Wait/Test families: completion of remembered requests (requests.h)."""
    lines = head(e)
    lines += ["  const bool rec = tracedb_enabled() != 0;",
              f"  if (!rec && rt::g_requests.Size() == 0) return {passthrough(e)};"]
    a = e.attrs
    flag = a.get("flag")
    ok_flag = f" && *{flag} != 0" if flag else ""
    if e.kind == "wait_one":
        s = a["status"]
        lines += [f"  const uintptr_t key = rt::Key(*{a['request']});",
                  "  MPI_Status st_local;",
                  f"  MPI_Status* const st = {s} == MPI_STATUS_IGNORE ? &st_local : {s};"]
        lines += timed_call(e, {s: "st"})
        completed = "true" if not flag else f"rc == MPI_SUCCESS{ok_flag}"
        lines.append(f"  rt::AfterWaitOne({var(e)}, rec, t0, t1, rc, key, {completed}, st);")
    elif e.kind == "wait_any":
        s = a["status"]
        idx = a["index"]
        lines += [f"  const rt::KeyCopy keys({a['count']}, {a['requests']});",
                  "  MPI_Status st_local;",
                  f"  MPI_Status* const st = {s} == MPI_STATUS_IGNORE ? &st_local : {s};"]
        lines += timed_call(e, {s: "st"})
        lines += [f"  const bool done = rc == MPI_SUCCESS{ok_flag} && *{idx} != MPI_UNDEFINED &&",
                  "                    keys.data() != nullptr;",
                  f"  rt::AfterWaitOne({var(e)}, rec, t0, t1, rc, done ? keys.data()[*{idx}] : 0, "
                  "done, st);"]
    elif e.kind == "wait_all":
        s = a["statuses"]
        lines += [f"  const rt::KeyCopy keys({a['count']}, {a['requests']});",
                  f"  const rt::StatusArray sts(rec ? {a['count']} : 0, {s});"]
        lines += timed_call(e, {s: "sts.get()"})
        completed = "true" if not flag else f"rc == MPI_SUCCESS{ok_flag}"
        lines.append(f"  rt::AfterWaitAll({var(e)}, rec, t0, t1, rc, {a['count']}, keys.data(), "
                     f"{completed}, sts.readable());")
    elif e.kind == "wait_some":
        s = a["statuses"]
        out = a["outcount"]
        lines += [f"  const rt::KeyCopy keys({a['count']}, {a['requests']});",
                  f"  const rt::StatusArray sts(rec ? {a['count']} : 0, {s});"]
        lines += timed_call(e, {s: "sts.get()"})
        lines += [f"  const int n = rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS ? *{out} : "
                  "MPI_UNDEFINED;",
                  f"  rt::AfterWaitSome({var(e)}, rec, t0, t1, rc, keys.data(), n, "
                  f"{a['indices']}, sts.readable());"]
    lines += ["  return rc;", "}"]
    return lines


def gen_start_one(e):
    lines = head(e)
    lines += ["  const bool rec = tracedb_enabled() != 0;",
              f"  if (!rec) return {passthrough(e)};"]
    lines += timed_call(e)
    if e.kind == "start_one":
        lines.append(f"  rt::AfterStart({var(e)}, rec, t0, t1, rc, rt::Key(*{e.attrs['request']}));")
    else:
        lines.append(f"  rt::AfterStartAll({var(e)}, rec, t0, t1, rc, {e.attrs['count']}, "
                     f"{e.attrs['requests']});")
    lines += ["  return rc;", "}"]
    return lines


def gen_request_free(e):
    lines = head(e)
    lines += [f"  const uintptr_t key = rt::Key(*{e.attrs['request']});",
              "  const bool rec = tracedb_enabled() != 0;"]
    lines += timed_call(e)
    lines += [f"  rt::AfterRequestFree({var(e)}, rec, t0, t1, rc, key);", "  return rc;", "}"]
    return lines


def gen_comm_new(e):
    """Communicator creation: the new one is registered (collectively) after the call."""
    seq = "seq" in e.attrs
    lines = head(e)
    lines.append(f"  rt::HandleState* const hs = rt::FindComm({e.attrs['comm']});")
    if seq:
        lines.append("  const uint64_t seq = rt::NextSeq(hs);")
    lines.append("  const bool rec = tracedb_enabled() != 0;")
    lines += timed_call(e)
    lines.append("  tracedb_args a{};")
    lines.append("  rt::SetComm(&a, hs);")
    if seq:
        lines.append("  rt::SetSeq(&a, hs, seq);")
    nc = e.attrs["newcomm"]
    if e.kind == "comm_new":
        lines.append(f"  if (rc == MPI_SUCCESS) rt::RegisterComm(*{nc});")
    else:  # comm_idup: the id agreement completes with the request
        req = e.attrs["request"]
        lines += ["  if (rc == MPI_SUCCESS) {",
                  "    if (rec) rt::SetFlow(&a, rt::NewFlow());",
                  f"    rt::PendingIdup* const p = rt::BeginIdup({e.attrs['comm']}, {nc});",
                  "    // Out of memory: the new communicator stays unknown (and `p`, whose "
                  "agreement",
                  "    // may still be running, is leaked on purpose).",
                  f"    if (p == nullptr || !rt::TrackRequest(*{req}, a, 0, p)) "
                  "a.fields &= ~TRACEDB_ARG_FLOW;",
                  "  }"]
    lines += [f"  if (rec) rt::Emit({var(e)}, t0, t1, &a);", "  return rc;", "}"]
    return lines


def gen_comm_free(e):
    c = e.attrs["comm"]
    lines = head(e)
    lines += [f"  const MPI_Comm handle = *{c};",
              "  const bool rec = tracedb_enabled() != 0;",
              "  tracedb_args a{};",
              "  rt::SetComm(&a, rt::FindComm(handle));"]
    lines += timed_call(e)
    lines += ["  if (rc == MPI_SUCCESS) rt::UnregisterComm(handle);",
              f"  if (rec) rt::Emit({var(e)}, t0, t1, &a);", "  return rc;", "}"]
    return lines


def gen_win_new(e):
    seq = "seq" in e.attrs
    lines = head(e)
    lines.append(f"  rt::HandleState* const hs = rt::FindComm({e.attrs['comm']});")
    if seq:
        lines.append("  const uint64_t seq = rt::NextSeq(hs);")
    lines.append("  const bool rec = tracedb_enabled() != 0;")
    lines += timed_call(e)
    lines += [f"  if (rc == MPI_SUCCESS) rt::RegisterWin(*{e.attrs['win']}, {e.attrs['comm']});",
              "  if (!rec) return rc;",
              "  tracedb_args a{};",
              "  rt::SetComm(&a, hs);"]
    if seq:
        lines.append("  rt::SetSeq(&a, hs, seq);")
    body = field_lines(e, 4)
    if body:
        lines += ["  if (rc == MPI_SUCCESS) {"] + body + ["  }"]
    lines += [f"  rt::Emit({var(e)}, t0, t1, &a);", "  return rc;", "}"]
    return lines


def gen_win_free(e):
    w = e.attrs["win"]
    lines = head(e)
    lines += [f"  const MPI_Win handle = *{w};",
              "  rt::HandleState* const hs = rt::FindWin(handle);",
              "  tracedb_args a{};",
              "  rt::SetComm(&a, hs);"]
    if "seq" in e.attrs:
        lines.append("  rt::SetSeq(&a, hs, rt::NextSeq(hs));")
    lines.append("  const bool rec = tracedb_enabled() != 0;")
    lines += timed_call(e)
    lines += ["  if (rc == MPI_SUCCESS) rt::UnregisterWin(handle);",
              f"  if (rec) rt::Emit({var(e)}, t0, t1, &a);", "  return rc;", "}"]
    return lines


def gen_abort(e):
    return [f'extern "C" TRACEDB_MPI_EXPORT int {e.name}({signature(e)}) {{',
            "  if (rt::Tracking() && tracedb_enabled()) {",
            "    const int64_t t = tracedb_now();",
            "    tracedb_args a{};",
            f"    rt::SetComm(&a, rt::FindComm({e.attrs['comm']}));",
            f"    rt::Emit({var(e)}, t, t, &a);",
            "    tracedb_flush();  // the process is about to die",
            "  }",
            f"  return {passthrough(e)};",
            "}"]


GENERATORS = {
    "call": gen_call_or_start,
    "start": gen_call_or_start,
    "start_one": gen_start_one,
    "start_all": gen_start_one,
    "wait_one": gen_wait,
    "wait_any": gen_wait,
    "wait_all": gen_wait,
    "wait_some": gen_wait,
    "request_free": gen_request_free,
    "comm_new": gen_comm_new,
    "comm_idup": gen_comm_new,
    "comm_free": gen_comm_free,
    "win_new": gen_win_new,
    "win_free": gen_win_free,
    "abort": gen_abort,
}


def generate(entries, table_name):
    out = [
        f"// GENERATED by recorder/mpi/gen_wrappers.py from {table_name}. Do not edit: change",
        "// the table or the generator's templates.",
        "//",
        f"// {len(entries)} PMPI wrappers for the tracedb MPI interposer (docs/mpi-capture.md).",
        "// Each calls PMPI_* with its arguments unchanged and returns its return code unchanged.",
        "// Thread safety: as thread-safe as the MPI library (MPI_THREAD_MULTIPLE included); the",
        "// runtime they call is thread-safe.",
        "#include <cstdint>",
        "",
        '#include "recorder/mpi/coll_bytes.h"',
        '#include "recorder/mpi/comm_registry.h"',
        '#include "recorder/mpi/requests.h"',
        '#include "recorder/mpi/runtime.h"',
        "",
        "namespace rt = tracedb::mpi;",
        "",
        "namespace {",
    ]
    for e in entries:
        out.append(f'rt::LazyName {var(e)}("{e.name}");')
    out += ["}  // namespace", ""]
    for e in entries:
        out += GENERATORS[e.kind](e)
        out.append("")
    return "\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--list", help="also write the wrapped routine names, one per line, here")
    args = ap.parse_args(argv)
    try:
        entries = parse_table(args.table)
    except TableError as err:
        print(f"gen_wrappers.py: {err}", file=sys.stderr)
        return 1
    text = generate(entries, args.table.rsplit("/", 1)[-1])
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    if args.list:
        with open(args.list, "w", encoding="utf-8") as f:
            f.write("".join(e.name + "\n" for e in entries))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

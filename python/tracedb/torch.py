"""tracedb.torch: records a torch.distributed job with no change to its code.

Under `tracedb record` this is installed automatically (python/_boot); a program that starts the
recorder itself can call `tracedb.torch.install()` after `import torch`. What is recorded on every
rank (docs/python.md, "PyTorch capture"):
  - every c10d operation (all_reduce, broadcast, all_gather, reduce_scatter, barrier, send/recv,
    isend/irecv, ... and DDP's bucketed gradient allreduces) from start to completion (a begin
    and an end, so that one that never completes is kept as an open span), cat "comm",
    with bytes, process group (`comm`), a per-group sequence number (`seq`, collectives) and peer
    or root (a group rank): the C++ RecordFunction observer in _tracedb_torch;
  - forward (DDP), backward, optimizer.step and optimizer.zero_grad spans, cat "compute", and the
    training step number (after each optimizer step, the next zero_grad or DDP forward starts
    the next step);
  - clock alignment: a min-RTT ping-pong of every rank with rank 0 over the default process group
    at init_process_group and at destroy_process_group (tracedb_clock_sync), as the MPI capture
    does at MPI_Init/MPI_Finalize.
The Python wrappers installed here only tell the observer which group and peer a call is for;
they do not time anything themselves.
"""
import functools
import inspect
import os
import sys
import threading

import tracedb

# Communicator ids of torch process groups: the default group, then one per new_group() in call
# order (new_group must be called by every rank in the same order, so the ids agree across ranks).
# The high bit keeps them apart from the MPI capture's ids in a job that records both.
COMM_BASE = 0x40000000
WORLD_COMM = COMM_BASE

_lock = threading.Lock()
_patched = False
_initialised = False
_obs = None
_groups = {}  # id(ProcessGroup) -> (comm id, members as global ranks or None for the world)
_group_refs = []  # keeps those ProcessGroups alive, so their id() is never reused
_next_group = [1]
_c10d = None

_SYNC_TAG = 31415
_SYNC_MIN_ROUNDS = 20
_SYNC_MAX_ROUNDS = 50
_SYNC_GOOD_RTT_NS = 20_000

# torch.distributed functions whose process group (and peer or root) the observer is told:
# name -> (what the call issues, the parameter that holds the peer or root as a global rank).
# "coll": one collective; "p2p": one send or receive; "outer": a call made of other calls.
# (Sequence numbers are taken by the observer, in issue order, for every collective.)
_COMM_FUNCTIONS = {
    "all_reduce": ("coll", None), "all_reduce_coalesced": ("coll", None),
    "all_reduce_multigpu": ("coll", None), "broadcast": ("coll", "src"),
    "broadcast_multigpu": ("coll", "src"), "reduce": ("coll", "dst"),
    "reduce_multigpu": ("coll", "dst"), "all_gather": ("coll", None),
    "all_gather_multigpu": ("coll", None), "all_gather_into_tensor": ("coll", None),
    "_all_gather_base": ("coll", None), "all_gather_coalesced": ("coll", None),
    "gather": ("coll", "dst"), "scatter": ("coll", "src"), "reduce_scatter": ("coll", None),
    "reduce_scatter_multigpu": ("coll", None), "reduce_scatter_tensor": ("coll", None),
    "_reduce_scatter_base": ("coll", None), "all_to_all": ("coll", None),
    "all_to_all_single": ("coll", None), "barrier": ("coll", None),
    "monitored_barrier": ("outer", None), "send": ("p2p", "dst"), "recv": ("p2p", "src"),
    "isend": ("p2p", "dst"), "irecv": ("p2p", "src"), "all_gather_object": ("outer", None),
    "gather_object": ("outer", "dst"), "broadcast_object_list": ("outer", "src"),
    "scatter_object_list": ("outer", "src"),
}


def _observer():
    global _obs
    if _obs is None:
        from tracedb import _tracedb_torch
        _obs = _tracedb_torch
    return _obs


def _group_info(group):
    """(comm id, members) of a process group argument (None: the default group)."""
    if group is None or group is _c10d.GroupMember.WORLD:
        return WORLD_COMM, None
    return _groups.get(id(group))


def _wrap_comm(name, fn):
    sig = inspect.signature(fn)
    params = list(sig.parameters)
    group_pos = params.index("group") if "group" in params else None
    what, peer_name = _COMM_FUNCTIONS[name]
    single = what != "outer"  # the call issues one operation: the span starts at the call
    peer_pos = params.index(peer_name) if peer_name in params else None
    peer_default = None
    if peer_pos is not None:
        d = sig.parameters[peer_name].default
        peer_default = d if isinstance(d, int) else None
    group_default = sig.parameters["group"].default if group_pos is not None else None

    @functools.wraps(fn)
    def traced(*args, **kwargs):
        if not _initialised:
            return fn(*args, **kwargs)
        if "group" in kwargs:
            group = kwargs["group"]
        elif group_pos is not None and len(args) > group_pos:
            group = args[group_pos]
        else:
            group = group_default
        info = _group_info(group)
        if info is None:  # a group this rank is no member of, or one made before install()
            return fn(*args, **kwargs)
        comm, members = info
        peer = None
        if peer_pos is not None:
            if peer_name in kwargs:
                peer = kwargs[peer_name]
            elif len(args) > peer_pos:
                peer = args[peer_pos]
            else:
                peer = peer_default
            if isinstance(peer, int) and members is not None:
                peer = members.index(peer) if peer in members else None
            elif not isinstance(peer, int):
                peer = None
        _obs.push(comm, peer, single)
        try:
            return fn(*args, **kwargs)
        finally:
            _obs.pop()

    traced.__tracedb_wrapped__ = fn
    return traced


def _sync_clocks():
    """Min-RTT clock synchronisation of every rank with rank 0 over the default process group
    (docs/python.md, "Clocks"). Collective: every rank calls it."""
    import torch
    c10d = _c10d
    rank, size = c10d.get_rank(), c10d.get_world_size()
    send = getattr(c10d.send, "__tracedb_wrapped__", c10d.send)
    recv = getattr(c10d.recv, "__tracedb_wrapped__", c10d.recv)
    buf = torch.zeros(1, dtype=torch.int64)
    _obs.push(WORLD_COMM, suppress=True)
    try:
        if rank == 0:
            for peer in range(1, size):
                while True:
                    recv(buf, src=peer, tag=_SYNC_TAG)
                    last = int(buf[0])
                    buf[0] = tracedb.now()
                    send(buf, dst=peer, tag=_SYNC_TAG)
                    if last:
                        break
            tracedb.clock_sync(0, tracedb.now(), 0, 0)
            return
        best_rtt, best = None, None
        for i in range(_SYNC_MAX_ROUNDS):
            last = (i + 1 == _SYNC_MAX_ROUNDS or
                    (i + 1 >= _SYNC_MIN_ROUNDS and best_rtt is not None and
                     best_rtt <= _SYNC_GOOD_RTT_NS))
            buf[0] = 1 if last else 0
            t1 = tracedb.now()
            send(buf, dst=0, tag=_SYNC_TAG)
            recv(buf, src=0, tag=_SYNC_TAG)
            t2 = tracedb.now()
            rtt = t2 - t1
            if best_rtt is None or rtt < best_rtt:
                best_rtt = rtt
                local = t1 + rtt // 2
                best = (local, int(buf[0]) - local, (rtt + 1) // 2)
            if last:
                break
        tracedb.clock_sync(0, *best)
    finally:
        _obs.pop()


def _after_init():
    """Runs on every rank once the default process group exists."""
    global _initialised
    c10d = _c10d
    rank, size = c10d.get_rank(), c10d.get_world_size()
    obs = _observer()
    tracedb.comm_define(WORLD_COMM, size, rank, list(range(size)))
    obs.install(WORLD_COMM)
    _patch_training()
    _initialised = True
    if c10d.get_backend() == "gloo" or os.environ.get("TRACEDB_TORCH_SYNC") == "1":
        _sync_clocks()


def _wrap_init(fn):
    @functools.wraps(fn)
    def init_process_group(*args, **kwargs):
        with tracedb.span("init_process_group", "phase"):
            result = fn(*args, **kwargs)
        try:
            _after_init()
        except Exception as e:
            print(f"tracedb: PyTorch capture not started: {type(e).__name__}: {e}",
                  file=sys.stderr)
        return result
    return init_process_group


def _wrap_new_group(fn):
    @functools.wraps(fn)
    def new_group(*args, **kwargs):
        pg = fn(*args, **kwargs)
        with _lock:
            comm = COMM_BASE + _next_group[0]
            _next_group[0] += 1
        if not _initialised or pg is None or pg is _c10d.GroupMember.NON_GROUP_MEMBER:
            return pg
        ranks = kwargs.get("ranks", args[0] if args else None)
        size = _c10d.get_world_size()
        members = sorted(ranks) if ranks else list(range(size))
        me = _c10d.get_rank()
        if me in members:
            _groups[id(pg)] = (comm, members)
            _group_refs.append(pg)
            tracedb.comm_define(comm, len(members), members.index(me), members)
        return pg
    return new_group


def _wrap_destroy(fn):
    @functools.wraps(fn)
    def destroy_process_group(group=None):
        global _initialised
        if _initialised and group is None and _c10d.is_initialized():
            try:
                if _c10d.get_backend() == "gloo" or os.environ.get("TRACEDB_TORCH_SYNC") == "1":
                    _sync_clocks()
            except Exception as e:
                print(f"tracedb: final clock sync failed: {type(e).__name__}: {e}",
                      file=sys.stderr)
            _initialised = False
        return fn(group)
    return destroy_process_group


# The process group of the DDP module whose forward ran last on this thread: its Reducer issues
# the bucket allreduces from C++ during the backward pass that follows, on this thread (CPU).
_ddp_comm = threading.local()


def _call_in_group(comm, fn, *args, **kwargs):
    """fn(*args, **kwargs) with the operations it issues labelled as group `comm` (None or the
    default group: as they are)."""
    if comm is None or comm == WORLD_COMM or not _initialised:
        return fn(*args, **kwargs)
    _obs.push(comm)
    try:
        return fn(*args, **kwargs)
    finally:
        _obs.pop()


def _patch_ddp():
    """DDP over a sub-group: its construction, forward and (through backward) bucket
    allreduces are labelled with that group."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    if getattr(DDP.__init__, "__tracedb_wrapped__", None) is not None:
        return
    real_init, real_forward = DDP.__init__, DDP.forward
    params = list(inspect.signature(real_init).parameters)  # self, module, ..., process_group
    pg_pos = params.index("process_group") if "process_group" in params else None

    def comm_of(group):
        info = _group_info(group)
        return info[0] if info else None

    @functools.wraps(real_init)
    def __init__(self, *args, **kwargs):
        group = kwargs.get("process_group")
        if group is None and pg_pos is not None and len(args) >= pg_pos:
            group = args[pg_pos - 1]
        return _call_in_group(comm_of(group), real_init, self, *args, **kwargs)

    @functools.wraps(real_forward)
    def forward(self, *args, **kwargs):
        comm = comm_of(getattr(self, "process_group", None))
        _ddp_comm.value = comm
        return _call_in_group(comm, real_forward, self, *args, **kwargs)

    __init__.__tracedb_wrapped__ = real_init
    forward.__tracedb_wrapped__ = real_forward
    DDP.__init__ = __init__
    DDP.forward = forward


def _patch_training():
    """backward spans (forward and the optimizer come from the observer); DDP's group."""
    import torch.autograd
    _patch_ddp()
    if getattr(torch.autograd.backward, "__tracedb_wrapped__", None) is not None:
        return
    real_backward = torch.autograd.backward

    @functools.wraps(real_backward)
    def backward(*args, **kwargs):
        with tracedb.span("backward", "compute"):
            return _call_in_group(getattr(_ddp_comm, "value", None), real_backward, *args,
                                  **kwargs)

    backward.__tracedb_wrapped__ = real_backward
    torch.autograd.backward = backward


def patch_c10d(c10d):
    """Wraps the functions of torch.distributed.distributed_c10d (the module object). Called
    right after that module is executed, so that torch.distributed re-exports the wrappers."""
    global _patched, _c10d
    with _lock:
        if _patched:
            return
        _patched = True
        _c10d = c10d
    targets = [c10d]
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist is not c10d:
        targets.append(dist)
    replacements = {}
    for name in _COMM_FUNCTIONS:
        fn = getattr(c10d, name, None)
        if fn is not None and callable(fn):
            replacements[name] = _wrap_comm(name, fn)
    replacements["init_process_group"] = _wrap_init(c10d.init_process_group)
    replacements["new_group"] = _wrap_new_group(c10d.new_group)
    replacements["destroy_process_group"] = _wrap_destroy(c10d.destroy_process_group)
    for module in targets:
        for name, fn in replacements.items():
            if getattr(module, name, None) is not None:
                setattr(module, name, fn)
    if c10d.is_initialized():  # installed after init_process_group
        _after_init()


def install():
    """Installs the PyTorch capture in this process (after `import torch.distributed`); the
    default process group may or may not exist yet."""
    import torch.distributed.distributed_c10d as c10d
    patch_c10d(c10d)


def stats():
    """The observer's counters: {"ops": communication operations, "steps": DDP steps}."""
    return _observer().stats()

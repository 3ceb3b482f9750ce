"""Installs tracedb.torch when the program imports torch.distributed (used by python/_boot).

Importing torch costs a second or more, so the start-up hook never imports it: a finder placed
first on sys.meta_path waits for torch.distributed.distributed_c10d to be executed and then wraps
its functions (tracedb.torch.patch_c10d), before torch.distributed re-exports them. Programs that
never import torch pay one dictionary lookup per import.
"""
import sys

_TARGET = "torch.distributed.distributed_c10d"


class _C10dFinder:
    """A meta path finder that only decorates the real loader of one module."""

    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            _remove()
            try:
                from tracedb import torch as tracedb_torch
                tracedb_torch.patch_c10d(module)
            except Exception as e:  # never stop the recorded program
                print(f"tracedb: PyTorch capture not installed: {type(e).__name__}: {e}",
                      file=sys.stderr)

        spec.loader.exec_module = exec_module
        return spec


_finder = _C10dFinder()


def _remove():
    try:
        sys.meta_path.remove(_finder)
    except ValueError:
        pass


def install_import_hook():
    """Arranges for the PyTorch capture to be installed when torch.distributed is imported (at
    once if it already is)."""
    module = sys.modules.get(_TARGET)
    if module is not None:
        from tracedb import torch as tracedb_torch
        tracedb_torch.patch_c10d(module)
        return
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)

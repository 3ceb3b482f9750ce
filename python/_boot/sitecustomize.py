"""tracedb's start-up hook for Python ranks under `tracedb record` (docs/python.md).

`tracedb record` puts this directory first on PYTHONPATH, so every Python process of the job runs
this at start-up, before the user's script:
  1. under an MPI launcher (Open MPI, MPICH/Hydra, Slurm) it sets the variables torch.distributed's
     env:// initialisation reads (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
     MASTER_PORT) from the launcher's own, unless they are set already;
  2. with TRACEDB_DIR set it imports tracedb (recording starts) and arranges for the PyTorch
     capture (tracedb.torch) to be installed when the script imports torch.distributed;
  3. it then runs the sitecustomize this one hides (Debian's, a virtualenv's), if there is one.
Nothing here may stop the user's program: every failure is reported on stderr and ignored.
"""
import os
import sys


def _launcher_env():
    env = os.environ
    pairs = (
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
         "OMPI_COMM_WORLD_LOCAL_SIZE"),
        ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
        ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
    )
    for rank, size, local, local_size in pairs:
        if rank in env and size in env:
            env.setdefault("RANK", env[rank])
            env.setdefault("WORLD_SIZE", env[size])
            if local in env:
                env.setdefault("LOCAL_RANK", env[local])
            if local_size in env and env[local_size].isdigit():
                env.setdefault("LOCAL_WORLD_SIZE", env[local_size])
            break
    else:
        return
    if "TRACEDB_MASTER_ADDR" in env:
        env.setdefault("MASTER_ADDR", env["TRACEDB_MASTER_ADDR"])
    if "TRACEDB_MASTER_PORT" in env:
        env.setdefault("MASTER_PORT", env["TRACEDB_MASTER_PORT"])


def _chain():
    """Runs the next sitecustomize on sys.path (the one this module hides)."""
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        try:
            if os.path.abspath(entry or os.getcwd()) == here:
                continue
        except OSError:
            continue
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


def _start():
    try:
        import tracedb  # noqa: F401  (starts recording: TRACEDB_DIR)
    except ImportError as e:
        import glob
        import importlib.machinery
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        built = [os.path.basename(p)[len("_tracedb"):]
                 for p in glob.glob(os.path.join(here, "tracedb", "_tracedb.*"))]
        if built and not set(built) & set(importlib.machinery.EXTENSION_SUFFIXES):
            print(f"tracedb: no Python API and no PyTorch capture in {sys.executable} "
                  f"({sys.version.split()[0]}): the tracedb package in {here} was built for "
                  f"another Python ({', '.join(built)}); see docs/python.md", file=sys.stderr)
            return
        raise e
    import tracedb._autotorch
    tracedb._autotorch.install_import_hook()


try:
    _launcher_env()
    if os.environ.get("TRACEDB_DIR"):
        _start()
except Exception as e:  # never stop the program being recorded
    print(f"tracedb: Python start-up hook failed: {type(e).__name__}: {e}", file=sys.stderr)
try:
    _chain()
except Exception as e:
    print(f"tracedb: the site's own sitecustomize failed: {type(e).__name__}: {e}",
          file=sys.stderr)

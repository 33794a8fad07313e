"""A stand-in for Intel's oneCCL bindings for PyTorch (pip: oneccl_bind_pt).

install.sh puts it into a Python environment for batchkit's guide tests, on
machines where the real wheel cannot be installed. What batchkit and the
guides rely on is as in the real package: its directory (cwd) holds
env/setvars.sh, its version is the distribution's, bindings built for
another torch fail at import, and importing it registers the "ccl" backend
with torch.distributed. What it is not: "ccl" here is gloo under another
name; there is no oneCCL library.
"""
import os
from importlib import metadata

import torch
import torch.distributed as dist

cwd = os.path.dirname(os.path.abspath(__file__))
__version__ = metadata.version("oneccl_bind_pt")


def _release(v):
    return tuple(int(x) for x in v.split("+")[0].split("a")[0].split(".")[:3])


# Wheels are built for one torch release: 1.13.0 for torch 1.13.0,
# 1.12.100 for torch 1.12.1 (the patch times 100).
_major, _minor, _patch = _release(__version__)
if _release(torch.__version__) != (_major, _minor, _patch // 100):
    raise ImportError(f"{cwd}/lib/liboneccl_bindings_for_pytorch.so: undefined symbol (built for torch "
                      f"{_major}.{_minor}.{_patch // 100}, this is torch {torch.__version__})")


def _create(store, rank, size, timeout):
    return dist.ProcessGroupGloo(store, rank, size, timeout)


dist.Backend.register_backend("ccl", _create)

# A stand-in for the oneCCL bindings for PyTorch (>= 1.12): only what
# batchkit reads. Importing it must not be needed: the real one imports torch.
import os
raise ImportError("batchkit must find this package without importing it")
cwd = os.path.dirname(os.path.abspath(__file__))

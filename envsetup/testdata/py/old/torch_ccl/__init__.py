# A stand-in for torch_ccl (the oneCCL bindings before 1.12).
raise ImportError("batchkit must find this package without importing it")

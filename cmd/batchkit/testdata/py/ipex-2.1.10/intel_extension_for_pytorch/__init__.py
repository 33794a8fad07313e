# A stand-in that only carries a version, for batchkit doctor tests.
__version__ = "2.1.10+xpu"

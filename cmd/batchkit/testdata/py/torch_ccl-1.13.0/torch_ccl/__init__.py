# A stand-in that only carries a version, for batchkit doctor tests.
__version__ = "1.13.0"

"""The package version, below every module that records it (the tuning cache's key, `--version`)."""
__version__ = "0.1.0"

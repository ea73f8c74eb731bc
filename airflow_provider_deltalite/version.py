"""The package version, in a module of its own that imports nothing, so every layer may read it."""

__version__ = "0.1.0"

"""The package version, in a module of its own so that no submodule imports the package root."""

__version__ = "0.1.0"

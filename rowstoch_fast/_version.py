"""The package's version: the one place it is written (the wheel's metadata, ``rowstoch --version``,
``rowstoch_fast.__version__`` and the CMake package's version all read it)."""

__version__ = "0.2.0"

"""npsco's version, `npsco.__version__`: here, in the lowest layer, so that any module may name it (the run files and
`--version` do) without importing the package's public API above them all."""

__version__ = "0.1.0"

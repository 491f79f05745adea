"""The benchmark: `make bench` (`python -m bench`), or `python -m bench --quick` for a short run."""

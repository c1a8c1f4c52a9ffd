"""Console screens (help)."""

"""Console widgets: each renders parts of a ``tui.core.snapshot.Snapshot`` and computes nothing."""

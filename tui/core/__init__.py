"""Pure domain: record format, budget, statistics, verdict. Standard library only."""

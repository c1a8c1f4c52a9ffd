"""The outside world (files, HTTP, Prometheus, NVML, psutil). No Textual here."""

"""Upkeep beside the job path: the background loops (overdue retries, the DLQ janitor, retention, the gauges) and
the re-sealing of stored secrets."""

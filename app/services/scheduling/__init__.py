"""Recurring schedules: the API's service, their firings under the rate limit, and the scheduler's cycle."""

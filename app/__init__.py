"""A job queue service with signed webhook delivery."""

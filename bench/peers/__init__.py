"""Peers for the end-to-end scenario: the same N no-op tasks drained by Celery and by Dramatiq.

The modules `tasks`, `celery_app`, `dramatiq_app` and `enqueue` run in the peers' own virtualenv
(bench/.venv-peers, from requirements.txt here) and import nothing of the service; `venv` and `drain` run in
the bench's process and start them.
"""

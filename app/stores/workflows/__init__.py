"""Workflows' store: what follows each of a workflow's jobs' outcomes, written in the transaction that records the
outcome (`follow.py`, DESIGN rule 19). A workflow, its jobs and its edges are saved by the submit
(services/workflows.py) in one transaction."""

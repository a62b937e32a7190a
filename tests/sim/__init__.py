"""Deterministic simulation of tidelog replication: the real protocol core and
controller state machine on a seeded scheduler (see ``tests/README.md``)."""

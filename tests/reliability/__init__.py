"""Reliability tests: crash injection, storage faults, sustained load."""

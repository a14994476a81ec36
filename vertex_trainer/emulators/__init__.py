"""Loopback servers that speak the real wire protocols of the services vertex-trainer talks to.

Used by the test suite and by `vertex-trainer dev ...`; nothing here is imported by the normal
command path.
"""

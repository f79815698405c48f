"""Salient Poses engine (host-independent)."""

from sp_core.threads import passive_waiting

passive_waiting()

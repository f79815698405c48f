"""Salient Poses engine (host-independent)."""

"""Readers and writers of motion and key files."""

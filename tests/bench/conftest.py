"""Fixtures for bench/tune: a fresh data directory per test, the process affinity restored after each test."""

from __future__ import annotations

from freshkit import data_dir, restore_affinity

__all__ = ["data_dir", "restore_affinity"]

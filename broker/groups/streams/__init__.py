"""Streams groups (KIP-1071): the group coordinator's fourth group type."""

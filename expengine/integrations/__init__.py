"""Adapters for agent frameworks; each needs its own optional extra."""

"""Adapters that run other harnesses' agents on any substrate (optional extras)."""

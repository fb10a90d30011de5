"""The installed version of llm-connect (one place, read by the build and the ledger)."""

__version__ = "0.1.0"

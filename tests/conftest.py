"""Shared fixtures. Tests never reach the network: HF hub offline, loopback servers only."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Fixture modules, one per shared resource (each owned by one area of the suite).
pytest_plugins = [
    "tests.fixtures.openai_server",
    "tests.fixtures.databases",
]

"""``python -m llm_connect`` runs the CLI."""

from llm_connect.cli import main

main()

"""Memory Hub: local-first long-term memory for AI coding agents, kept in a Markdown vault."""

__version__ = "0.1.0"

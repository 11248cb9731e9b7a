"""Clients of services outside this process that Memory Hub may use when its owner configures them.

Below every stage: capture, retrieval, hooks, dream and eval may all import from here, and nothing
here imports a stage. Each client is optional: without its configuration, callers take their
deterministic path. Today: ``llm`` (a local OpenAI-compatible chat endpoint).
"""

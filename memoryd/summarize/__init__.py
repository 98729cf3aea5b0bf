"""Summarising: session summaries and unit one-liners, by the LLM or extractively, and the
triggers that decide when."""

"""Recall: ranked retrieval over units, search, context blocks inside a token budget, the
fence around them, what was served, and what retention archived."""

"""Ingest: transcript files -> adapters -> store (see ingestor.py)."""

"""Kept for the ingest callers' import path: the redactor lives in `memoryd.redact`."""

from memoryd.redact import REDACTED, Redactor

__all__ = ["REDACTED", "Redactor"]

"""The exception tree. Each error that can reach a client carries its HTTP status
and a stable machine-readable code; the server's middleware renders it."""

from __future__ import annotations


class MemorydError(Exception):
    status = 500
    code = "internal"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class ConfigError(MemorydError):
    code = "config"


class StoreError(MemorydError):
    code = "store"


class StoreUnavailableError(StoreError):
    """The shared database cannot be reached right now (fleet mode): nothing was
    written; the transcripts on disk keep what was not read, and memoryd retries with
    backoff (`memoryd.store.health`). Logged once per outage, not per request."""

    status = 503
    code = "store_unreachable"
    quiet = True


class BadRequestError(MemorydError):
    status = 400
    code = "bad_request"


class NotFoundError(MemorydError):
    status = 404
    code = "not_found"


class ConflictError(MemorydError):
    status = 409
    code = "conflict"


class AlreadyRunningError(MemorydError):
    code = "already_running"


class StorageFullError(MemorydError):
    """The disk (or the user's quota) is full: nothing was written, nothing was lost;
    retry once space is freed."""

    status = 507
    code = "disk_full"

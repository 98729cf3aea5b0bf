"""The persistent job queue and its worker pool."""

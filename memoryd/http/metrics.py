"""Prometheus metrics, one registry per application (no process globals)."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.latency = Histogram("memoryd_request_seconds", "HTTP request latency",
                                 ["method", "route", "status"], registry=r,
                                 buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5))
        self._children: dict[tuple[str, str, int], Any] = {}
        self.units = Gauge("memoryd_units", "Units stored", registry=r)
        self.sessions = Gauge("memoryd_sessions", "Sessions stored", registry=r)
        self.files = Gauge("memoryd_files", "Transcript files tracked", registry=r)
        self.bad_lines = Gauge("memoryd_bad_lines", "Bad transcript lines skipped", registry=r)
        self.unread = Gauge("memoryd_unread_bytes", "Bytes of transcripts not yet read", registry=r)
        self.queue = Gauge("memoryd_ingest_queue_depth", "Files waiting to be read", registry=r)
        self.lag = Gauge("memoryd_ingest_lag_seconds", "Latest file write to searchable",
                         registry=r)
        self.caught_up = Gauge("memoryd_caught_up", "1 when nothing is left to read", registry=r)
        self.q_running = Gauge("memoryd_queries_running", "search/context requests running",
                               registry=r)
        self.q_waiting = Gauge("memoryd_queries_waiting",
                               "search/context requests waiting for a slot", registry=r)
        self.q_rejected = Counter("memoryd_queries_rejected",
                                  "search/context requests turned away busy (503)", registry=r)
        self._rejected_seen = 0
        self.store = Gauge("memoryd_store_info", "The store this daemon uses (value 1)",
                           ["kind", "url", "namespace", "machine"], registry=r)
        self.machine_ingest = Gauge("memoryd_fleet_machine_last_ingest_timestamp_seconds",
                                    "Fleet mode: when each machine of the namespace last "
                                    "moved a cursor", ["machine"], registry=r)
        self.index_lag = Gauge("memoryd_index_lag_changes", "Fleet mode: changes committed "
                               "to the store and not yet in this machine's index", registry=r)
        self.index_lag_s = Gauge("memoryd_index_lag_seconds", "Fleet mode: how long this "
                                 "machine's index has had changes to apply", registry=r)
        self.row_cache_units = Gauge("memoryd_row_cache_units", "Fleet mode: units in this "
                                     "machine's row cache (index/rows.sqlite)", registry=r)
        self.row_cache_bytes = Gauge("memoryd_row_cache_bytes", "Fleet mode: the row "
                                     "cache's size on disk, with its WAL", registry=r)
        self.store_up = Gauge("memoryd_store_up", "1 while the store (the shared database "
                              "in fleet mode) is reachable", registry=r)
        self.store_down_s = Gauge("memoryd_store_unreachable_seconds",
                                  "How long the store has been unreachable (0 while up)",
                                  registry=r)

        self.rss = Gauge("memoryd_resident_memory_bytes", "The daemon's resident memory "
                         "(RSS)", registry=r)
        self.idle_releases = Counter("memoryd_idle_releases", "Times the daemon let go of "
                                     "what queries and writes left, once at rest", registry=r)
        self._releases_seen = 0

    def observe(self, status: dict[str, Any]) -> None:
        self.units.set(status["units"])
        self.sessions.set(status["sessions"])
        self.files.set(status["files"])
        self.bad_lines.set(status["bad_lines"])
        self.unread.set(status["unread_bytes"])
        self.queue.set(status["queue_depth"])
        self.caught_up.set(1 if status["caught_up"] else 0)
        q = status.get("queries")
        if q:
            self.q_running.set(q["running"])
            self.q_waiting.set(q["waiting"])
            self.q_rejected.inc(max(0, q["rejected"] - self._rejected_seen))
            self._rejected_seen = max(self._rejected_seen, q["rejected"])
        st = status.get("store")
        if st:
            self.store.clear()
            self.store.labels(st["kind"], st.get("path") or st["url"], st["namespace"],
                              st["machine"]).set(1)
            self.store_up.set(0 if st.get("reachable") is False else 1)
            self.store_down_s.set(st.get("down_s") or 0)
        if st and st.get("machines") is not None:
            self.machine_ingest.clear()
            for m in st["machines"]:
                if m.get("last_ingest") is not None:
                    self.machine_ingest.labels(m["machine"]).set(m["last_ingest"])
        lag = (status.get("index") or {}).get("lag")
        if lag is not None:
            self.index_lag.set(lag["changes"])
            self.index_lag_s.set(lag["seconds"] or 0)
        rc = (status.get("index") or {}).get("row_cache")
        if rc is not None:
            self.row_cache_units.set(rc["units"])
            self.row_cache_bytes.set(rc["bytes"])
        mem = status.get("memory")
        if mem:
            if mem.get("rss_mb") is not None:
                self.rss.set(mem["rss_mb"] * 2**20)
            self.idle_releases.inc(max(0, mem["idle_releases"] - self._releases_seen))
            self._releases_seen = max(self._releases_seen, mem["idle_releases"])
        if status.get("ingest_lag_ms") is not None:
            self.lag.set(status["ingest_lag_ms"] / 1000)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def observe_request(self, request: web.Request, status: int, seconds: float) -> None:
        """One request's latency, by method, route and status (each label set's child
        looked up once: `labels()` takes a lock and builds the key every time)."""
        route = request.match_info.route.resource
        name = route.canonical if route is not None else "unmatched"
        key = (request.method, name, status)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self.latency.labels(request.method, name,
                                                              str(status))
        child.observe(seconds)



CONTENT_TYPE = CONTENT_TYPE_LATEST

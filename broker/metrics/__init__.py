"""Prometheus metrics: per-API request metrics (router), scrape-time collectors of the broker's components, the
event-loop lag watchdog and the HTTP endpoint (see service.py)."""

"""This broker as clients see it: its node on each advertised listener (Metadata, FindCoordinator,
DescribeCluster, DescribeQuorum answer with the endpoints of the listener the client came in on)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Node:
    """This broker as clients see it on one listener."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

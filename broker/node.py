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


class Endpoints:
    """This broker's identity as clients see it: the cluster id, the node id, and its node on each advertised
    listener (a connection on a listener that is not advertised is answered with the first advertised one)."""

    def __init__(self, cluster_id: str, node_id: int, nodes: dict[str, Node], default: Node) -> None:
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.nodes = nodes  # listener name -> node; the ports of port-0 listeners are filled in once bound
        self._default = default

    def for_listener(self, listener: str) -> Node:
        return self.nodes.get(listener) or self._default

"""Java `.properties` files: the broker's properties, `--override key=value`, and `meta.properties`."""

from __future__ import annotations

import base64
import re
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from broker.config.definitions import ConfigError

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 5 < len(text):
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Java `.properties` syntax: `#`/`!` comments, `key=value`, `key: value` or `key value`, backslash line
    continuation and escapes. Later keys win."""
    props: dict[str, str] = {}
    logical: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not logical and (not line or line[0] in "#!"):
            continue
        # An odd number of trailing backslashes continues the line.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical.append(line[:-1])
            if i < len(lines):
                continue
        else:
            logical.append(line)
        entry = "".join(logical)
        logical = []
        match = re.match(r"((?:\\.|[^\s=:\\])*)\s*[=:]?\s*(.*)$", entry, re.S)
        if match is None or not match.group(1):
            continue
        props[_unescape(match.group(1))] = _unescape(match.group(2))
    return props


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override {item!r} is not key=value")
        out[key.strip()] = value
    return out


def new_cluster_id() -> str:
    """Kafka's format: a random UUID as URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def ensure_meta_properties(data_dir: Path, node_id: int, cluster_id: str | None) -> str:
    """Read or create `meta.properties` (KRaft v1 layout) and return the cluster id.

    A configured cluster.id must match the stored one, and the stored node.id must match ours: pointing a
    broker at another cluster's data is refused as Kafka does.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "meta.properties"
    if path.exists():
        meta = parse_properties(path.read_text(encoding="utf-8"))
        stored = meta.get("cluster.id")
        if not stored:
            raise ConfigError(f"{path} has no cluster.id")
        if cluster_id is not None and cluster_id != stored:
            raise ConfigError(f"cluster.id {cluster_id} does not match {stored} stored in {path}")
        if "node.id" in meta and int(meta["node.id"]) != node_id:
            raise ConfigError(f"node.id {node_id} does not match {meta['node.id']} stored in {path}")
        return stored
    cluster_id = cluster_id or new_cluster_id()
    directory_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    text = (f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\n"
            f"node.id={node_id}\nversion=1\ncluster.id={cluster_id}\ndirectory.id={directory_id}\n")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return cluster_id

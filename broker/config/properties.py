"""Java `.properties` files: the broker's properties, `--override key=value`, and `meta.properties`."""

from __future__ import annotations

import base64
import re
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import structlog

from broker.config.definitions import ConfigError
from broker.durable_files import make_dirs, write_file

log = structlog.get_logger(__name__)

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


META_PROPERTIES = "meta.properties"


def ensure_meta_properties(data_dir: Path, node_id: int, cluster_id: str | None, *,
                           existing_logs: Sequence[str] = ()) -> str:
    """Read or create `meta.properties` (KRaft v1 layout) and return the cluster id. Blocking (fsyncs).

    A configured cluster.id must match the stored one, and the stored node.id must match ours: pointing a
    broker at another cluster's data is refused as Kafka does. `existing_logs` names the logs already in
    `data_dir` (partition directories, the metadata journal): when there are some, a missing or empty file is
    not replaced by one with a new cluster id (their cluster's id would be lost for good) but refused with what
    to write, unless `cluster_id` is configured, which is then what the file gets.
    """
    make_dirs(data_dir)
    path = data_dir / META_PROPERTIES
    state = "missing"
    if path.exists():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{path} is not a readable properties file. {_repair(path, node_id)}") from None
        # a file cut short by a power loss before the fix that fsyncs it: empty, or zeros where data never landed
        if text.strip(" \t\r\n\f\0"):
            return _check_stored(path, parse_properties(text), node_id, cluster_id)
        state = "empty"
    if existing_logs:
        if cluster_id is None:
            shown = ", ".join(sorted(existing_logs)[:3]) + (", ..." if len(existing_logs) > 3 else "")
            raise ConfigError(
                f"{path} is {state} but {data_dir} already holds logs ({shown}): the cluster id they belong to "
                f"is unknown, and start-up stops rather than give them a new one. {_repair(path, node_id, by_config=True)}")
        log.warning("meta.properties recreated with the configured cluster.id", path=str(path), was=state,
                    cluster_id=cluster_id)
    elif state == "empty":
        log.warning("empty meta.properties in a directory without logs replaced", path=str(path))
    cluster_id = cluster_id or new_cluster_id()
    directory_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    text = (f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\n"
            f"node.id={node_id}\nversion=1\ncluster.id={cluster_id}\ndirectory.id={directory_id}\n")
    write_file(path, text.encode())
    return cluster_id


def _check_stored(path: Path, meta: dict[str, str], node_id: int, cluster_id: str | None) -> str:
    stored = meta.get("cluster.id")
    if not stored:
        raise ConfigError(f"{path} has no cluster.id. {_repair(path, node_id)}")
    if cluster_id is not None and cluster_id != stored:
        raise ConfigError(f"cluster.id {cluster_id} does not match {stored} stored in {path}")
    if "node.id" in meta and int(meta["node.id"]) != node_id:
        raise ConfigError(f"node.id {node_id} does not match {meta['node.id']} stored in {path}")
    return stored


def _repair(path: Path, node_id: int, *, by_config: bool = False) -> str:
    advice = (f"To repair it, write {path} with the three lines `version=1`, `node.id={node_id}` and "
              "`cluster.id=<id>`, where <id> is the cluster id this broker had: the cluster_id of its earlier "
              "\"starting broker\" log lines, also shown to clients (e.g. Kafka's AdminClient describeCluster, "
              "kafka-cluster.sh cluster-id). The metadata journal does not record it.")
    if by_config:
        advice += (" Or start once with that id configured (cluster.id=<id> in the properties file, or "
                   "--override cluster.id=<id>): the broker then writes the file.")
    return advice

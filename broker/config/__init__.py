"""Configuration: one definition dialect for broker, topic and group configs (Kafka's names and defaults).

Modules: `definitions` (ConfigDef, types, sources, validators), `broker_config` (the broker's table and
`BrokerConfig`), `topic_config` and `group_config` (per-topic and per-group configs defaulting to broker
settings), `listeners`, `properties` (.properties files, meta.properties). Callers import common names from here.
"""

from broker.config.broker_config import BrokerConfig, load_config
from broker.config.broker_defs import BROKER_CONFIGS
from broker.config.definitions import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    INT_MAX,
    LONG_MAX,
    STATIC_BROKER_CONFIG,
    ConfigDef,
    ConfigDescription,
    ConfigError,
    to_text,
)
from broker.config.listeners import (
    LISTENER_KEYS,
    SASL_MECHANISMS,
    SECURITY_PROTOCOLS,
    Listener,
    parse_host_port,
    parse_ip_overrides,
    parse_listeners,
    parse_protocol_map,
    split_listener_key,
)
from broker.config.properties import ensure_meta_properties, new_cluster_id, parse_overrides, parse_properties

__all__ = [
    "BROKER_CONFIGS", "DEFAULT_CONFIG", "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG", "INT_MAX",
    "LISTENER_KEYS", "LONG_MAX", "SASL_MECHANISMS", "SECURITY_PROTOCOLS", "STATIC_BROKER_CONFIG", "BrokerConfig",
    "ConfigDef", "ConfigDescription", "ConfigError", "Listener", "ensure_meta_properties", "load_config",
    "new_cluster_id", "parse_host_port", "parse_ip_overrides", "parse_listeners", "parse_overrides",
    "parse_properties", "parse_protocol_map", "split_listener_key", "to_text",
]

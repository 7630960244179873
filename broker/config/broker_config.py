"""Broker configuration: Kafka's property names, typed and validated.

Sources, highest first: dynamic overrides set on this broker's id, dynamic cluster-wide defaults (both from
IncrementalAlterConfigs or AlterConfigs on the BROKER resource, named by id or empty), the static properties (file plus `--override key=value`), then the default from `BROKER_CONFIGS`. Unknown keys are kept
as strings and logged, as Kafka warns rather than fails. Topic-level values come from
`broker.config.topic_config`, whose broker synonyms are resolved here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import structlog

from broker.config import topic_config as tc
from broker.config.broker_defs import (
    BROKER_CONFIGS,
    DERIVED,
    SYNONYM_FAMILIES,
    kafka_default_text,
    update_mode,
)
from broker.config.definitions import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    ConfigDescription,
    ConfigError,
    to_text,
)
from broker.config.kafka_broker_defs import PER_BROKER, READ_ONLY
from broker.config.listeners import (
    Listener,
    parse_ip_overrides,
    parse_listeners,
    parse_protocol_map,
    split_listener_key,
)
from broker.config.properties import parse_overrides, parse_properties

log = structlog.get_logger(__name__)

T = TypeVar("T")


def _shown(key: str, value: Any) -> str | None:
    """A config value as DescribeConfigs may show it: null for a sensitive (password-typed) config."""
    return None if BROKER_CONFIGS[key].sensitive else to_text(value)


class BrokerConfig:
    """Typed broker properties with Kafka's precedence; cheap `get()` (values are resolved once per change)."""

    def __init__(self, props: Mapping[str, str] | None = None, *, dynamic: Mapping[str, str] | None = None) -> None:
        self._static: dict[str, Any] = {}
        self.unknown: dict[str, str] = {}
        # Listener-prefixed values: (LISTENER, MECHANISM or None, key) -> typed value.
        self._per_listener: dict[tuple[str, str | None, str], Any] = {}
        for key, text in (props or {}).items():
            definition = BROKER_CONFIGS.get(key)
            if definition is None:
                prefixed = split_listener_key(key)
                if prefixed is not None:
                    self._per_listener[prefixed] = BROKER_CONFIGS[prefixed[2]].parse(str(text))
                else:
                    self.unknown[key] = str(text)
                continue
            self._static[key] = definition.parse(str(text))
        if "node.id" in self._static and "broker.id" not in self._static:
            self._static["broker.id"] = self._static["node.id"]  # as Kafka in KRaft mode: broker.id is node.id
        self._dynamic: dict[str, Any] = {}  # cluster-wide dynamic defaults
        self._per_broker: dict[str, Any] = {}  # dynamic settings of this broker (its id named)
        for key, text in (dynamic or {}).items():
            self._dynamic[key] = self.validate_dynamic(key, text)
        self._check_relations()
        self._resolve()

    # --- lookups -----------------------------------------------------------------------------------------------
    def get(self, name: str) -> Any:
        """The typed effective value of a known key (derived keys resolved), or the raw string of an unknown
        key. KeyError for a key that is neither known nor set."""
        try:
            return self._values[name]
        except KeyError:
            if name in self.unknown:
                return self.unknown[name]
            raise

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._values or name in self.unknown

    def component(self, cls: type[T]) -> T:
        """A component config (broker.config.components) with the current values: built on first use after
        each change, so a component may ask for it at every use and see dynamic changes."""
        built = self._components.get(cls)
        if built is None:
            built = self._components[cls] = cls.read(self.get)  # type: ignore[attr-defined]
        return built

    def source(self, name: str) -> int:
        family = DERIVED.get(name, ((name, 1),))
        for key, _ in family:
            if key in self._per_broker:
                return DYNAMIC_BROKER_CONFIG
        for key, _ in family:
            if key in self._dynamic:
                return DYNAMIC_DEFAULT_BROKER_CONFIG
        for key, _ in family:
            if key in self._static:
                return STATIC_BROKER_CONFIG
        return DEFAULT_CONFIG

    def as_properties(self) -> dict[str, str]:
        """Every known key with its effective value as text (unset keys omitted), plus unknown keys."""
        out = {k: to_text(v) for k, v in self._values.items() if v is not None}
        out.update(self.unknown)
        return out  # type: ignore[return-value]

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(d) for d in self._values["log.dirs"]]

    @property
    def data_dir(self) -> Path:
        return self.log_dirs[0]

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners(self._values["listeners"])

    @property
    def advertised_listeners(self) -> list[Listener]:
        return parse_listeners(self._values["advertised.listeners"])

    @property
    def node_id(self) -> int:
        return self._values["node.id"]

    def listener_value(self, listener: str, key: str, mechanism: str | None = None) -> Any:
        """A listener's value of a LISTENER_KEYS property: `listener.name.<listener>[.<mechanism>].<key>`, else
        the broker-wide value."""
        for candidate in ((listener.upper(), mechanism.upper() if mechanism else None, key),
                          (listener.upper(), None, key)):
            if candidate in self._per_listener:
                return self._per_listener[candidate]
        if key == "sasl.jaas.config":
            return None  # as Kafka: a broker's JAAS entry is per listener and mechanism
        return self._values[key]

    def security_protocol(self, listener: str) -> str:
        return self.protocol_map[listener.upper()]

    @property
    def protocol_map(self) -> dict[str, str]:
        return parse_protocol_map(self._values["listener.security.protocol.map"])

    # --- dynamic changes ---------------------------------------------------------------------------------------
    def validate_dynamic(self, name: str, text: str | None, *, per_broker: bool = False) -> Any:
        """The typed value of a dynamic setting; ConfigError (in Kafka's words) if Kafka's DynamicBrokerConfig
        refuses it: an unknown name, a read-only config, a per-broker one set cluster-wide, a bad value."""
        definition = BROKER_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"Unknown broker config {name}")
        mode = update_mode(name)
        if mode == READ_ONLY:
            raise ConfigError(f"Cannot update these configs dynamically: [{name}]")
        if mode == PER_BROKER and not per_broker:
            raise ConfigError(f"Cannot update these configs at default cluster level, broker id must be specified: "
                              f"[{name}]")
        return None if text is None else definition.parse(text)

    def set_dynamic(self, name: str, text: str | None, *, per_broker: bool = False) -> None:
        """Set (or with None remove) a dynamic setting, cluster-wide or of this broker; ConfigError if not
        allowed."""
        value = self.validate_dynamic(name, text, per_broker=per_broker)
        layer = self._per_broker if per_broker else self._dynamic
        if value is None:
            layer.pop(name, None)
        else:
            layer[name] = value
        self._resolve()

    def dynamic_overrides(self, *, per_broker: bool = False) -> dict[str, str]:
        layer = self._per_broker if per_broker else self._dynamic
        return {k: to_text(v) or "" for k, v in layer.items()}

    # --- describe ----------------------------------------------------------------------------------------------
    def describe(self, keys: Iterable[str] | None = None, *, include_synonyms: bool = False,
                 cluster_defaults: bool = False) -> list[ConfigDescription]:
        """DescribeConfigs rows of this broker as Kafka's ConfigHelper builds them: every config but the internal
        ones not set (Kafka's nonInternalValues plus originals), each key's own value (a derived key such as
        log.retention.ms is null unless set), its source the first of its synonyms'; with `cluster_defaults`
        (the resource named by an empty string) only the cluster-wide dynamic defaults. `keys` (none or empty:
        all) filters the rows."""
        wanted = set(keys) if keys else None
        if cluster_defaults:
            names = [n for n in sorted(self._dynamic) if wanted is None or n in wanted]
            rows = []
            for name in names:
                definition = BROKER_CONFIGS[name]
                shown = _shown(name, self._dynamic[name])
                synonyms = [s for s in self._synonyms(name) if s[2] == DYNAMIC_DEFAULT_BROKER_CONFIG]
                rows.append(ConfigDescription(name, shown, DYNAMIC_DEFAULT_BROKER_CONFIG, definition.sensitive,
                                              update_mode(name) == READ_ONLY, definition.type_code,
                                              definition.doc or None, tuple(synonyms) if include_synonyms else ()))
            return rows
        rows = []
        for name in sorted(BROKER_CONFIGS):
            definition = BROKER_CONFIGS[name]
            if (wanted is not None and name not in wanted) or (definition.internal and not self._is_set(name)):
                continue
            synonyms = self._synonyms(name)
            rows.append(ConfigDescription(name, _shown(name, self._own(name)),
                                          synonyms[0][2] if synonyms else DEFAULT_CONFIG, definition.sensitive,
                                          update_mode(name) == READ_ONLY, definition.type_code,
                                          definition.doc or None, tuple(synonyms) if include_synonyms else ()))
        return rows

    def _is_set(self, name: str) -> bool:
        return name in self._per_broker or name in self._dynamic or name in self._static

    def _own(self, name: str) -> Any:
        """A key's own value: the layers' or its default, derived keys not resolved (as Kafka shows them)."""
        value = self._raw(name)
        if name == "advertised.listeners" and value is None:
            return self._values[name]  # the bound listeners: what clients are told
        return value

    def _synonyms(self, name: str, *, kafka_defaults: bool = False) -> list[tuple[str, str | None, int]]:
        """Kafka's ConfigHelper.configSynonyms: the keys of the name's family (brokerConfigSynonyms) in each
        layer, highest first, then their defaults, from the first entry of the name itself on. With
        `kafka_defaults`, the defaults are Kafka's (for topic configs, whose defaults are Kafka's). A sensitive
        synonym's value is null in every layer: it would otherwise hand out the secret the described value
        hides."""
        family = SYNONYM_FAMILIES.get(name, (name,))
        out = []
        for layer, source in ((self._per_broker, DYNAMIC_BROKER_CONFIG), (self._dynamic, DYNAMIC_DEFAULT_BROKER_CONFIG),
                              (self._static, STATIC_BROKER_CONFIG)):
            out += [(key, _shown(key, layer[key]), source) for key in family if key in layer]
        for key in family:
            default = kafka_default_text(key) if kafka_defaults else to_text(BROKER_CONFIGS[key].default)
            if default is not None:
                out.append((key, None if BROKER_CONFIGS[key].sensitive else default, DEFAULT_CONFIG))
        while out and out[0][0] != name:
            out.pop(0)
        return out

    # --- topic-level values ------------------------------------------------------------------------------------
    def broker_value(self, broker_key: str) -> tuple[str | None, int]:
        """Lookup used by topic configs: (value text, source); (None, DEFAULT_CONFIG) when only defaulted."""
        source = self.source(broker_key) if broker_key in BROKER_CONFIGS else DEFAULT_CONFIG
        if source == DEFAULT_CONFIG:
            return None, DEFAULT_CONFIG
        return to_text(self._values.get(broker_key)), source

    def topic_synonyms(self, broker_key: str) -> list[tuple[str, str | None, int]]:
        """The broker synonyms Kafka lists for a topic (or group) config defaulting to `broker_key`."""
        return self._synonyms(broker_key, kafka_defaults=True) if broker_key in BROKER_CONFIGS else []

    def topic_value(self, name: str, overrides: Mapping[str, str]) -> str:
        return tc.effective_value(name, overrides, self)

    def topic_values(self, overrides: Mapping[str, str]) -> dict[str, str]:
        """Every topic config's effective value (text) for a topic with these overrides."""
        return {name: self.topic_value(name, overrides) for name in tc.TOPIC_CONFIGS}

    def describe_topic(self, overrides: Mapping[str, str], keys: Iterable[str] | None = None, *,
                       raw: bool = False) -> list[ConfigDescription]:
        """A topic's configs as Kafka describes them: every config but the internal ones it does not set (none
        or empty `keys`: all); with `raw`, overrides as given (CreateTopics' answer)."""
        wanted = set(keys) if keys else None
        names = [n for n in sorted(tc.TOPIC_CONFIGS) if (wanted is None or n in wanted)
                 and (not tc.TOPIC_CONFIGS[n].internal or n in overrides)]
        return [tc.effective(name, overrides, self, raw=raw) for name in names]

    def validate_topic_value(self, name: str, value: str) -> str:
        return tc.validate(name, value)

    def validate_topic_values(self, overrides: Mapping[str, str]) -> None:
        """Cross-config checks of a topic with these (already validated) overrides; ValueError."""
        tc.validate_values(self.topic_values(overrides))

    def log_config(self, overrides: Mapping[str, str]) -> dict[str, str]:
        """Effective topic configs of a partition log (names as Kafka's topic configs)."""
        return self.topic_values(overrides)

    # --- internals ---------------------------------------------------------------------------------------------
    def _raw(self, name: str) -> Any:
        if name in self._per_broker:
            return self._per_broker[name]
        if name in self._dynamic:
            return self._dynamic[name]
        if name in self._static:
            return self._static[name]
        return BROKER_CONFIGS[name].default

    def _resolve(self) -> None:
        values = {name: self._raw(name) for name in BROKER_CONFIGS}
        for name, family in DERIVED.items():
            for key, scale in family:
                raw = self._per_broker.get(key, self._dynamic.get(key, self._static.get(key)))
                if raw is not None:
                    values[name] = raw * scale if raw >= 0 else -1
                    break
            else:
                last_key, scale = family[-1]
                values[name] = values[last_key] * scale
        if values["log.dirs"] is None:
            values["log.dirs"] = list(values["log.dir"])
        if values["advertised.listeners"] is None:
            values["advertised.listeners"] = values["listeners"]
        self._values = values
        self._components: dict[type, Any] = {}  # component configs of these values (see `component`)

    def _check_relations(self) -> None:
        raw = self._raw
        listeners = {listener.name for listener in parse_listeners(raw("listeners"))}
        protocols = parse_protocol_map(raw("listener.security.protocol.map"))
        for name in sorted(listeners):
            if name not in protocols:
                raise ConfigError(f"No security protocol defined for listener {name} "
                                  "(listener.security.protocol.map)")
            if protocols[name] in ("SSL", "SASL_SSL"):
                def value(key: str, name: str = name) -> Any:
                    return self._per_listener.get((name, None, key), raw(key))
                if not value("ssl.keystore.location") and not value("ssl.keystore.certificate.chain"):
                    raise ConfigError(f"listener {name} ({protocols[name]}) needs ssl.keystore.location or "
                                      "ssl.keystore.certificate.chain")
        if raw("advertised.listeners") is not None:
            extra = {a.name for a in parse_listeners(raw("advertised.listeners"))} - listeners
            if extra:
                raise ConfigError(f"advertised.listeners names {sorted(extra)} not found in listeners")
        if raw("max.connections.per.ip") == 0 and not parse_ip_overrides(raw("max.connections.per.ip.overrides")):
            raise ConfigError("max.connections.per.ip can be 0 only when max.connections.per.ip.overrides is set")
        # Kafka's validateNewGroupCoordinatorConfigs: the consumer group timings within their bounds.
        for key in ("heartbeat.interval.ms", "session.timeout.ms"):
            lo, value, hi = (raw(f"group.consumer.min.{key}"), raw(f"group.consumer.{key}"),
                             raw(f"group.consumer.max.{key}"))
            for ok, message in ((hi >= lo, f"group.consumer.max.{key} must be greater than or equals to "
                                           f"group.consumer.min.{key}"),
                                (value >= lo, f"group.consumer.{key} must be greater than or equals to "
                                              f"group.consumer.min.{key}"),
                                (value <= hi, f"group.consumer.{key} must be less than or equals to "
                                              f"group.consumer.max.{key}")):
                if not ok:
                    raise ConfigError(message)
        for prefix in ("group.share", "group.consumer"):
            if raw(f"{prefix}.heartbeat.interval.ms") >= raw(f"{prefix}.session.timeout.ms"):
                raise ConfigError(f"{prefix}.heartbeat.interval.ms must be smaller than {prefix}.session.timeout.ms")
        for key in ("record.lock.duration.ms", "session.timeout.ms", "heartbeat.interval.ms", "delivery.count.limit",
                    "partition.max.record.locks"):
            lo, value, hi = (raw(f"group.share.min.{key}"), raw(f"group.share.{key}"), raw(f"group.share.max.{key}"))
            if not lo <= value <= hi:
                raise ConfigError(f"group.share.{key}={value} must be between group.share.min.{key}={lo} "
                                  f"and group.share.max.{key}={hi}")


def load_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
    props: dict[str, str] = {}
    if path is not None:
        try:
            props.update(parse_properties(Path(path).read_text(encoding="utf-8")))
        except OSError as err:
            raise ConfigError(f"cannot read {path}: {err.strerror}") from None
    props.update(parse_overrides(overrides))
    config = BrokerConfig(props)
    for key in sorted(config.unknown):
        log.warning("unknown config key kept", key=key)
    return config

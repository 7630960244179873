"""Component configs come from one table: every field reads a broker config of a matching type, its default is
the table's, and `from_config` / `from_properties` read the broker's values."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import typing

import pytest

import broker
from broker.config import BrokerConfig, ConfigError
from broker.config.broker_defs import BROKER_CONFIGS
from broker.config.components import ComponentConfig, fixed_fields, setting, settings_of
from broker.config.group_config import GROUP_CONFIGS, GroupConfig
from broker.groups.classic.manager import ClassicConfig
from broker.groups.consumer.manager import ConsumerConfig
from broker.groups.coordinator import GroupCoordinatorConfig, OffsetsConfig

# Every broker module imported, so every ComponentConfig subclass exists.
for _module in pkgutil.walk_packages(broker.__path__, "broker."):
    if not _module.name.endswith("__main__"):
        importlib.import_module(_module.name)


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


CONFIGS = sorted((c for c in _subclasses(ComponentConfig) if c.__module__.startswith("broker.")),
                 key=lambda c: c.__qualname__)
# Python type of a field by the ConfigDef type of its key.
PY_TYPES: dict[str, object] = {"int": int, "short": int, "long": int, "bool": bool, "double": float,
                               "string": str, "class": str, "password": str, "list": tuple[str, ...]}


def test_the_component_configs_are_found() -> None:
    names = {c.__name__ for c in CONFIGS}
    assert {"ClassicConfig", "ConsumerConfig", "OffsetsConfig", "ShareGroupConfig",
            "TransactionCoordinatorConfig", "ShareCoordinatorConfig", "SocketServerConfig",
            "ConnectionQuotaConfig", "QuotaConfig", "RequestLimitsConfig", "CleanerConfig"} <= names


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_field_is_a_config_of_its_type_with_the_tables_default(cls: type) -> None:
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    hints = typing.get_type_hints(cls)
    specs = settings_of(cls)
    fixed = fixed_fields(cls)
    for field in dataclasses.fields(cls):
        assert field.name in specs or field.name in fixed, f"{cls.__name__}.{field.name} reads no config"
    defaults = cls()
    for name, spec in specs.items():
        definition = BROKER_CONFIGS[spec.key]
        expected = PY_TYPES[definition.type]
        if definition.default is None:
            expected = expected | None  # type: ignore[operator]
        assert hints[name] == expected, f"{cls.__name__}.{name}: {spec.key} is {definition.type}"
        if spec.scale != 1:
            assert expected is int
        table_default = definition.default
        converted = tuple(table_default) if isinstance(table_default, list) else table_default
        if table_default is not None:
            converted = converted * spec.scale if spec.scale != 1 else converted
        assert getattr(defaults, name) == converted, f"{cls.__name__}.{name} != default of {spec.key}"


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_from_config_reads_each_fields_key(cls: type) -> None:
    asked: list[str] = []

    def get(key: str) -> object:
        asked.append(key)
        return BROKER_CONFIGS[key].default

    assert cls.read(get) == cls()
    assert sorted(asked) == sorted(spec.key for spec in settings_of(cls).values())


def test_values_from_the_broker_config() -> None:
    config = BrokerConfig({"group.min.session.timeout.ms": "10", "offsets.retention.minutes": "2",
                           "group.consumer.assignors": "range", "group.share.max.size": "12"})
    built = GroupCoordinatorConfig.from_config(config)
    assert built.classic.min_session_timeout_ms == 10
    assert built.offsets.retention_ms == 120_000  # minutes to ms
    assert built.consumer.assignors == ("range",)
    assert built.share.max_size == 12
    assert built.classic.max_session_timeout_ms == BROKER_CONFIGS["group.max.session.timeout.ms"].default


def test_from_properties_parses_and_refuses_other_keys() -> None:
    assert OffsetsConfig.from_properties({"offsets.retention.minutes": "1"}).retention_ms == 60_000
    assert ConsumerConfig.from_properties({}) == ConsumerConfig()
    with pytest.raises(ConfigError):
        ClassicConfig.from_properties({"group.consumer.max.size": "5"})
    with pytest.raises(ConfigError):
        ClassicConfig.from_properties({"group.max.size": "0"})


@dataclasses.dataclass(frozen=True)
class _Dynamic(ComponentConfig):
    max_connections: int = setting("max.connections")


def test_from_a_broker_config_is_cached_until_a_change() -> None:
    config = BrokerConfig()
    first = _Dynamic.from_config(config)
    assert _Dynamic.from_config(config) is first
    config.set_dynamic("max.connections", "7")
    assert _Dynamic.from_config(config).max_connections == 7
    config.set_dynamic("max.connections", None)
    assert _Dynamic.from_config(config) == first


def test_a_setting_names_a_known_config() -> None:
    with pytest.raises(KeyError):
        setting("no.such.config")


# --- group configs -----------------------------------------------------------------------------------------
GROUP_TYPES: dict[str, object] = {"int": int, "long": int, "bool": bool, "string": str, "list": tuple[str, ...]}


def test_group_config_has_a_typed_field_per_group_config_with_the_tables_default() -> None:
    hints = typing.get_type_hints(GroupConfig)
    by_key = {f.metadata["group_config"]: f for f in dataclasses.fields(GroupConfig)}
    assert sorted(by_key) == sorted(GROUP_CONFIGS)
    defaults = GroupConfig()
    for key, field in by_key.items():
        definition = GROUP_CONFIGS[key]
        assert field.name == key.replace(".", "_")
        assert hints[field.name] == GROUP_TYPES[definition.type], key
        if definition.synonym is not None and definition.type in ("int", "long"):  # the broker setting's default
            assert getattr(defaults, field.name) == BROKER_CONFIGS[definition.synonym].default, key
    assert defaults.share_auto_offset_reset == "latest" and defaults.share_renew_acknowledge_enable is True
    assert defaults.share_isolation_level == "read_uncommitted" and not defaults.share_read_committed
    assert defaults.errors_deadletterqueue_topic_name == ""
    assert defaults.streams_rack_aware_assignment_tags == ()


def test_group_config_from_effective_values() -> None:
    built = GroupConfig.from_values({
        "share.renew.acknowledge.enable": "false", "share.record.lock.duration.ms": "1000",
        "share.isolation.level": "read_committed", "streams.rack.aware.assignment.tags": "a,b"})
    assert built.share_renew_acknowledge_enable is False
    assert built.share_record_lock_duration_ms == 1000
    assert built.share_read_committed
    assert built.streams_rack_aware_assignment_tags == ("a", "b")
    assert built.share_delivery_count_limit == GroupConfig().share_delivery_count_limit

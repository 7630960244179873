"""The client quota store: quota values per entity, changed only by ClientQuotaRecords (metadata record type 14).

Entities as Kafka's ClientQuotaEntity: a map of entity type (`user`, `client-id`, `ip`) to a name, None being the
default entity (`<default>`). `alter` validates as Kafka's ClientQuotaControlManager and returns the records to
journal; `describe` filters as Kafka's ClientQuotasImage; `apply` is the replay function for both paths.
Sans-IO: no journal, no clock.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from protocol.errors import ErrorCode

CLIENT_QUOTA_RECORD = 14
USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
# Kafka's QuotaConfig: the keys of user/client-id entities and of ip entities, with their ConfigDef types.
USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: "long", CONSUMER_BYTE_RATE: "long", REQUEST_PERCENTAGE: "double",
                    CONTROLLER_MUTATION_RATE: "double"}
IP_KEYS = {CONNECTION_CREATION_RATE: "int"}
_MAX = {"short": 2 ** 15 - 1, "int": 2 ** 31 - 1, "long": 2 ** 63 - 1}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]  # sorted (type, name) pairs; name None = the default entity


def normalize_ip(address: str) -> str:
    """One spelling per address, as the acceptor compares peers (`::1`, `127.0.0.1`)."""
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).compressed
    except ValueError:
        return address


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """As Kafka builds the entity map from a request: a type given twice keeps its last name."""
    return tuple(sorted(dict(pairs).items()))


class QuotaRequestError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class AlterResult:
    entity: Entity
    error: ErrorCode
    message: str | None


def _validate_entity(entity: Entity) -> str | None:
    if not entity:
        return "Invalid empty client quota entity"
    for entity_type, name in entity:
        if entity_type not in ENTITY_TYPES:
            return f"Unhandled client quota entity type: {entity_type}"
        if name is not None and not name:
            return f"Empty {entity_type} not supported"
    return None


def _keys_for(entity: Entity) -> tuple[dict[str, str] | None, str | None]:
    types = dict(entity)
    if IP in types:
        if USER in types or CLIENT_ID in types:
            return None, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
        ip = types[IP]
        if ip is not None:
            try:  # Kafka also accepts a resolvable host name; resolving would block the loop, so addresses only
                ipaddress.ip_address(ip)
            except ValueError:
                return None, f"{ip} is not a valid IP or resolvable host."
        return IP_KEYS, None
    return USER_CLIENT_KEYS, None


def _validate_value(keys: Mapping[str, str], key: str, value: float) -> str | None:
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == "double":
        return None
    if value > _MAX[kind]:
        return f"Proposed value for {key} is too large for {'an INT' if kind == 'int' else 'a ' + kind.upper()}."
    if abs(value % 1.0) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


class ClientQuotaStore:
    def __init__(self) -> None:
        self._quotas: dict[Entity, dict[str, float]] = {}
        self.version = 0  # bumped by every applied record: quota managers re-resolve their sensors' limits

    def __len__(self) -> int:
        return len(self._quotas)

    def get(self, entity: Entity) -> Mapping[str, float]:
        return self._quotas.get(entity, {})

    def entities_with(self, key: str) -> dict[Entity, float]:
        """Every entity with a value for `key` (one quota manager's overridden quotas)."""
        return {e: v[key] for e, v in self._quotas.items() if key in v}

    # --- records -------------------------------------------------------------------------------------------
    def apply(self, value) -> None:
        entity = entity_of((e["entity_type"], e["entity_name"]) for e in value["entity"])
        self.version += 1
        if value["remove"]:
            values = self._quotas.get(entity)
            if values is not None:
                values.pop(value["key"], None)
                if not values:
                    del self._quotas[entity]
        else:
            self._quotas.setdefault(entity, {})[value["key"]] = float(value["value"])

    # --- AlterClientQuotas ---------------------------------------------------------------------------------
    def alter(self, entries: Iterable[tuple[Entity, list[tuple[str, float | None]]]]
              ) -> tuple[list[tuple[int, dict]], list[AlterResult]]:
        """Kafka's ClientQuotaControlManager.alterClientQuotas: (records to journal, one result per distinct
        entity in first-seen order). `None` as a value removes the key. Nothing is applied here."""
        records: list[tuple[int, dict]] = []
        results: dict[Entity, AlterResult] = {}
        for entity, ops in entries:
            alterations: dict[str, float | None] = {}
            for key, value in ops:
                if key in alterations:
                    results[entity] = AlterResult(entity, ErrorCode.INVALID_REQUEST, f"Duplicate quota key {key} "
                                                  f"not updating quota for this entity {_describe(entity)}")
                else:
                    alterations[key] = value
            if entity in results:
                results[entity] = AlterResult(entity, ErrorCode.INVALID_REQUEST,
                                              f"Ignoring duplicate entity {_describe(entity)}")
                continue
            error, new = self._alter_entity(entity, alterations)
            results[entity] = AlterResult(entity, ErrorCode.INVALID_REQUEST if error else ErrorCode.NONE, error)
            records.extend(new)
        return records, list(results.values())

    def _alter_entity(self, entity: Entity, alterations: Mapping[str, float | None]
                      ) -> tuple[str | None, list[tuple[int, dict]]]:
        error = _validate_entity(entity)
        if error is not None:
            return error, []
        keys, error = _keys_for(entity)
        if keys is None:
            return error, []
        current = self._quotas.get(entity, {})
        names = [{"entity_type": t, "entity_name": n} for t, n in entity]
        records = []
        for key, value in alterations.items():
            if value is None:
                if key in current:
                    records.append((CLIENT_QUOTA_RECORD, {"entity": names, "key": key, "value": 0.0,
                                                          "remove": True}))
                continue
            error = _validate_value(keys, key, value)
            if error is not None:
                return error, []
            if current.get(key) != value:  # only a changed value is recorded
                records.append((CLIENT_QUOTA_RECORD, {"entity": names, "key": key, "value": float(value),
                                                      "remove": False}))
        return None, records

    # --- DescribeClientQuotas ------------------------------------------------------------------------------
    def describe(self, components: Iterable[tuple[str, int, str | None]], strict: bool
                 ) -> list[tuple[Entity, dict[str, float]]]:
        """Kafka's ClientQuotasImage.describe; raises QuotaRequestError for a filter Kafka refuses."""
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for entity_type, match_type, match in components:
            if not entity_type:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
            if entity_type in exact or entity_type in specified:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST,
                                        f"Entity type {entity_type} cannot appear more than once in the filter.")
            if entity_type not in ENTITY_TYPES:
                raise QuotaRequestError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise QuotaRequestError(ErrorCode.INVALID_REQUEST,
                                            "Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[entity_type] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise QuotaRequestError(ErrorCode.INVALID_REQUEST,
                                            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
                exact[entity_type] = None
            elif match_type == MATCH_SPECIFIED:
                if match is not None:
                    raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_SPECIFIED, "
                                            "but also specified a match string.")
                specified.add(entity_type)
            else:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
        filtered = set(exact) | specified
        if IP in filtered and (USER in filtered or CLIENT_ID in filtered):
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP "
                                    "filter component should not be used with user or clientId filter component.")
        out = []
        for entity, values in self._quotas.items():
            names = dict(entity)
            if strict and len(names) != len(exact) + len(specified):
                continue
            if any(t not in names or names[t] != m for t, m in exact.items()):
                continue
            if any(t not in names for t in specified):
                continue
            out.append((entity, dict(values)))
        return out


def _describe(entity: Entity) -> str:
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in entity) + "})"

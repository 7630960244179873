"""What every API object is: the handlers of one API family as bound methods, and the versions it serves.

An API object (Kafka's KafkaApis, split by family) is built by `broker/app.py` with exactly the components its
handlers use; `register_all` (broker/handlers/__init__.py) registers its handlers with the router.

Request and response types: the codecs decode a request body into a `construct` Container whose fields read
as attributes (`req.group_id`, protocol/codec.py `message_class`); there is no class per API, so handlers are
typed with the aliases below, and answer with a dict of the response's fields (snake_case), which the router
encodes.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any, ClassVar, TypeAlias

from construct import Container

Request: TypeAlias = Container[Any]  # a decoded request body (fields by attribute or key)
Response: TypeAlias = dict[str, Any]  # the response body's fields, encoded by the router
HandlerFunction = Callable[..., Coroutine[Any, Any, Any]]


class Apis:
    """Base of the API objects. A subclass lists its handlers by api key in HANDLERS (its methods, named in
    the class body) and may narrow the versions it serves:

    VERSIONS: api key -> (min, max), fewer versions than the schema's
    ADVERTISED_MIN: api key -> a minimum ApiVersions lists below the one served (as Kafka lists Produce v0)
    UNSTABLE: api key -> the first version Kafka marks latestVersionUnstable (served only with
        unstable.api.versions.enable, as Kafka's ApiVersions)
    """

    HANDLERS: ClassVar[Mapping[int, HandlerFunction]] = {}
    VERSIONS: ClassVar[Mapping[int, tuple[int, int]]] = {}
    ADVERTISED_MIN: ClassVar[Mapping[int, int]] = {}
    UNSTABLE: ClassVar[Mapping[int, int]] = {}

    def handlers(self) -> dict[int, HandlerFunction]:
        """api key -> this object's bound handler method."""
        bound: dict[int, HandlerFunction] = {api_key: getattr(self, fn.__name__)
                                             for api_key, fn in self.HANDLERS.items()}
        return bound

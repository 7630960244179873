"""Kafka's `sasl.jaas.config` syntax: `LoginModuleClass FLAG key=value ...;`, values bare or double-quoted.

Only what a broker needs from it: the options of the entry, e.g. the `user_<name>="<password>"` options of
PlainLoginModule, which are the PLAIN users of a listener (as Kafka's PlainServerCallbackHandler reads them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<word>[^\s=;"]+)|(?P<punct>[=;]))', re.S)


class JaasError(ValueError):
    pass


@dataclass
class JaasEntry:
    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    out = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise JaasError(f"cannot parse JAAS configuration near {text[pos:pos + 20]!r}")
        pos = match.end()
        if match["quoted"] is not None:
            out.append(("value", re.sub(r"\\(.)", r"\1", match["quoted"])))
        elif match["word"] is not None:
            out.append(("value", match["word"]))
        else:
            out.append(("punct", match["punct"]))
    return out


def parse_jaas(text: str) -> list[JaasEntry]:
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        if i + 1 >= len(tokens) or tokens[i][0] != "value" or tokens[i + 1][0] != "value":
            raise JaasError("a JAAS entry starts with a login module class and a control flag")
        entry = JaasEntry(tokens[i][1], tokens[i + 1][1].lower())
        if entry.flag not in _FLAGS:
            raise JaasError(f"invalid JAAS control flag {tokens[i + 1][1]!r}")
        i += 2
        while i < len(tokens) and tokens[i] != ("punct", ";"):
            if i + 2 >= len(tokens) or tokens[i + 1] != ("punct", "=") or tokens[i + 2][0] != "value":
                raise JaasError("JAAS options are key=value pairs")
            entry.options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasError("a JAAS entry must end with ';'")
        i += 1
        entries.append(entry)
    if not entries:
        raise JaasError("empty JAAS configuration")
    return entries


def plain_users(text: str | None) -> dict[str, str]:
    """The `user_<name>` options of the PlainLoginModule entry: name -> password."""
    if not text:
        return {}
    users: dict[str, str] = {}
    for entry in parse_jaas(text):
        if entry.module == PLAIN_LOGIN_MODULE:
            users.update({k[len("user_"):]: v for k, v in entry.options.items() if k.startswith("user_")})
    return users

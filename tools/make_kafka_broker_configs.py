"""Generate broker/config/kafka_broker_defs.py: the names, types, defaults and dynamic-update modes of Apache
Kafka's broker configs, read from Kafka's config definitions in a git checkout (facts only: no code, no prose).

    python tools/make_kafka_broker_configs.py --git DIR/.git --commit SHA [--out PATH]

It starts from AbstractKafkaConfig.CONFIG_DEF (the ConfigDefs KafkaConfig merges), evaluates each define()'s
name, type and default (Java constant expressions: literals, constants across classes, arithmetic, TimeUnit,
List.of/Set.of, class names), and the update modes from DynamicBrokerConfig (ALL_DYNAMIC_CONFIGS, PER_BROKER_CONFIGS
as Kafka's docs print them: read-only, per-broker, cluster-wide). Anything it cannot evaluate stops it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NO_DEFAULT = object()
IMPORTANCE = {"HIGH", "MEDIUM", "LOW"}
TYPES = {"BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD"}
TIME_UNITS = {"MILLISECONDS": 1, "SECONDS": 1000, "MINUTES": 60_000, "HOURS": 3_600_000, "DAYS": 86_400_000}
JAVA_CONSTANTS = {("Long", "MAX_VALUE"): 2**63 - 1, ("Long", "MIN_VALUE"): -(2**63), ("Integer", "MAX_VALUE"): 2**31 - 1,
                  ("Integer", "MIN_VALUE"): -(2**31), ("Short", "MAX_VALUE"): 2**15 - 1,
                  ("Double", "MAX_VALUE"): 1.7976931348623157e308}


# Values behind method calls the evaluator does not follow (read by hand from the same commit): the default levels
# of CompressionType's GZIP (java.util.zip.Deflater.DEFAULT_COMPRESSION), LZ4 and ZSTD.
KNOWN_CALLS: dict[tuple[str, str], Any] = {
    ("CompressionType.GZIP", "defaultLevel"): -1,
    ("CompressionType.LZ4", "defaultLevel"): 9,
    ("CompressionType.ZSTD", "defaultLevel"): 3,
    ("SHARE_GROUP_BUILTIN_ASSIGNOR", "name"): "simple",  # SimpleAssignor's name
    # the JVM's defaults, as Kafka's documentation prints them
    ("KeyManagerFactory", "getDefaultAlgorithm"): "SunX509",
    ("TrustManagerFactory", "getDefaultAlgorithm"): "PKIX",
}
# Constants computed by streams over enums (the order is the HashMap's, as Kafka's documentation prints it).
KNOWN_FIELDS: dict[tuple[str, str], Any] = {
    ("SocketServerConfigs", "LISTENER_SECURITY_PROTOCOL_MAP_DEFAULT"):
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
    # the names of the built-in assignors (UniformAssignor, RangeAssignor; StickyTaskAssignor) in list order
    ("GroupCoordinatorConfig", "CONSUMER_GROUP_ASSIGNORS_DEFAULT"): ["uniform", "range"],
    ("GroupCoordinatorConfig", "STREAMS_GROUP_ASSIGNORS_DEFAULT"): ["sticky"],
}
# Fields of enum constants held in constants: CompressionType.NONE's id.
KNOWN_NAMES: dict[str, Any] = {"OFFSETS_TOPIC_COMPRESSION_CODEC_DEFAULT.id": 0, "STATE_TOPIC_COMPRESSION_CODEC_DEFAULT.id": 0}


class Unresolved(Exception):
    pass


class JavaName(str):
    """A value that is the fully qualified name of a class (Foo.class.getName())."""


class Source:
    def __init__(self, git: str, commit: str) -> None:
        self.git, self.commit = git, commit
        names = subprocess.run(["git", "--git-dir", git, "ls-tree", "-r", "--name-only", commit], check=True,
                               capture_output=True, text=True).stdout.split()
        self.paths = [p for p in names if "/src/main/java/" in p and p.endswith(".java")]
        self.by_class: dict[str, list[str]] = {}
        for p in self.paths:
            self.by_class.setdefault(Path(p).stem, []).append(p)
        self._text: dict[str, str] = {}

    def text(self, path: str) -> str:
        if path not in self._text:
            raw = subprocess.run(["git", "--git-dir", self.git, "show", f"{self.commit}:{path}"], check=True,
                                 capture_output=True, text=True).stdout
            self._text[path] = strip_comments(raw)
        return self._text[path]

    def class_file(self, name: str, context: str) -> str:
        """The file declaring class `name`, preferring the one `context` imports (or its own package)."""
        candidates = self.by_class.get(name, [])
        ctx = self.text(context)
        for p in candidates:
            fq = p.split("/src/main/java/")[1][:-5].replace("/", ".")
            if re.search(rf"import\s+{re.escape(fq)}\s*;", ctx) or Path(p).parent == Path(context).parent:
                return p
        if len(candidates) == 1:
            return candidates[0]
        # a nested class: the file of the importing context or one declaring "class Name"
        if re.search(rf"\bclass\s+{name}\b", ctx):
            return context
        holders = [p for p in self.paths if re.search(rf"\bclass\s+{name}\b", self.text(p))] if not candidates else []
        if len(holders) == 1:
            return holders[0]
        raise Unresolved(f"class {name} from {context}: {candidates or holders}")

    def package_of(self, path: str) -> str:
        return path.split("/src/main/java/")[1].rsplit("/", 1)[0].replace("/", ".")


def strip_comments(text: str) -> str:
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('"""', i):  # a text block: kept as an (unused) empty string
            i = text.index('"""', i + 3) + 3
            out.append('""')
        elif c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif c == "'":
            j = i + 3 if text[i + 1] == "\\" else i + 2  # 'x' or '\x' (a quote char's closing quote)
            while text[j] != "'":
                j += 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            i = text.index("\n", i) if "\n" in text[i:] else n
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def balanced_end(text: str, start: int, stop: str = ";") -> int:
    """Index of the first `stop` at depth 0 from `start` (strings skipped)."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0 and c in stop:
                return i
            depth -= 1
        elif c in stop and depth == 0:
            return i
        i += 1
    raise Unresolved("unbalanced expression")


def split_args(text: str) -> list[str]:
    args, depth, cur, i = [], 0, [], 0
    while i < len(text):
        c = text[i]
        if c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if c in "([{<" and not (c == "<" and depth == 0 and not re.match(r"\w", text[i + 1:i + 2] or " ")):
            depth += 1 if c != "<" else 0
        if c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    if "".join(cur).strip():
        args.append("".join(cur).strip())
    return args


class Evaluator:
    def __init__(self, src: Source) -> None:
        self.src = src

    # --- fields --------------------------------------------------------------------------------------------
    def field_expr(self, cls_file: str, name: str, cls: str | None = None) -> tuple[str, str]:
        known = KNOWN_FIELDS.get((cls or Path(cls_file).stem, name))
        if known is not None:
            if isinstance(known, list):
                return "List.of(" + ", ".join(f'"{v}"' for v in known) + ")", cls_file
            return f'"{known}"', cls_file
        text = self.src.text(cls_file)
        scope = text
        if cls is not None and Path(cls_file).stem != cls:
            m = re.search(rf"\bclass\s+{cls}\b[^{{]*\{{", text)
            if m:
                scope = text[m.end():m.end() + balanced_end(text, m.end(), "}") - m.end()]
        m = re.search(rf"\bstatic\s+final\s+[\w<>\[\], ?.]+?\s+{name}\s*=", scope) or \
            re.search(rf"\bfinal\s+static\s+[\w<>\[\], ?.]+?\s+{name}\s*=", scope) or \
            re.search(rf"[;{{}}]\s*(?:public\s+)?[\w<>\[\]]+\s+{name}\s*=", scope)  # an interface constant
        if not m:
            raise Unresolved(f"field {name} in {cls_file}")
        end = balanced_end(scope, m.end())
        return scope[m.end():end].strip(), cls_file

    def resolve_name(self, parts: list[str], context: str) -> Any:
        if ".".join(parts) in KNOWN_NAMES:
            return KNOWN_NAMES[".".join(parts)]
        if len(parts) == 2 and (parts[0], parts[1]) in JAVA_CONSTANTS:
            return JAVA_CONSTANTS[(parts[0], parts[1])]
        if len(parts) == 1:
            name = parts[0]
            try:
                expr, f = self.field_expr(context, name)
            except Unresolved:
                pass
            else:
                return self.eval(expr, f)
            ctx = self.src.text(context)
            for m in re.finditer(r"import\s+static\s+([\w.]+)\.(\w+|\*)\s*;", ctx):
                cls = m.group(1).rsplit(".", 1)[1]
                if m.group(2) in (name, "*"):
                    try:
                        f = self.src.class_file(cls, context)
                        expr, f = self.field_expr(f, name, cls)
                        return self.eval(expr, f)
                    except Unresolved:
                        continue
            # an inherited constant: try the superclass
            sup = re.search(r"\bextends\s+(\w+)", ctx)
            if sup:
                f = self.src.class_file(sup.group(1), context)
                expr, f = self.field_expr(f, name)
                return self.eval(expr, f)
            raise Unresolved(f"name {name} in {context}")
        *owner, name = parts
        cls = owner[-1]
        if cls in TIME_UNITS:
            raise Unresolved(".".join(parts))
        if len(owner) >= 2 and owner[-2] in self.src.by_class and re.fullmatch(r"[A-Z0-9_]+", cls):
            # Enum.CONSTANT.field: the constant's first constructor argument (its name string)
            text = self.src.text(self.src.class_file(owner[-2], context))
            constant = re.search(rf"\b{cls}\s*\(\s*(\"(?:\\.|[^\"\\])*\")", text)
            if constant and name in ("name", "altName", "id"):
                return constant.group(1)[1:-1]
        f = self.src.class_file(cls, context)
        expr, f = self.field_expr(f, name, cls)
        return self.eval(expr, f)

    # --- expressions -----------------------------------------------------------------------------------------
    def eval(self, expr: str, context: str) -> Any:
        parser = _Parser(expr, self, context)
        value = parser.expression()
        if parser.pos != len(parser.tokens):
            raise Unresolved(f"trailing tokens in {expr!r}")
        return value


TOKEN = re.compile(r'\s*(?:(?P<str>"(?:\\.|[^"\\])*")|(?P<num>\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?[lLdDfF]?)|'
                   r'(?P<name>[A-Za-z_$][\w$]*)|(?P<op>::|->|[-+*/().,?:!<>{}\[\]=&|]))')


class _Parser:
    def __init__(self, text: str, ev: Evaluator, context: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise Unresolved(f"cannot tokenize {text[pos:pos + 30]!r}")
            kind = m.lastgroup
            assert kind is not None
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
        self.pos = 0
        self.ev = ev
        self.context = context

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise Unresolved(f"expected {value} at {self.tokens[self.pos:self.pos + 5]}")
        self.pos += 1
        return tok

    def expression(self) -> Any:
        value = self.additive()
        if self.peek() == ("op", "?"):
            raise Unresolved("ternary")
        return value

    def additive(self) -> Any:
        value = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            right = self.term()
            if op == "+" and (isinstance(value, str) or isinstance(right, str)):
                value = java_str(value) + java_str(right)
            else:
                value = value + right if op == "+" else value - right
        return value

    def term(self) -> Any:
        value = self.unary()
        while self.peek() in (("op", "*"), ("op", "/")):
            op = self.take()[1]
            right = self.unary()
            value = value * right if op == "*" else (value // right if isinstance(value, int) and isinstance(right, int)
                                                     else value / right)
        return value

    def unary(self) -> Any:
        if self.peek() == ("op", "-"):
            self.take()
            return -self.unary()
        if self.peek() == ("op", "("):
            # a cast "(int) x" or a parenthesised expression
            if self.pos + 2 < len(self.tokens) and self.tokens[self.pos + 1][1] in ("int", "long", "short", "double") \
                    and self.tokens[self.pos + 2][1] == ")":
                self.pos += 3
                return self.unary()
            self.take("(")
            value = self.expression()
            self.take(")")
            return self.postfix(value)
        return self.primary()

    def postfix(self, value: Any) -> Any:
        while self.peek() == ("op", "."):
            self.take(".")
            method = self.take()[1]
            args = self.call_args() if self.peek() == ("op", "(") else None
            value = self.method(value, method, args)
        return value

    def method(self, value: Any, method: str, args: list | None) -> Any:
        if method == "toString" or method == "name":
            return str(value)
        if method == "getName" and isinstance(value, JavaName):
            return value
        if method in ("toMillis",) and isinstance(value, tuple) and value[0] == "duration":
            return value[1]
        if method == "toLowerCase":
            return str(value).lower()
        raise Unresolved(f"method {method} on {value!r}")

    def call_args(self) -> list:
        self.take("(")
        args = []
        while self.peek() != ("op", ")"):
            args.append(self.expression())
            if self.peek() == ("op", ","):
                self.take(",")
        self.take(")")
        return args

    def primary(self) -> Any:
        kind, tok = self.take()
        if kind == "str":
            return bytes(tok[1:-1], "utf-8").decode("unicode_escape")
        if kind == "num":
            text = tok.replace("_", "").rstrip("lL")
            if text[-1] in "dDfF" or "." in text or "e" in text.lower():
                return float(text.rstrip("dDfF"))
            return int(text)
        if kind != "name":
            raise Unresolved(f"unexpected {tok}")
        if tok in ("true", "false"):
            return tok == "true"
        if tok == "null":
            return None
        if tok == "new":
            raise Unresolved("new")
        parts = [tok]
        while self.peek() == ("op", ".") and self.pos + 1 < len(self.tokens) and \
                self.tokens[self.pos + 1][0] == "name":
            nxt = self.tokens[self.pos + 1][1]
            if self.pos + 2 < len(self.tokens) and self.tokens[self.pos + 2] == ("op", "("):
                break
            if nxt == "class":
                self.pos += 2
                return self.postfix(self.class_name(parts[-1]))
            parts.append(nxt)
            self.pos += 2
        if self.peek() == ("op", ".") and self.pos + 2 < len(self.tokens) and \
                self.tokens[self.pos + 2] == ("op", "("):
            self.take(".")
            method = self.take()[1]
            args = self.call_args()
            return self.postfix(self.static_call(parts, method, args))
        if self.peek() == ("op", "("):
            args = self.call_args()
            return self.postfix(self.static_call([], parts[0], args))
        if len(parts) == 2 and parts[0] == "TimeUnit":
            return ("unit", TIME_UNITS[parts[1]])
        if len(parts) >= 2 and parts[-1] in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL") and \
                parts[-2] == "SecurityProtocol":
            return parts[-1]
        return self.postfix(self.ev.resolve_name(parts, self.context))

    def class_name(self, cls: str) -> JavaName:
        f = self.ev.src.class_file(cls, self.context)
        return JavaName(self.ev.src.package_of(f) + "." + cls if Path(f).stem == cls
                        else self.ev.src.package_of(f) + "." + Path(f).stem + "$" + cls)

    def static_call(self, owner: list[str], method: str, args: list) -> Any:
        if method in ("toString", "name") and len(owner) >= 2 and re.fullmatch(r"[A-Z0-9_]+", owner[-1]):
            # an enum constant: the string its constructor is given (its name in Kafka's enums), else its name
            text = self.ev.src.text(self.ev.src.class_file(owner[0], self.context))
            m = re.search(rf"\b{owner[-1]}\s*\(\s*\"((?:\\.|[^\"\\])*)\"", text)
            return m.group(1) if m and owner[-2] != "SecurityProtocol" else owner[-1]
        if (".".join(owner), method) in KNOWN_CALLS:
            return KNOWN_CALLS[(".".join(owner), method)]
        if owner == ["TimeUnit", *owner[1:]] and len(owner) == 2 and method.startswith("to"):
            target = {"toMillis": 1, "toSeconds": 1000, "toMinutes": 60_000, "toHours": 3_600_000,
                      "toDays": 86_400_000}[method]
            return args[0] * TIME_UNITS[owner[1]] // target
        if owner and owner[-1] == "Duration" and method.startswith("of"):
            unit = {"ofMillis": 1, "ofSeconds": 1000, "ofMinutes": 60_000, "ofHours": 3_600_000,
                    "ofDays": 86_400_000}[method]
            return ("duration", args[0] * unit)
        if method in ("of", "asList", "singletonList", "singleton", "emptyList", "emptySet") and \
                (not owner or owner[-1] in ("List", "Set", "Arrays", "Collections")):
            return list(args)
        if method == "join" and owner and owner[-1] in ("String", "Utils"):
            sep, items = (args[0], args[1:]) if owner[-1] == "String" else (args[1], [args[0]])
            flat = [x for item in items for x in (item if isinstance(item, list) else [item])]
            return sep.join(str(x) for x in flat)
        if owner and owner[-1] == "ServerTopicConfigSynonyms" and method == "serverSynonym":
            return dict(topic_synonyms(self.ev))[args[0]]
        if method == "valueOf" and owner and owner[-1] in ("String", "Long", "Integer", "Double"):
            return args[0]
        if method == "toString" and owner and owner[-1] in ("Long", "Integer", "Double"):
            return java_str(args[0])
        raise Unresolved(f"call {'.'.join(owner)}.{method}({args!r})")


def java_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, list):
        return ",".join(java_str(v) for v in value)
    return str(value)


def java_double(value: float) -> str:
    """Java's Double.toString."""
    if value == int(value) and abs(value) < 1e7:
        return f"{value:.1f}"
    if 1e-3 <= abs(value) < 1e7:
        return repr(value)
    mantissa, exp = f"{value!r}".split("e") if "e" in repr(value) else (repr(value), "0")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}E{int(exp)}"


# --- config definitions ----------------------------------------------------------------------------------------
def config_defs(ev: Evaluator, expr: str, context: str, out: dict, seen: set) -> None:
    """Every define() reachable from a ConfigDef expression (a field initializer, a method, a merge)."""
    for m in re.finditer(r"\.(define|defineInternal)\s*\(", expr):
        start = m.end()
        end = balanced_end(expr, start, ")")
        args = split_args(expr[start:end])
        name = ev.eval(args[0], context)
        type_name = args[1].split(".")[-1]
        if type_name not in TYPES:
            raise Unresolved(f"type {args[1]} of {name}")
        if len(args) >= 3 and args[2].split(".")[-1] in IMPORTANCE:
            default: Any = NO_DEFAULT
        else:
            default = NO_DEFAULT if args[2].endswith("NO_DEFAULT_VALUE") else ev.eval(args[2], context)
        out[name] = (type_name.lower(), default, m.group(1) == "defineInternal")
    for m in re.finditer(r"\b(?:(\w+)\.)?(\w*CONFIG_DEF|configDef)\b(\(\))?", expr):
        owner, field, call = m.group(1), m.group(2), m.group(3)
        if field in ("ConfigDef",) or (owner is None and field == "configDef" and not call):
            continue
        cls = owner or Path(context).stem
        try:
            f = ev.src.class_file(cls, context)
        except Unresolved:
            continue
        key = (f, field, bool(call))
        if key in seen:
            continue
        seen.add(key)
        text = ev.src.text(f)
        if call:
            mm = re.search(rf"\b{field}\s*\(\s*\)\s*\{{", text)
            if not mm:
                raise Unresolved(f"method {cls}.{field}()")
            body = text[mm.end():balanced_end(text, mm.end(), "}")]
            config_defs(ev, body, f, out, seen)
        else:
            try:
                init, f = ev.field_expr(f, field, cls)
            except Unresolved:
                continue
            config_defs(ev, init, f, out, seen)
            # defines added in a static block to this field
            for sm in re.finditer(rf"\b{field}\s*(\.\s*(define|defineInternal)\s*\()", text):
                stmt_end = balanced_end(text, sm.start())
                config_defs(ev, text[sm.start():stmt_end], f, out, seen)


def topic_synonym_firsts(ev: Evaluator) -> list[str]:
    """ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS.values(): each topic config's first broker synonym."""
    return [name for _, name in topic_synonyms(ev)]


def topic_synonyms(ev: Evaluator) -> list[tuple[str, str]]:
    """(topic config, its first broker synonym) from ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS."""
    f = ev.src.by_class["ServerTopicConfigSynonyms"][0]
    init, _ = ev.field_expr(f, "ALL_TOPIC_CONFIG_SYNONYMS")
    body = init[init.index("(") + 1:init.rindex(")")]
    names = []
    for entry in split_args(body):
        fn, rest = entry.split("(", 1)
        args = split_args(rest[:rest.rindex(")")])
        topic = ev.eval(args[0], f)
        first = ev.eval(args[1].split("(", 1)[1].split(",")[0].rstrip(")"), f) if len(args) > 1 and \
            args[1].startswith("new") else (ev.eval(args[1], f) if len(args) > 1 else None)
        prefix = {"sameName": "", "single": "", "sameNameWithLogPrefix": "log.", "singleWithLogPrefix": "log.",
                  "listWithLogPrefix": "log.", "sameNameWithLogCleanerPrefix": "log.cleaner.",
                  "singleWithLogCleanerPrefix": "log.cleaner."}[fn.strip()]
        names.append((topic, prefix + (first if first is not None else topic)))
    return names


def set_value(ev: Evaluator, cls_path: str, cls: str, field: str) -> set[str]:
    init, f = ev.field_expr(cls_path, field, cls)
    return set(set_expr(ev, init, f))


def set_expr(ev: Evaluator, init: str, f: str) -> list[str]:
    init = init.strip()
    if init.startswith("Stream.of("):
        body = init[len("Stream.of("):balanced_end(init, len("Stream.of("), ")")]
        out: list[str] = []
        for part in split_args(body):
            out += set_expr(ev, part, f)
        return out
    if init.endswith("TOPIC_CONFIG_SYNONYMS.values()"):
        return topic_synonym_firsts(ev)
    copy = re.fullmatch(r"Set\.copyOf\((\w+)\(\)\.names\(\)\)", init)
    if copy:  # the names a ConfigDef-building method defines
        found: dict = {}
        config_defs(ev, f"{Path(f).stem}.{copy.group(1)}()", f, found, set())
        return list(found)
    if re.fullmatch(r"[A-Za-z_][\w.]*", init) and "." in init:
        # another set constant: follow it (it may be a stream itself)
        *owner, name = init.split(".")
        cls_path = ev.src.class_file(owner[-1], f)
        inner, g = ev.field_expr(cls_path, name, owner[-1])
        return set_expr(ev, inner, g)
    if re.fullmatch(r"[A-Z_][A-Z0-9_]*", init):
        inner, g = ev.field_expr(f, init)
        return set_expr(ev, inner, g)
    value = ev.eval(init, f)
    if not isinstance(value, list):
        raise Unresolved(f"set {init!r}")
    return value


def dynamic_modes(ev: Evaluator) -> dict[str, str]:
    path = next(p for p in ev.src.by_class["DynamicBrokerConfig"] if p.startswith("server/"))
    every = set_value(ev, path, "DynamicBrokerConfig", "ALL_DYNAMIC_CONFIGS")
    # PER_BROKER_CONFIGS filters CLUSTER_LEVEL_LISTENER_CONFIGS out of its streamed sets
    init, f = ev.field_expr(path, "PER_BROKER_CONFIGS")
    per_broker = set(set_expr(ev, init[:init.index(".flatMap")], f)) - \
        set_value(ev, path, "DynamicBrokerConfig", "CLUSTER_LEVEL_LISTENER_CONFIGS")
    return {n: "per-broker" if n in per_broker else "cluster-wide" for n in every}


def default_text(type_name: str, value: Any) -> str | None:
    """Kafka's ConfigDef.convertToString of a default."""
    if value is NO_DEFAULT or value is None:
        return None
    if type_name == "list" and isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if type_name == "double":
        return java_double(float(value))
    return java_str(value)


def render(defs: dict, modes: dict[str, str], commit: str) -> str:
    lines = [
        '"""Apache Kafka\'s broker configs: name -> (type, default as Kafka shows it, update mode, internal).',
        "",
        f"Generated by tools/make_kafka_broker_configs.py from Apache Kafka commit {commit} (its",
        "AbstractKafkaConfig.CONFIG_DEF and DynamicBrokerConfig). Facts only; do not edit by hand. A default of None",
        "is Kafka's null or no default. Update modes as Kafka's documentation prints them: read-only (a restart is",
        "needed), per-broker (set on a broker id), cluster-wide (set on the cluster default or a broker id).",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "READ_ONLY, PER_BROKER, CLUSTER_WIDE = \"read-only\", \"per-broker\", \"cluster-wide\"",
        "",
        "KAFKA_BROKER_CONFIGS: dict[str, tuple[str, str | None, str, bool]] = {",
    ]
    mode_names = {"read-only": "READ_ONLY", "per-broker": "PER_BROKER", "cluster-wide": "CLUSTER_WIDE"}
    for name in sorted(defs):
        type_name, default, internal = defs[name]
        mode = modes.get(name, "read-only")
        lines.append(f"    {name!r}: ({type_name!r}, {default_text(type_name, default)!r}, {mode_names[mode]}, "
                     f"{internal}),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--git", required=True, help="a Kafka git directory (bare or .git)")
    parser.add_argument("--commit", required=True)
    parser.add_argument("--out", type=Path, default=ROOT / "broker" / "config" / "kafka_broker_defs.py")
    args = parser.parse_args()
    src = Source(args.git, args.commit)
    ev = Evaluator(src)
    root = next(p for p in src.by_class["AbstractKafkaConfig"])
    init, f = ev.field_expr(root, "CONFIG_DEF")
    defs: dict = {}
    config_defs(ev, init, f, defs, set())
    modes = dynamic_modes(ev)
    unknown = sorted(set(modes) - set(defs))
    if unknown:
        print(f"dynamic configs without a definition (left out): {unknown}", file=sys.stderr)
    args.out.write_text(render(defs, modes, args.commit), encoding="utf-8")
    print(f"{len(defs)} broker configs, {sum(1 for n in defs if n in modes)} dynamic -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

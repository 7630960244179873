package shoal.javaclients;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.protocol.Errors;

/**
 * What a client observed, as plain JSON data (maps, lists, strings, numbers) for the Python side to normalise and
 * compare. Kafka's result objects are walked by their public accessors (snake_case keys, so the normaliser's
 * timestamp and host/port rules apply); Kafka's Uuids become RFC 4122 text (normalised to <uuid:N>); an exception
 * becomes its class and Kafka error, never its message (free text).
 */
final class Json {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final Pattern BASE64_UUID = Pattern.compile("^[A-Za-z0-9_-]{22}$");
    private static final Pattern EMBEDDED_UUID =
        Pattern.compile("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
    private static final Set<String> SKIPPED = Set.of("hashCode", "toString", "getClass", "notify", "notifyAll",
        "wait", "clone", "finalize", "values", "all", "idString", "hasRack", "isEmpty", "unknownTaggedFields",
        "isDefault", "highestSupportedVersion", "lowestSupportedVersion", "apiKey", "data");
    private static final int MAX_DEPTH = 12;
    /** Producer ids a broker allocated, by first appearance in a scenario: the ids themselves differ by broker. */
    private static final Map<Long, String> PRODUCER_IDS = new java.util.HashMap<>();

    private Json() {}

    static String write(Object value) throws Exception {
        return MAPPER.writeValueAsString(value);
    }

    static Map<String, Object> readObject(String text) throws Exception {
        @SuppressWarnings("unchecked")
        Map<String, Object> map = MAPPER.readValue(text, Map.class);
        return map;
    }

    /** An ordered map from alternating keys and values: obj("a", 1, "b", 2). */
    static Map<String, Object> obj(Object... keysAndValues) {
        Map<String, Object> map = new LinkedHashMap<>();
        for (int i = 0; i < keysAndValues.length; i += 2) {
            map.put((String) keysAndValues[i], of(keysAndValues[i + 1]));
        }
        return map;
    }

    /** An exception as the client saw it: its class, and the Kafka error it stands for. */
    static Map<String, Object> error(Throwable t) {
        Throwable cause = unwrap(t);
        Map<String, Object> map = new LinkedHashMap<>();
        map.put("exception", cause.getClass().getSimpleName());
        map.put("error", Errors.forException(cause).name());
        return map;
    }

    static Throwable unwrap(Throwable t) {
        Throwable cause = t;
        while ((cause instanceof ExecutionException || cause instanceof CompletionException) && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause;
    }

    /** The outcome of a future: its value as JSON data, or {"exception": ..., "error": ...}. */
    static Object outcome(KafkaFuture<?> future) {
        long start = System.nanoTime();
        try {
            Object value = future.get(60, TimeUnit.SECONDS);
            return value == null ? "ok" : of(value);
        } catch (Exception e) {
            return error(e);
        } finally {
            Env.slow(start);
        }
    }

    static Object of(Object value) {
        return of(value, 0);
    }

    /** A producer id as compared: "<pid:N>" by order of first appearance in the scenario (-1 stays -1). */
    static Object producerId(long id) {
        return id < 0 ? id : PRODUCER_IDS.computeIfAbsent(id, k -> "<pid:" + (PRODUCER_IDS.size() + 1) + ">");
    }

    /** Forget the producer ids seen so far (each scenario numbers its own). */
    static void newScenario() {
        PRODUCER_IDS.clear();
    }

    static String uuidText(Uuid id) {
        return new UUID(id.getMostSignificantBits(), id.getLeastSignificantBits()).toString();
    }

    /**
     * A string holding a Kafka Uuid (a member id made by Uuid.randomUuid(), a cluster id): its RFC 4122 text. A
     * UUID inside a longer string (a classic member id, "client-id-UUID") becomes "<uuid>".
     */
    static String text(String value) {
        if (value.length() > 36 && EMBEDDED_UUID.matcher(value).find()) {
            return EMBEDDED_UUID.matcher(value).replaceAll("<uuid>");
        }
        if (BASE64_UUID.matcher(value).matches()) {
            try {
                byte[] bytes = Base64.getUrlDecoder().decode(value);
                if (bytes.length == 16 && (bytes[6] & 0xf0) == 0x40 && (bytes[8] & 0xc0) == 0x80) {
                    return uuidText(Uuid.fromString(value));
                }
            } catch (IllegalArgumentException e) {
                return value;
            }
        }
        return value;
    }

    static String key(Object key) {
        if (key instanceof TopicIdPartition tip) {
            return tip.topic() + "-" + tip.partition();
        }
        if (key instanceof TopicPartition tp) {
            return tp.topic() + "-" + tp.partition();
        }
        if (key instanceof TopicPartitionReplica r) {
            return r.topic() + "-" + r.partition() + "@" + r.brokerId();
        }
        if (key instanceof ConfigResource r) {
            return r.type() + ":" + r.name();
        }
        if (key instanceof Node n) {
            return String.valueOf(n.id());
        }
        if (key instanceof org.apache.kafka.common.quota.ClientQuotaEntity e) {
            return new TreeMap<>(e.entries()).toString();
        }
        if (key instanceof Uuid id) {
            return uuidText(id);
        }
        if (key instanceof Enum<?> e) {
            return e.name();
        }
        return text(String.valueOf(key));
    }

    static String snake(String name) {
        StringBuilder out = new StringBuilder();
        for (char c : name.toCharArray()) {
            if (Character.isUpperCase(c)) {
                out.append('_').append(Character.toLowerCase(c));
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }

    @SuppressWarnings("unchecked")
    private static Object of(Object value, int depth) {
        if (depth > MAX_DEPTH) {
            return "<too deep>";
        }
        if (value == null || value instanceof Boolean || value instanceof Number) {
            return value;
        }
        if (value instanceof String s) {
            return text(s);
        }
        if (value instanceof Character c) {
            return c.toString();
        }
        if (value instanceof Enum<?> e) {
            return e.name();
        }
        if (value instanceof Optional<?> o) {
            return o.map(v -> of(v, depth + 1)).orElse(null);
        }
        if (value instanceof OptionalInt o) {
            return o.isPresent() ? o.getAsInt() : null;
        }
        if (value instanceof OptionalLong o) {
            return o.isPresent() ? o.getAsLong() : null;
        }
        if (value instanceof Uuid id) {
            return uuidText(id);
        }
        if (value instanceof byte[] bytes) {
            return new String(bytes, java.nio.charset.StandardCharsets.UTF_8);
        }
        if (value instanceof Throwable t) {
            return error(t);
        }
        if (value instanceof KafkaFuture<?> f) {
            return outcome(f);
        }
        if (value instanceof TopicIdPartition || value instanceof TopicPartition
            || value instanceof TopicPartitionReplica || value instanceof ConfigResource) {
            return key(value);
        }
        if (value instanceof Node n) {
            return obj("id", n.id(), "host", n.host(), "port", n.port(), "rack", n.rack());
        }
        if (value instanceof org.apache.kafka.common.security.auth.KafkaPrincipal p) {
            return p.toString();
        }
        if (value instanceof Map<?, ?> m) {
            Map<String, Object> out = new TreeMap<>();
            for (Map.Entry<?, ?> e : m.entrySet()) {
                out.put(key(e.getKey()), of(e.getValue(), depth + 1));
            }
            return out;
        }
        if (value instanceof Collection<?> c) {
            List<Object> out = new ArrayList<>();
            for (Object item : c) {
                out.add(of(item, depth + 1));
            }
            if (!(c instanceof List<?>)) {  // a set or a bag: its order means nothing
                out.sort(ORDER);
            }
            return out;
        }
        if (value.getClass().isArray()) {
            return of(Arrays.asList((Object[]) value), depth);
        }
        return accessors(value, depth);
    }

    /** The unique names' suffix (Env.name): set orders must not depend on it, it differs by broker. */
    static String suffix = "";

    /** The order of a set's items: by their JSON text without the names' suffix. */
    static final Comparator<Object> ORDER = Comparator.comparing(Json::sortKey);

    static String sortKey(Object value) {
        String text;
        try {
            text = MAPPER.writeValueAsString(value);
        } catch (Exception e) {
            text = String.valueOf(value);
        }
        return suffix.isEmpty() ? text : text.replace("-" + suffix, "");
    }

    /** A Kafka result object by its public accessors (no-argument, non-void methods), keys in name order. */
    private static Object accessors(Object value, int depth) {
        Map<String, Object> out = new TreeMap<>();
        for (Method method : value.getClass().getMethods()) {
            if (method.getParameterCount() != 0 || Modifier.isStatic(method.getModifiers())
                || method.getReturnType() == void.class || SKIPPED.contains(method.getName())
                || method.getDeclaringClass() == Object.class) {
                continue;
            }
            Object result;
            try {
                method.setAccessible(true);
                result = method.invoke(value);
            } catch (ReflectiveOperationException | RuntimeException e) {
                result = error(e instanceof java.lang.reflect.InvocationTargetException ite ? ite.getCause() : e);
            }
            String key = snake(method.getName());
            boolean pid = key.equals("producer_id") && result instanceof Long;
            out.put(key, pid ? producerId((Long) result) : of(result, depth + 1));
        }
        if (out.isEmpty()) {
            return String.valueOf(value);
        }
        return out;
    }
}

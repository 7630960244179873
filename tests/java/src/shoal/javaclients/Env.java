package shoal.javaclients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The broker a scenario runs against, from the Python side's JSON argument: {"bootstrap": "127.0.0.1:PORT",
 * "security": "PLAINTEXT" | "SASL_PLAINTEXT", "users": {user: password}, "suffix": "1f3a9c2b"}. Resource names
 * are `base-suffix` (`name(base)`), reported back so that the comparison turns them into `base` again. Clients
 * made here are closed by `close()` at the end of each scenario.
 */
final class Env implements AutoCloseable {
    static final Duration DEADLINE = Duration.ofSeconds(45);

    final String bootstrap;
    final String security;
    final Map<String, String> users;
    final String suffix;
    /** Every name made by `name`, to its base: printed for the Python side's normaliser. */
    static final Map<String, String> NAMES = new java.util.TreeMap<>();
    private final List<AutoCloseable> open = new ArrayList<>();
    private Admin admin;

    @SuppressWarnings("unchecked")
    Env(Map<String, Object> args) {
        this.bootstrap = (String) args.get("bootstrap");
        this.security = (String) args.getOrDefault("security", "PLAINTEXT");
        this.users = (Map<String, String>) args.getOrDefault("users", Map.of());
        this.suffix = (String) args.get("suffix");
        Json.suffix = suffix;
    }

    /** A name no other test uses on the broker (normalised back to `base` in the comparison). */
    String name(String base) {
        String name = base + "-" + suffix;
        NAMES.put(name, base);
        return name;
    }

    boolean sasl() {
        return "SASL_PLAINTEXT".equals(security);
    }

    /** Client settings: the bootstrap server, SCRAM-SHA-512 as `user` on a SASL broker, then `extra` pairs. */
    Properties propsAs(String user, Object... extra) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        if (sasl()) {
            String who = user == null ? "admin" : user;
            props.putAll(scram(who, users.get(who)));
        }
        for (int i = 0; i < extra.length; i += 2) {
            props.put(extra[i], extra[i + 1]);
        }
        return props;
    }

    static Map<String, String> scram(String user, String password) {
        return Map.of("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "SCRAM-SHA-512",
            "sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + user + "\" password=\"" + password + "\";");
    }

    Properties props(Object... extra) {
        return propsAs(null, extra);
    }

    <T extends AutoCloseable> T track(T client) {
        open.add(client);
        return client;
    }

    /** The scenario's Admin client (as admin on a SASL broker), with the default timeouts (a loaded machine). */
    Admin admin() {
        if (admin == null) {
            admin = track(Admin.create(props()));
        }
        return admin;
    }

    Admin admin(Properties props) {
        return track(Admin.create(props));
    }

    KafkaProducer<String, String> producer(Object... extra) {
        return producer(props(extra));
    }

    KafkaProducer<String, String> producer(Properties props) {
        return track(new KafkaProducer<>(props, new StringSerializer(), new StringSerializer()));
    }

    KafkaConsumer<String, String> consumer(Object... extra) {
        return track(new KafkaConsumer<>(props(extra), new StringDeserializer(), new StringDeserializer()));
    }

    KafkaShareConsumer<String, String> shareConsumer(Object... extra) {
        return track(new KafkaShareConsumer<>(props(extra), new StringDeserializer(), new StringDeserializer()));
    }

    /**
     * Creates a topic and waits until the broker describes it with a leader for every partition and its configs:
     * Kafka's broker learns a new topic from its metadata log a moment after the controller answered.
     */
    void createTopic(String topic, int partitions, Map<String, String> configs) throws Exception {
        NewTopic newTopic = new NewTopic(topic, partitions, (short) 1).configs(configs);
        admin().createTopics(List.of(newTopic)).all().get(60, TimeUnit.SECONDS);
        awaitTopics(topic);
    }

    /** Waits until the broker describes each topic, a leader for each partition, and its configs. */
    void awaitTopics(String... topics) throws InterruptedException {
        await("topics " + List.of(topics) + " to be known", DEADLINE, () -> {
            try {
                for (var description : admin().describeTopics(List.of(topics)).allTopicNames()
                        .get(60, TimeUnit.SECONDS).values()) {
                    if (!description.partitions().stream().allMatch(p -> p.leader() != null)) {
                        return false;
                    }
                    ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, description.name());
                    admin().describeConfigs(List.of(resource)).all().get(60, TimeUnit.SECONDS);
                }
                return true;
            } catch (Exception e) {
                return false;
            }
        });
    }

    void createTopic(String topic, int partitions) throws Exception {
        createTopic(topic, partitions, Map.of());
    }

    /**
     * Sets configs on a GROUP resource (the group's share/consumer settings), on both brokers alike, and waits
     * until a describe shows them: Kafka's broker applies them from its metadata log a moment after the controller
     * answered, and a member joining before would start with the defaults.
     */
    void groupConfig(String group, Map<String, String> configs) throws Exception {
        List<AlterConfigOp> ops = new ArrayList<>();
        configs.forEach((k, v) -> ops.add(new AlterConfigOp(new ConfigEntry(k, v), AlterConfigOp.OpType.SET)));
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        admin().incrementalAlterConfigs(Map.of(resource, ops)).all().get(60, TimeUnit.SECONDS);
        await("the group configs of " + group, DEADLINE, () -> {
            try {
                var config = admin().describeConfigs(List.of(resource)).all().get(60, TimeUnit.SECONDS)
                    .get(resource);
                return configs.entrySet().stream().allMatch(e -> config.get(e.getKey()) != null
                    && e.getValue().equals(config.get(e.getKey()).value()));
            } catch (Exception e) {
                return false;
            }
        });
    }

    /** `count` records k<i>/v<i> to one partition in one batch (linger long, then flush), acknowledged. */
    List<RecordMetadata> produceBatch(String topic, int partition, int from, int count) throws Exception {
        KafkaProducer<String, String> producer = producer("linger.ms", "5000", "acks", "all");
        try {
            List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = from; i < from + count; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, partition, "k" + i, "v" + i)));
            }
            producer.flush();
            List<RecordMetadata> out = new ArrayList<>();
            for (var f : sent) {
                out.add(f.get(60, TimeUnit.SECONDS));
            }
            return out;
        } finally {
            producer.close(Duration.ofSeconds(10));
            open.remove(producer);
        }
    }

    private static final long STARTED = System.nanoTime();

    /** A step of a scenario on stderr, with the time since the JVM started (the client log shows where time goes). */
    static void log(String what) {
        System.err.printf("[%6d ms] %s%n", (System.nanoTime() - STARTED) / 1_000_000, what);
    }

    /** Logs a step that took more than half a second, by the scenario line that made it. */
    static void slow(long startNanos) {
        long ms = (System.nanoTime() - startNanos) / 1_000_000;
        if (ms > 500) {
            for (StackTraceElement frame : new Throwable().getStackTrace()) {
                String cls = frame.getClassName();
                if (cls.endsWith("Scenarios") && !frame.getMethodName().equals("attempt")
                        && !frame.getMethodName().equals("outcome")) {
                    log("slow step (" + ms + " ms) at " + frame.getFileName() + ":" + frame.getLineNumber());
                    return;
                }
            }
            log("slow step (" + ms + " ms)");
        }
    }

    /** Waits until `condition` holds, failing the scenario after `timeout`. */
    static void await(String what, Duration timeout, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out waiting for " + what);
            }
            Thread.sleep(20);
        }
    }

    /** A record as compared: partition, offset, key, value (and the share delivery count when there is one). */
    static Map<String, Object> record(ConsumerRecord<String, String> r) {
        return Json.obj("partition", r.partition(), "offset", r.offset(), "key", r.key(), "value", r.value(),
            "delivery_count", r.deliveryCount().map(c -> (int) c).orElse(null));
    }

    @Override
    public void close() {
        for (int i = open.size() - 1; i >= 0; i--) {
            try {
                AutoCloseable client = open.get(i);
                if (client instanceof KafkaConsumer<?, ?> c) {
                    c.close(CloseOptions.timeout(Duration.ofSeconds(5)));
                } else if (client instanceof KafkaShareConsumer<?, ?> c) {
                    c.close(Duration.ofSeconds(5));
                } else if (client instanceof KafkaProducer<?, ?> p) {
                    p.close(Duration.ofSeconds(5));
                } else if (client instanceof Admin a) {
                    a.close(Duration.ofSeconds(5));
                } else {
                    client.close();
                }
            } catch (Exception e) {
                // a client already closed by the scenario
            }
        }
        open.clear();
        admin = null;
    }
}

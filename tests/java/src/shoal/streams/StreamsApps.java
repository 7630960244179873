package shoal.streams;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * Kafka Streams applications for the Streams tests, several in one JVM (each its own KafkaStreams instance and
 * application id), against one broker:
 *
 *     java shoal.streams.StreamsApps --bootstrap HOST:PORT --guarantee at_least_once|exactly_once_v2
 *         --state-dir DIR [--group-protocol classic|streams] [--timeout-s 120] [--config NAME=VALUE ...]
 *         --app topology=wordcount,id=APP_ID,input=TOPIC[+TOPIC],output=TOPIC,expect=N[,guarantee=G]  [--app ...]
 *
 * Topologies (String keys and values; record caches off, so an aggregation emits every update):
 *   stateless  filter out values starting "skip", upper-case the rest
 *   wordcount  split values on spaces, group by word (a repartition topic), count (a changelogged store)
 *   join       stream (input 1) left-join table (input 2): "VALUE@TABLEVALUE", "VALUE@none" without a row
 *   windowed   sum the values per key in 10 s tumbling windows of record time, no grace, suppressed until the
 *              window closes: one record per window, keyed "KEY@WINDOWSTART"
 *
 * An app's own guarantee, if given, overrides --guarantee. A --config sets a Streams (or client) config of every
 * app, over the defaults below.
 *
 * With expect=N for every app, the program closes the apps (leaving the group) once a read_committed consumer has
 * seen N records on each app's output topic, and exits 0; with expect=0 they run until SIGTERM (a clean close) or
 * SIGKILL. Each state change is a JSON line on stdout: {"app": ID, "state": "RUNNING"}; {"done": true} ends a
 * run that reached its counts. An app that reaches ERROR, or a run past the timeout, exits non-zero.
 */
public final class StreamsApps {
    private StreamsApps() {}

    static final long STARTED = System.currentTimeMillis();

    record App(String topology, String id, List<String> inputs, String output, long expect, String guarantee) {
        static App parse(String spec) {
            Map<String, String> f = new HashMap<>();
            for (String part : spec.split(",")) {
                String[] kv = part.split("=", 2);
                f.put(kv[0], kv[1]);
            }
            return new App(f.get("topology"), f.get("id"), Arrays.asList(f.get("input").split("\\+")),
                f.get("output"), Long.parseLong(f.getOrDefault("expect", "0")), f.get("guarantee"));
        }
    }

    static Topology topology(App app) {
        StreamsBuilder builder = new StreamsBuilder();
        String in = app.inputs().get(0);
        switch (app.topology()) {
            case "stateless" -> builder.<String, String>stream(in)
                .filter((key, value) -> !value.startsWith("skip"))
                .mapValues(value -> value.toUpperCase(Locale.ROOT))
                .to(app.output());
            case "wordcount" -> builder.<String, String>stream(in)
                .flatMapValues(value -> Arrays.asList(value.split(" ")))
                .groupBy((key, word) -> word)
                .count(Materialized.as("word-counts"))
                .toStream()
                .mapValues(count -> Long.toString(count))
                .to(app.output());
            case "join" -> {
                KTable<String, String> table = builder.table(app.inputs().get(1));
                builder.<String, String>stream(in)
                    .leftJoin(table, (value, row) -> value + "@" + (row == null ? "none" : row))
                    .to(app.output());
            }
            case "windowed" -> builder.<String, String>stream(in)
                .groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ZERO))
                .aggregate(() -> 0L, (key, value, sum) -> sum + Long.parseLong(value),
                    Materialized.with(Serdes.String(), Serdes.Long()))
                .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
                .toStream((window, sum) -> window.key() + "@" + window.window().start())
                .mapValues(sum -> Long.toString(sum))
                .to(app.output());
            default -> throw new IllegalArgumentException("unknown topology " + app.topology());
        }
        return builder.build();
    }

    static Properties config(App app, Map<String, String> opts, List<String> extra) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app.id());
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        String guarantee = app.guarantee() != null ? app.guarantee() : opts.get("guarantee");
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, opts.getOrDefault("group-protocol", "classic"));
        p.put(StreamsConfig.STATE_DIR_CONFIG, opts.get("state-dir"));
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);  // every update downstream: a deterministic output
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        // A restarted application must not wait out the 45 s default for its dead predecessor to leave the group.
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 6000);
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 1000);
        for (String setting : extra) {
            String[] kv = setting.split("=", 2);
            p.put(kv[0], kv[1]);
        }
        return p;
    }

    static void emit(String json) {
        synchronized (System.out) {
            System.out.println(json);
            System.out.flush();
        }
    }

    /** Records on `topic` a read_committed consumer sees, from the beginning. */
    static final class OutputCounter implements AutoCloseable {
        final KafkaConsumer<byte[], byte[]> consumer;
        long seen;

        OutputCounter(String bootstrap, String topic) {
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
            consumer = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
            List<TopicPartition> parts = new ArrayList<>();
            consumer.partitionsFor(topic).forEach(info -> parts.add(new TopicPartition(topic, info.partition())));
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
        }

        long poll() {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
            seen += records.count();
            return seen;
        }

        @Override
        public void close() {
            consumer.close();
        }
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        List<App> apps = new ArrayList<>();
        List<String> extra = new ArrayList<>();
        for (int i = 0; i < args.length; i += 2) {
            String name = args[i].substring(2);
            if (name.equals("app")) {
                apps.add(App.parse(args[i + 1]));
            } else if (name.equals("config")) {
                extra.add(args[i + 1]);
            } else {
                opts.put(name, args[i + 1]);
            }
        }
        long timeoutMs = Long.parseLong(opts.getOrDefault("timeout-s", "120")) * 1000;
        List<KafkaStreams> running = new ArrayList<>();
        CountDownLatch failed = new CountDownLatch(1);
        for (App app : apps) {
            KafkaStreams streams = new KafkaStreams(topology(app), config(app, opts, extra));
            streams.setStateListener((now, before) -> {
                emit(String.format("{\"app\": \"%s\", \"state\": \"%s\", \"ms\": %d}", app.id(), now,
                    System.currentTimeMillis() - STARTED));
                if (now == KafkaStreams.State.ERROR) {
                    failed.countDown();
                }
            });
            running.add(streams);
        }
        CloseOptions leave = CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
            .withTimeout(Duration.ofSeconds(30));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> running.forEach(s -> s.close(leave))));
        running.forEach(KafkaStreams::start);

        boolean counting = apps.stream().allMatch(app -> app.expect() > 0);
        long deadline = System.currentTimeMillis() + timeoutMs;
        if (!counting) {
            failed.await(timeoutMs, TimeUnit.MILLISECONDS);
            System.exit(failed.getCount() == 0 ? 1 : 2);
        }
        List<OutputCounter> counters = new ArrayList<>();
        for (App app : apps) {
            counters.add(new OutputCounter(opts.get("bootstrap"), app.output()));
        }
        while (true) {
            boolean all = true;
            for (int i = 0; i < apps.size(); i++) {
                all &= counters.get(i).poll() >= apps.get(i).expect();
            }
            if (all) {
                break;
            }
            if (failed.getCount() == 0 || System.currentTimeMillis() > deadline) {
                StringBuilder seen = new StringBuilder();
                for (int i = 0; i < apps.size(); i++) {
                    seen.append(apps.get(i).id()).append(": ").append(counters.get(i).seen).append('/')
                        .append(apps.get(i).expect()).append("; ");
                }
                System.err.println((failed.getCount() == 0 ? "an app failed" : "timed out") + ", outputs " + seen);
                System.exit(failed.getCount() == 0 ? 1 : 2);
            }
        }
        counters.forEach(OutputCounter::close);
        emit(String.format("{\"complete\": true, \"ms\": %d}", System.currentTimeMillis() - STARTED));
        running.parallelStream().forEach(s -> s.close(leave));  // each close commits and leaves: side by side
        emit(String.format("{\"done\": true, \"ms\": %d}", System.currentTimeMillis() - STARTED));
        System.exit(0);  // the shutdown hook's second close returns at once
    }
}

package shoal.javaclients;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.admin.StreamsGroupSubtopologyDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams 4.4 application on the streams rebalance protocol (KIP-1071, `group.protocol=streams`): a word
 * count, whose re-keying makes a repartition topic and whose count a changelog topic, both created by the broker
 * from the topology the application sends in its StreamsGroupHeartbeat. Observed: the final counts it writes, the
 * internal topics the broker made, and the streams group as Admin#describeStreamsGroups shows it while the
 * application runs and once it has closed. Two instances: how they split the tasks, and that neither gets warm-up
 * tasks.
 */
final class StreamsGroupScenarios {
    private StreamsGroupScenarios() {}

    static Map<String, Scenario> all() {
        Map<String, Scenario> all = new LinkedHashMap<>();
        all.put("word_count", env -> wordCount(env, "alo", "at_least_once"));
        all.put("word_count_exactly_once", env -> wordCount(env, "eos", "exactly_once_v2"));
        all.put("two_instances", StreamsGroupScenarios::twoInstances);
        return all;
    }

    private static final List<String> LINES = List.of(
        "the quick brown fox", "jumps over the lazy dog", "the dog sleeps", "a fox and a dog",
        "quick quick slow", "over and over", "the end");

    private static Map<String, Long> expectedCounts() {
        Map<String, Long> counts = new TreeMap<>();
        for (String line : LINES) {
            for (String word : line.split(" ")) {
                counts.merge(word, 1L, Long::sum);
            }
        }
        return counts;
    }

    static Object wordCount(Env env, String tag, String guarantee) throws Exception {
        String input = env.name("sg-lines-" + tag);
        String output = env.name("sg-counts-" + tag);
        String app = env.name("sg-wordcount-" + tag);
        env.createTopic(input, 3);
        env.createTopic(output, 1);
        // No initial rebalance delay (Kafka's 3 s default would only slow the test down, on both brokers alike).
        env.groupConfig(app, Map.of("streams.initial.rebalance.delay.ms", "0"));
        try (KafkaProducer<String, String> producer = env.producer("acks", "all")) {
            for (int i = 0; i < LINES.size(); i++) {
                producer.send(new ProducerRecord<>(input, "line" + i, LINES.get(i))).get(60, TimeUnit.SECONDS);
            }
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMap((key, line) -> {
                List<KeyValue<String, String>> words = new ArrayList<>();
                for (String word : line.split(" ")) {
                    words.add(KeyValue.pair(word, word));
                }
                return words;
            })
            .groupByKey(Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        Path stateDir = Files.createTempDirectory("shoal-streams-");
        Properties props = env.props(
            StreamsConfig.APPLICATION_ID_CONFIG, app,
            StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams",
            StreamsConfig.STATE_DIR_CONFIG, stateDir.toString(),
            StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee,
            StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100",
            StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0",
            StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1",
            "consumer.auto.offset.reset", "earliest");
        Map<String, Object> out = new LinkedHashMap<>();
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        try {
            Env.log("starting the application " + app);
            streams.start();
            Env.await("the application to run", Env.DEADLINE, () -> streams.state() == KafkaStreams.State.RUNNING);
            Map<String, Long> expected = expectedCounts();
            Map<String, Long> counts = new TreeMap<>();
            try (KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(
                    env.props("group.id", env.name("sg-reader-" + tag), "auto.offset.reset", "earliest",
                        "isolation.level", "read_committed"),
                    new StringDeserializer(), new LongDeserializer())) {
                consumer.subscribe(List.of(output));
                long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
                while (!counts.equals(expected) && System.nanoTime() < deadline) {
                    for (ConsumerRecord<String, Long> r : consumer.poll(Duration.ofMillis(200))) {
                        counts.put(r.key(), r.value());
                    }
                }
            }
            Env.log("counts read: " + counts.size());
            out.put("counts", counts);
            out.put("counts_complete", counts.equals(expected));
            out.put("state", streams.state().toString());
            out.put("group_running", describe(env, app));
            Map<String, Integer> internal = new TreeMap<>();
            for (var d : env.admin().describeTopics(List.of(app + "-words-repartition", app + "-counts-changelog"))
                    .allTopicNames().get(60, TimeUnit.SECONDS).values()) {
                internal.put(d.name(), d.partitions().size());
            }
            out.put("internal_topics", internal);
        } finally {
            streams.close(Duration.ofSeconds(30));
        }
        Env.log("closed");
        out.put("closed_state", streams.state().toString());
        Env.await("the member to leave", Env.DEADLINE, () -> {
            try {
                return env.admin().describeStreamsGroups(List.of(app)).all().get(60, TimeUnit.SECONDS)
                    .get(app).members().isEmpty();
            } catch (Exception e) {
                return false;
            }
        });
        out.put("group_closed", describe(env, app));
        return out;
    }

    /**
     * Two instances of one application (two processes' worth: each its own state directory), the second started
     * once the first runs: the broker splits the tasks between them, revoking from the first before the second
     * gets them, and the counts come out complete.
     */
    static Object twoInstances(Env env) throws Exception {
        String input = env.name("sg-lines-two");
        String output = env.name("sg-counts-two");
        String app = env.name("sg-wordcount-two");
        env.createTopic(input, 4);
        env.createTopic(output, 1);
        // Warm-up replicas allowed and no lag acceptable: a broker refining the assignment with warm-up tasks would
        // give the second instance some for the counts' store (Kafka 4.4 gives none).
        env.groupConfig(app, Map.of("streams.initial.rebalance.delay.ms", "0", "streams.num.warmup.replicas", "2",
            "streams.acceptable.recovery.lag", "0"));
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMap((key, line) -> {
                List<KeyValue<String, String>> words = new ArrayList<>();
                for (String word : line.split(" ")) {
                    words.add(KeyValue.pair(word, word));
                }
                return words;
            })
            .groupByKey(Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        var topology = builder.build();
        List<KafkaStreams> instances = new ArrayList<>();
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            for (int i = 0; i < 2; i++) {
                Properties props = env.props(
                    StreamsConfig.APPLICATION_ID_CONFIG, app,
                    StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams",
                    StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("shoal-streams-").toString(),
                    StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100",
                    StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0",
                    "consumer.auto.offset.reset", "earliest");
                KafkaStreams streams = new KafkaStreams(topology, props);
                instances.add(streams);
                streams.start();
                Env.log("instance " + i + " started");
                Env.await("instance " + i + " to run", Env.DEADLINE,
                    () -> streams.state() == KafkaStreams.State.RUNNING);
            }
            Env.await("both instances to own tasks", Duration.ofSeconds(90), () -> {
                try {
                    StreamsGroupDescription d = env.admin().describeStreamsGroups(List.of(app)).all()
                        .get(60, TimeUnit.SECONDS).get(app);
                    return d.groupState() == org.apache.kafka.common.GroupState.STABLE && d.members().size() == 2
                        && d.members().stream().allMatch(m -> !m.assignment().activeTasks().isEmpty());
                } catch (Exception e) {
                    return false;
                }
            });
            try (KafkaProducer<String, String> producer = env.producer("acks", "all")) {
                for (int i = 0; i < LINES.size(); i++) {
                    producer.send(new ProducerRecord<>(input, "line" + i, LINES.get(i))).get(60, TimeUnit.SECONDS);
                }
            }
            Map<String, Long> expected = expectedCounts();
            Map<String, Long> counts = new TreeMap<>();
            try (KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(
                    env.props("group.id", env.name("sg-reader-two"), "auto.offset.reset", "earliest"),
                    new StringDeserializer(), new LongDeserializer())) {
                consumer.subscribe(List.of(output));
                long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
                while (!counts.equals(expected) && System.nanoTime() < deadline) {
                    for (ConsumerRecord<String, Long> r : consumer.poll(Duration.ofMillis(200))) {
                        counts.put(r.key(), r.value());
                    }
                }
            }
            out.put("counts", counts);
            StreamsGroupDescription d = env.admin().describeStreamsGroups(List.of(app)).all()
                .get(60, TimeUnit.SECONDS).get(app);
            out.put("state", d.groupState().toString());
            List<Integer> tasksPerMember = new ArrayList<>();
            for (StreamsGroupMemberDescription m : d.members()) {
                tasksPerMember.add(m.assignment().activeTasks().stream().mapToInt(t -> t.partitions().size()).sum());
            }
            tasksPerMember.sort(null);
            out.put("active_tasks_per_member", tasksPerMember);
            int warmups = 0;
            for (StreamsGroupMemberDescription m : d.members()) {
                warmups += m.assignment().warmupTasks().size() + m.targetAssignment().warmupTasks().size();
            }
            out.put("warmup_tasks", warmups);
            out.put("states", instances.stream().map(k -> k.state().toString()).toList());
        } finally {
            for (KafkaStreams streams : instances) {
                streams.close(Duration.ofSeconds(30));
            }
        }
        return out;
    }

    private static Map<String, Object> describe(Env env, String app) throws Exception {
        StreamsGroupDescription d = env.admin().describeStreamsGroups(List.of(app)).all()
            .get(60, TimeUnit.SECONDS).get(app);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("state", d.groupState().toString());
        out.put("topology_epoch", d.topologyEpoch());
        out.put("assignor", d.assignorName().orElse(null));
        List<Object> subtopologies = new ArrayList<>();
        for (StreamsGroupSubtopologyDescription s : d.subtopologies()) {
            Map<String, Object> sub = new LinkedHashMap<>();
            sub.put("id", s.subtopologyId());
            sub.put("source_topics", s.sourceTopics());
            sub.put("repartition_sink_topics", s.repartitionSinkTopics());
            Map<String, Integer> changelogs = new TreeMap<>();
            s.stateChangelogTopics().forEach((k, v) -> changelogs.put(k, v.partitions()));
            sub.put("changelog_topics", changelogs);
            Map<String, Integer> repartitions = new TreeMap<>();
            s.repartitionSourceTopics().forEach((k, v) -> repartitions.put(k, v.partitions()));
            sub.put("repartition_source_topics", repartitions);
            subtopologies.add(sub);
        }
        out.put("subtopologies", subtopologies);
        List<Object> members = new ArrayList<>();
        for (StreamsGroupMemberDescription m : d.members()) {
            Map<String, Object> member = new LinkedHashMap<>();
            member.put("member_epoch_matches_group", m.memberEpoch() == d.groupEpoch());
            member.put("topology_epoch", m.topologyEpoch());
            member.put("active", tasks(m.assignment()));
            member.put("target_active", tasks(m.targetAssignment()));
            member.put("is_classic", m.isClassic());
            members.add(member);
        }
        out.put("members", members);
        return out;
    }

    private static Map<String, List<Integer>> tasks(StreamsGroupMemberAssignment a) {
        Map<String, List<Integer>> out = new TreeMap<>();
        for (var t : a.activeTasks()) {
            List<Integer> partitions = new ArrayList<>(t.partitions());
            partitions.sort(null);
            out.put(t.subtopologyId(), partitions);
        }
        return out;
    }
}

package shoal.javaclients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

/**
 * The Admin calls only a SASL broker with an authorizer serves: SCRAM credentials (and logging in with them),
 * ACLs (and what they let alice do), delegation tokens on a broker without a token secret (disabled).
 */
final class SecurityScenarios {
    private SecurityScenarios() {}

    static Map<String, Scenario> all() {
        Map<String, Scenario> all = new LinkedHashMap<>();
        all.put("scram", SecurityScenarios::scram);
        all.put("acls", SecurityScenarios::acls);
        all.put("tokens_disabled", SecurityScenarios::tokensDisabled);
        return all;
    }

    static <T> T get(KafkaFuture<T> future) throws Exception {
        return future.get(60, TimeUnit.SECONDS);
    }

    /** Waits (up to 15 s, then goes on): Kafka's brokers learn SCRAM users and ACLs from the metadata log. */
    static void settle(BooleanSupplier condition) {
        long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
        while (System.nanoTime() < deadline && !condition.getAsBoolean()) {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    /** An Admin client logging in as `user` with `password` (SCRAM-SHA-512 unless `mechanism` says otherwise). */
    static Admin adminAs(Env env, String user, String password, String mechanism) {
        Properties props = new Properties();
        props.put("bootstrap.servers", env.bootstrap);
        props.putAll(Env.scram(user, password));
        props.put("sasl.mechanism", mechanism);
        props.put("default.api.timeout.ms", "15000");
        props.put("request.timeout.ms", "10000");
        return env.admin(props);
    }

    /** Whether a new client logging in as `user` with `password` can describe the cluster. */
    static Object login(Env env, String user, String password, String mechanism) {
        Properties props = new Properties();
        props.put("bootstrap.servers", env.bootstrap);
        props.putAll(Env.scram(user, password));
        props.put("sasl.mechanism", mechanism);
        props.put("default.api.timeout.ms", "10000");
        props.put("request.timeout.ms", "5000");
        try (Admin admin = Admin.create(props)) {
            return Json.outcome(admin.describeCluster().clusterId().thenApply(id -> "logged in"));
        }
    }

    static Object credentials(Admin admin, List<String> users) {
        try {
            Map<String, Object> out = new TreeMap<>();
            for (var e : get(admin.describeUserScramCredentials(users).all()).entrySet()) {
                out.put(e.getKey(), infos(e.getValue()));
            }
            return out;
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    static Object infos(UserScramCredentialsDescription description) {
        List<String> out = new ArrayList<>();
        for (ScramCredentialInfo info : description.credentialInfos()) {
            out.add(info.mechanism() + "/" + info.iterations());
        }
        out.sort(null);
        return out;
    }

    static Object alter(Admin admin, UserScramCredentialAlteration... alterations) {
        return Json.of(admin.alterUserScramCredentials(List.of(alterations)).values());
    }

    static Object scram(Env env) throws Exception {
        Admin admin = env.admin();
        String user = env.name("scram-user");
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("describe_format_time_users", credentials(admin, List.of("admin", "alice")));
        out.put("describe_unknown_user", credentials(admin, List.of(user)));
        out.put("describe_known_and_unknown", Json.of(admin.describeUserScramCredentials(
            List.of("alice", user)).description(user)));
        out.put("upsert_twice_in_one_request", alter(admin,
            new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                "first-secret"),
            new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                "first-secret")));
        out.put("upsert_sha_256", alter(admin, new UserScramCredentialUpsertion(user,
            new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "first-secret")));
        out.put("upsert_sha_512", alter(admin, new UserScramCredentialUpsertion(user,
            new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), "first-secret")));
        settle(() -> String.valueOf(credentials(admin, List.of(user))).contains("SCRAM_SHA_512"));
        out.put("describe_upserted", credentials(admin, List.of(user)));
        out.put("login_sha_512", login(env, user, "first-secret", "SCRAM-SHA-512"));
        out.put("login_sha_256", login(env, user, "first-secret", "SCRAM-SHA-256"));
        out.put("login_wrong_password", login(env, user, "not-the-secret", "SCRAM-SHA-512"));
        Map<String, Object> bad = new TreeMap<>();
        bad.put("too_few_iterations", alter(admin, new UserScramCredentialUpsertion(env.name("scram-bad-1"),
            new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10), "x")));
        bad.put("too_many_iterations", alter(admin, new UserScramCredentialUpsertion(env.name("scram-bad-2"),
            new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100_000), "x")));
        bad.put("empty_user", alter(admin, new UserScramCredentialUpsertion("",
            new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "x")));
        bad.put("delete_missing_mechanism", alter(admin, new UserScramCredentialDeletion(env.name("scram-bad-3"),
            ScramMechanism.SCRAM_SHA_512)));
        bad.put("upsert_and_delete_together", alter(admin,
            new UserScramCredentialUpsertion(env.name("scram-bad-4"),
                new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "x"),
            new UserScramCredentialDeletion(env.name("scram-bad-4"), ScramMechanism.SCRAM_SHA_256)));
        out.put("invalid", bad);
        out.put("change_password", alter(admin, new UserScramCredentialUpsertion(user,
            new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), "second-secret")));
        settle(() -> login(env, user, "second-secret", "SCRAM-SHA-512").equals("logged in"));
        out.put("login_new_password", login(env, user, "second-secret", "SCRAM-SHA-512"));
        out.put("login_old_password", login(env, user, "first-secret", "SCRAM-SHA-512"));
        out.put("delete_sha_256", alter(admin, new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)));
        settle(() -> credentials(admin, List.of(user)) instanceof Map<?, ?> m
            && String.valueOf(m.get(user)).indexOf("256") < 0);
        out.put("describe_after_delete", credentials(admin, List.of(user)));
        out.put("delete_sha_256_again", alter(admin, new UserScramCredentialDeletion(user,
            ScramMechanism.SCRAM_SHA_256)));
        out.put("delete_sha_512", alter(admin, new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)));
        settle(() -> !String.valueOf(credentials(admin, List.of(user))).contains("SCRAM_SHA"));
        out.put("describe_deleted_user", credentials(admin, List.of(user)));
        List<String> listed = new ArrayList<>();
        for (String name : get(admin.describeUserScramCredentials().users())) {
            if (name.equals("admin") || name.equals("alice") || name.startsWith("scram-")) {
                listed.add(name);
            }
        }
        listed.sort(Json.ORDER);
        out.put("describe_all_ours", listed);
        return out;
    }

    static Object acls(Env env) throws Exception {
        Admin admin = env.admin();
        String topic = env.name("acl-topic");
        String hidden = env.name("acl-hidden");
        String denied = env.name("acl-denied");
        String prefix = env.name("acl-prefix");
        String group = env.name("acl-group");
        admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1), new NewTopic(hidden, 1, (short) 1),
            new NewTopic(denied, 1, (short) 1), new NewTopic(prefix + "-a", 1, (short) 1))).all()
            .get(60, TimeUnit.SECONDS);
        env.awaitTopics(topic, hidden, denied, prefix + "-a");
        String alice = "User:alice";
        List<AclBinding> bindings = List.of(
            new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                new AccessControlEntry(alice, "*", AclOperation.READ, AclPermissionType.ALLOW)),
            new AclBinding(new ResourcePattern(ResourceType.TOPIC, prefix, PatternType.PREFIXED),
                new AccessControlEntry(alice, "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)),
            new AclBinding(new ResourcePattern(ResourceType.TOPIC, denied, PatternType.LITERAL),
                new AccessControlEntry(alice, "*", AclOperation.ALL, AclPermissionType.ALLOW)),
            new AclBinding(new ResourcePattern(ResourceType.TOPIC, denied, PatternType.LITERAL),
                new AccessControlEntry(alice, "*", AclOperation.WRITE, AclPermissionType.DENY)),
            new AclBinding(new ResourcePattern(ResourceType.GROUP, group, PatternType.LITERAL),
                new AccessControlEntry(alice, "127.0.0.1", AclOperation.READ, AclPermissionType.ALLOW)));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("create", Json.of(admin.createAcls(bindings).values()));
        AclBindingFilter aliceFilter = new AclBindingFilter(ResourcePatternFilter.ANY,
            new AccessControlEntryFilter(alice, null, AclOperation.ANY, AclPermissionType.ANY));
        settle(() -> ours(admin, aliceFilter, env.suffix) instanceof List<?> l && l.size() == bindings.size());
        Map<String, Object> bad = new TreeMap<>();
        bad.put("unknown_principal_type", Json.of(admin.createAcls(List.of(new AclBinding(
            new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
            new AccessControlEntry("Robot:r2", "*", AclOperation.READ, AclPermissionType.ALLOW)))).values()));
        bad.put("bad_host", Json.of(admin.createAcls(List.of(new AclBinding(
            new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
            new AccessControlEntry(alice, "not a host", AclOperation.READ, AclPermissionType.ALLOW)))).values()));
        bad.put("cluster_named_otherwise", Json.of(admin.createAcls(List.of(new AclBinding(
            new ResourcePattern(ResourceType.CLUSTER, "not-kafka-cluster", PatternType.LITERAL),
            new AccessControlEntry(alice, "*", AclOperation.ALTER, AclPermissionType.ALLOW)))).values()));
        out.put("create_invalid", bad);
        out.put("describe_alice", ours(admin, aliceFilter, env.suffix));
        out.put("describe_topic_literal", ours(admin, new AclBindingFilter(
            new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.LITERAL), AccessControlEntryFilter.ANY),
            env.suffix));
        out.put("describe_matching_prefixed_topic", ours(admin, new AclBindingFilter(
            new ResourcePatternFilter(ResourceType.TOPIC, prefix + "-a", PatternType.MATCH),
            AccessControlEntryFilter.ANY), env.suffix));
        out.put("describe_deny", ours(admin, new AclBindingFilter(ResourcePatternFilter.ANY,
            new AccessControlEntryFilter(alice, null, AclOperation.ANY, AclPermissionType.DENY)), env.suffix));

        Admin asAlice = adminAs(env, "alice", env.users.get("alice"), "SCRAM-SHA-512");
        out.put("alice_describe_topics", Json.of(asAlice.describeTopics(List.of(topic, hidden, prefix + "-a"),
            new org.apache.kafka.clients.admin.DescribeTopicsOptions().includeAuthorizedOperations(true))
            .topicNameValues()));
        List<String> visible = new ArrayList<>();
        for (String name : get(asAlice.listTopics().names())) {
            if (name.endsWith(env.suffix) || name.endsWith(env.suffix + "-a")) {
                visible.add(name);
            }
        }
        visible.sort(Json.ORDER);
        out.put("alice_lists", visible);
        out.put("alice_create_topic", Json.outcome(asAlice.createTopics(List.of(
            new NewTopic(env.name("acl-by-alice"), 1, (short) 1))).all()));
        out.put("alice_cluster_operations", Json.outcome(asAlice.describeCluster(
            new DescribeClusterOptions().includeAuthorizedOperations(true)).authorizedOperations()));
        out.put("alice_describe_acls", ours(asAlice, aliceFilter, env.suffix));
        Properties producerProps = new Properties();
        producerProps.put("bootstrap.servers", env.bootstrap);
        producerProps.putAll(Env.scram("alice", env.users.get("alice")));
        producerProps.put("max.block.ms", "10000");
        producerProps.put("delivery.timeout.ms", "10000");
        producerProps.put("request.timeout.ms", "5000");
        producerProps.put("enable.idempotence", "false");
        KafkaProducer<String, String> producer = env.producer(producerProps);
        out.put("alice_produce_denied", ShareScenarios.attempt(() ->
            producer.send(new ProducerRecord<>(denied, 0, "k", "v")).get(30, TimeUnit.SECONDS)));
        out.put("alice_produce_read_only", ShareScenarios.attempt(() ->
            producer.send(new ProducerRecord<>(topic, 0, "k", "v")).get(30, TimeUnit.SECONDS)));

        out.put("delete_prefixed", deleted(admin, new AclBindingFilter(
            new ResourcePatternFilter(ResourceType.TOPIC, prefix, PatternType.PREFIXED),
            AccessControlEntryFilter.ANY), env.suffix));
        out.put("delete_nothing", deleted(admin, new AclBindingFilter(
            new ResourcePatternFilter(ResourceType.TOPIC, env.name("acl-none"), PatternType.LITERAL),
            AccessControlEntryFilter.ANY), env.suffix));
        out.put("delete_alice_ours", deleted(admin, new AclBindingFilter(
            new ResourcePatternFilter(ResourceType.ANY, null, PatternType.ANY),
            new AccessControlEntryFilter(alice, null, AclOperation.ANY, AclPermissionType.ANY)), env.suffix));
        settle(() -> ours(admin, aliceFilter, env.suffix) instanceof List<?> l && l.isEmpty());
        out.put("describe_after_delete", ours(admin, aliceFilter, env.suffix));
        // what else was made on the shared broker: the other principal's ACL
        admin.deleteAcls(List.of(new AclBindingFilter(
            new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.LITERAL),
            AccessControlEntryFilter.ANY))).all().get(60, TimeUnit.SECONDS);
        return out;
    }

    /** describeAcls with `filter`, only the bindings on this scenario's resources (other tests make ACLs too). */
    static Object ours(Admin admin, AclBindingFilter filter, String suffix) {
        try {
            return bindings(get(admin.describeAcls(filter).values()), suffix);
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    /** deleteAcls with `filter`: the bindings it deleted on this scenario's resources. */
    static Object deleted(Admin admin, AclBindingFilter filter, String suffix) {
        try {
            return bindings(get(admin.deleteAcls(List.of(filter)).all()), suffix);
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    static List<Object> bindings(java.util.Collection<AclBinding> bindings, String suffix) {
        List<Object> out = new ArrayList<>();
        for (AclBinding binding : bindings) {
            if (binding.pattern().name().contains(suffix)) {
                out.add(Json.obj("resource_type", binding.pattern().resourceType(),
                    "name", binding.pattern().name(), "pattern_type", binding.pattern().patternType(),
                    "principal", binding.entry().principal(), "acl_host", binding.entry().host(),
                    "operation", binding.entry().operation(), "permission", binding.entry().permissionType()));
            }
        }
        out.sort(Json.ORDER);
        return out;
    }

    static Object tokensDisabled(Env env) throws Exception {
        Admin admin = env.admin();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("create", Json.outcome(admin.createDelegationToken().delegationToken()));
        out.put("describe", Json.outcome(admin.describeDelegationToken().delegationTokens()));
        out.put("renew", Json.outcome(admin.renewDelegationToken("no-such-hmac".getBytes()).expiryTimestamp()));
        out.put("expire", Json.outcome(admin.expireDelegationToken("no-such-hmac".getBytes()).expiryTimestamp()));
        return out;
    }
}

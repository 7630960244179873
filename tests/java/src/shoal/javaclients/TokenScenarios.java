package shoal.javaclients;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.CreateDelegationTokenOptions;
import org.apache.kafka.clients.admin.DescribeDelegationTokenOptions;
import org.apache.kafka.clients.admin.ExpireDelegationTokenOptions;
import org.apache.kafka.clients.admin.RenewDelegationTokenOptions;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.security.token.delegation.TokenInformation;

/**
 * Delegation tokens (KIP-48) on SASL brokers with a token secret: create (for oneself and for another owner, with
 * renewers, a lifetime capped by the broker's maximum), describe (by owner, as a renewer), renew, log in with a
 * token, what a token's login may not do, expire.
 */
final class TokenScenarios {
    private TokenScenarios() {}

    static final KafkaPrincipal ALICE = new KafkaPrincipal(KafkaPrincipal.USER_TYPE, "alice");
    static final long HOUR = 3_600_000L;
    static final long DAY = 24 * HOUR;

    static Map<String, Scenario> all() {
        Map<String, Scenario> all = new LinkedHashMap<>();
        all.put("tokens", TokenScenarios::tokens);
        return all;
    }

    /** A token as compared: who, and its lifetimes relative to its issue time (the token id and HMAC are random). */
    static Object view(TokenInformation info) {
        List<String> renewers = new ArrayList<>(info.renewersAsString());
        renewers.sort(null);
        return Json.obj("owner", info.ownerAsString(), "requester", info.tokenRequesterAsString(),
            "renewers", renewers, "expiry_after_issue_ms", info.expiryTimestamp() - info.issueTimestamp(),
            "max_after_issue_ms", info.maxTimestamp() - info.issueTimestamp());
    }

    static Object view(DelegationToken token) {
        Map<String, Object> out = new TreeMap<>();
        out.put("info", view(token.tokenInfo()));
        out.put("hmac_bytes", token.hmac().length);
        out.put("token_id_chars", token.tokenInfo().tokenId().length());
        return out;
    }

    static Object create(Admin admin, CreateDelegationTokenOptions options, Map<String, DelegationToken> made,
                         String as) {
        try {
            DelegationToken token = admin.createDelegationToken(options).delegationToken().get(60, TimeUnit.SECONDS);
            made.put(as, token);
            return view(token);
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    /** describeDelegationToken: the tokens of this scenario among those described, by the name it gave them. */
    static Object described(Admin admin, DescribeDelegationTokenOptions options, Map<String, DelegationToken> made) {
        try {
            Map<String, Object> out = new TreeMap<>();
            for (DelegationToken token : admin.describeDelegationToken(options).delegationTokens()
                    .get(60, TimeUnit.SECONDS)) {
                made.forEach((name, mine) -> {
                    if (mine.tokenInfo().tokenId().equals(token.tokenInfo().tokenId())) {
                        out.put(name, view(token.tokenInfo()));
                    }
                });
            }
            return out;
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    static Admin adminAs(Env env, String user) {
        return SecurityScenarios.adminAs(env, user, env.users.get(user), "SCRAM-SHA-512");
    }

    /** An Admin client logged in with a delegation token (SCRAM with tokenauth=true). */
    static Admin withToken(Env env, String tokenId, String hmac) {
        Properties props = new Properties();
        props.put("bootstrap.servers", env.bootstrap);
        props.put("security.protocol", "SASL_PLAINTEXT");
        props.put("sasl.mechanism", "SCRAM-SHA-512");
        props.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
            + tokenId + "\" password=\"" + hmac + "\" tokenauth=\"true\";");
        props.put("default.api.timeout.ms", "10000");
        props.put("request.timeout.ms", "5000");
        return env.admin(props);
    }

    static Object renewed(Admin admin, DelegationToken token, long period) {
        try {
            long expiry = admin.renewDelegationToken(token.hmac(), new RenewDelegationTokenOptions()
                .renewTimePeriodMs(period)).expiryTimestamp().get(60, TimeUnit.SECONDS);
            long issue = token.tokenInfo().issueTimestamp();
            long max = token.tokenInfo().maxTimestamp();
            // the new expiry is the renewal's time plus the period, capped by the token's maximum
            return Json.obj("within_max", expiry <= max, "later_than_period_after_issue", expiry >= issue + Math.min(
                period, max - issue));
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    static Object tokens(Env env) throws Exception {
        Admin admin = env.admin();
        Map<String, DelegationToken> made = new LinkedHashMap<>();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("create", create(admin, new CreateDelegationTokenOptions().renewers(List.of(ALICE))
            .maxLifetimeMs(HOUR), made, "admins"));
        out.put("create_for_alice", create(admin, new CreateDelegationTokenOptions().owner(ALICE), made,
            "alices"));
        out.put("create_no_renewers", create(admin, new CreateDelegationTokenOptions().maxLifetimeMs(30 * DAY), made,
            "unrenewable"));
        out.put("create_bad_renewer", create(admin, new CreateDelegationTokenOptions().renewers(List.of(
            new KafkaPrincipal("Robot", "r2"))), made, "bad"));
        Admin alice = adminAs(env, "alice");
        out.put("alice_creates_for_admin", create(alice, new CreateDelegationTokenOptions().owner(
            new KafkaPrincipal(KafkaPrincipal.USER_TYPE, "admin")), made, "forged"));
        // Kafka's brokers learn tokens from the metadata log, a moment after the controller made them
        SecurityScenarios.settle(() -> described(admin, new DescribeDelegationTokenOptions(), made) instanceof Map<?, ?> m
            && m.size() == made.size());
        out.put("describe_all", described(admin, new DescribeDelegationTokenOptions(), made));
        out.put("describe_alices", described(admin, new DescribeDelegationTokenOptions().owners(List.of(ALICE)),
            made));
        out.put("describe_as_alice", described(alice, new DescribeDelegationTokenOptions(), made));
        out.put("describe_no_owner", described(admin, new DescribeDelegationTokenOptions().owners(List.of()), made));

        DelegationToken admins = made.get("admins");
        out.put("renew", renewed(admin, admins, 10 * 60_000));
        out.put("renew_past_max", renewed(admin, admins, 10 * DAY));
        out.put("renew_as_renewer", renewed(alice, admins, 60_000));
        out.put("renew_as_stranger", renewed(alice, made.get("unrenewable"), 60_000));
        out.put("renew_unknown_hmac", Json.outcome(admin.renewDelegationToken("nope".getBytes())
            .expiryTimestamp()));

        Admin viaToken = withToken(env, admins.tokenInfo().tokenId(), admins.hmacAsBase64String());
        out.put("token_login", Json.outcome(viaToken.describeCluster().clusterId().thenApply(id -> "logged in")));
        out.put("token_creates_token", Json.outcome(viaToken.createDelegationToken().delegationToken()));
        out.put("token_renews_token", Json.outcome(viaToken.renewDelegationToken(admins.hmac()).expiryTimestamp()));
        out.put("token_describes_tokens", described(viaToken, new DescribeDelegationTokenOptions(), made));
        Admin wrongHmac = withToken(env, admins.tokenInfo().tokenId(), "bm90LXRoZS1obWFj");
        out.put("token_login_wrong_hmac", Json.outcome(wrongHmac.describeCluster().clusterId()
            .thenApply(id -> "logged in")));

        out.put("expire", Json.outcome(admin.expireDelegationToken(admins.hmac(),
            new ExpireDelegationTokenOptions().expiryTimePeriodMs(-1)).expiryTimestamp()
            .thenApply(expiry -> expiry <= System.currentTimeMillis())));
        SecurityScenarios.settle(() -> described(admin, new DescribeDelegationTokenOptions(), made) instanceof Map<?, ?> m
            && !m.containsKey("admins"));
        out.put("describe_after_expire", described(admin, new DescribeDelegationTokenOptions(), made));
        Admin expiredLogin = withToken(env, admins.tokenInfo().tokenId(), admins.hmacAsBase64String());
        out.put("expired_token_login", Json.outcome(expiredLogin.describeCluster().clusterId()
            .thenApply(id -> "logged in")));
        out.put("renew_expired", renewed(admin, admins, 60_000));
        out.put("expire_unknown_hmac", Json.outcome(admin.expireDelegationToken("nope".getBytes())
            .expiryTimestamp()));
        out.put("expire_as_stranger", Json.outcome(alice.expireDelegationToken(made.get("unrenewable").hmac())
            .expiryTimestamp().thenApply(expiry -> "expired")));
        out.put("expire_later", Json.outcome(admin.expireDelegationToken(made.get("alices").hmac(),
            new ExpireDelegationTokenOptions().expiryTimePeriodMs(HOUR)).expiryTimestamp()
            .thenApply(expiry -> expiry > System.currentTimeMillis())));
        Set<String> remaining = new TreeSet<>();
        for (DelegationToken token : admin.describeDelegationToken().delegationTokens().get(60, TimeUnit.SECONDS)) {
            made.forEach((name, mine) -> {
                if (mine.tokenInfo().tokenId().equals(token.tokenInfo().tokenId())) {
                    remaining.add(name);
                }
            });
        }
        out.put("remaining", remaining);
        return out;
    }
}

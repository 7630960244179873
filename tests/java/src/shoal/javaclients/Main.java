package shoal.javaclients;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Runs a group of scenarios against one broker and prints one JSON document, {scenario: observations}, on stdout.
 *
 *     java shoal.javaclients.Main GROUP '{"bootstrap": ..., "suffix": ..., "only": [...]}'
 *
 * The document's "_names" maps each resource name the scenarios made to its base (Env.name). A scenario that
 * throws is reported as {"scenario_failed": {...}} (the Python side fails on it); the others still run.
 * Clients log warnings to stderr, as does each scenario's duration.
 */
public final class Main {
    private Main() {}

    static Map<String, Scenario> group(String name) {
        return switch (name) {
            case "share" -> ShareScenarios.all();
            case "clients" -> ClientScenarios.all();
            case "admin" -> AdminScenarios.all();
            case "security" -> SecurityScenarios.all();
            case "tokens" -> TokenScenarios.all();
            case "streamsgroup" -> StreamsGroupScenarios.all();
            default -> throw new IllegalArgumentException("unknown scenario group " + name);
        };
    }

    public static void main(String[] args) throws Exception {
        Map<String, Object> conf = Json.readObject(args[1]);
        @SuppressWarnings("unchecked")
        List<String> only = (List<String>) conf.get("only");
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<String, Scenario> entry : group(args[0]).entrySet()) {
            if (only != null && !only.contains(entry.getKey())) {
                continue;
            }
            long start = System.nanoTime();
            Json.newScenario();
            try (Env env = new Env(conf)) {
                out.put(entry.getKey(), Json.of(entry.getValue().run(env)));
            } catch (Throwable t) {
                out.put(entry.getKey(), Map.of("scenario_failed", failure(t)));
            }
            System.err.printf("scenario %s: %d ms%n", entry.getKey(), (System.nanoTime() - start) / 1_000_000);
        }
        out.put("_names", Env.NAMES);
        System.out.println(Json.write(out));
        System.out.flush();
        System.exit(0);  // client threads left behind must not keep the JVM alive
    }

    private static Map<String, Object> failure(Throwable t) {
        Throwable cause = Json.unwrap(t);
        StringBuilder trace = new StringBuilder();
        for (StackTraceElement frame : cause.getStackTrace()) {
            if (frame.getClassName().startsWith("shoal.")) {
                trace.append(frame).append('\n');
            }
        }
        return Json.obj("exception", cause.getClass().getName(), "message", String.valueOf(cause.getMessage()),
            "at", trace.toString());
    }
}

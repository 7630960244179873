package shoal.javaclients;

/** One scenario: drives a broker through deterministic steps and returns what the clients observed. */
@FunctionalInterface
interface Scenario {
    Object run(Env env) throws Exception;
}

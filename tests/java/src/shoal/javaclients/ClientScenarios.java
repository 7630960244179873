package shoal.javaclients;

import java.util.LinkedHashMap;
import java.util.Map;

final class ClientScenarios {
    private ClientScenarios() {}

    static Map<String, Scenario> all() {
        Map<String, Scenario> all = new LinkedHashMap<>();
        return all;
    }
}

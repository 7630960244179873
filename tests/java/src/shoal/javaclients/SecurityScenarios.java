package shoal.javaclients;

import java.util.LinkedHashMap;
import java.util.Map;

final class SecurityScenarios {
    private SecurityScenarios() {}

    static Map<String, Scenario> all() {
        Map<String, Scenario> all = new LinkedHashMap<>();
        return all;
    }
}

package shoal.javaclients;

import java.util.LinkedHashMap;
import java.util.Map;

final class TokenScenarios {
    private TokenScenarios() {}

    static Map<String, Scenario> all() {
        Map<String, Scenario> all = new LinkedHashMap<>();
        return all;
    }
}

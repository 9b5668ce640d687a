// Rate-limit an HTTP request with CL.THROTTLE from Java (Jedis).
// Needs redis.clients:jedis on the classpath; java JavaHeaders.java
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.Protocol;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.util.SafeEncoder;

public class JavaHeaders {
    static final ProtocolCommand CL_THROTTLE = () -> SafeEncoder.encode("CL.THROTTLE");

    record Answer(int status, Map<String, String> headers) {}

    /** One request of user: 15 requests per minute, bursts of up to 16. */
    @SuppressWarnings("unchecked")
    static Answer throttle(Jedis jedis, String user) {
        List<Long> r = (List<Long>) jedis.sendCommand(CL_THROTTLE, "rl:" + user, "15", "15", "60", "1");
        long limited = r.get(0), limit = r.get(1), remaining = r.get(2), retryAfter = r.get(3), resetAfter = r.get(4);
        Map<String, String> headers = new LinkedHashMap<>();
        headers.put("RateLimit-Limit", Long.toString(limit));
        headers.put("RateLimit-Remaining", Long.toString(remaining));
        headers.put("RateLimit-Reset", Long.toString(resetAfter));
        if (limited == 1) {
            headers.put("Retry-After", Long.toString(retryAfter));
            return new Answer(429, headers);
        }
        return new Answer(200, headers);
    }

    public static void main(String[] args) {
        try (Jedis jedis = new Jedis("localhost", Protocol.DEFAULT_PORT)) {
            for (int i = 0; i < 18; i++) {
                System.out.println(throttle(jedis, "user123"));
            }
        }
    }
}

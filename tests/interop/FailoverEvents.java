// The Java client's side of the consumer event listener test (tests/test_interceptors.py).
//
// Compiled at test time with `javac` against the jars of the broker distribution, then run as
//
//   events <serviceUrl> <topic> <subscription>
//       Subscribes consumer "a", then consumer "b", to <topic> (Failover), each with a
//       ConsumerEventListener, and prints once both have heard their state
//           STATE a active|inactive
//           STATE b active|inactive
//       then closes the active one and, once the other has heard it became active, prints
//           AFTER <name> active
//
// A run ends with "DONE" on success; any failure exits non-zero with a stack trace.

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.ConsumerEventListener;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionType;

public final class FailoverEvents {
    // The last notice each consumer heard, by name.
    private static final Map<String, String> LAST = new ConcurrentHashMap<>();

    private static ConsumerEventListener listener(String name) {
        return new ConsumerEventListener() {
            @Override
            public void becameActive(Consumer<?> consumer, int partitionId) {
                LAST.put(name, "active");
            }

            @Override
            public void becameInactive(Consumer<?> consumer, int partitionId) {
                LAST.put(name, "inactive");
            }
        };
    }

    private static void await(java.util.function.BooleanSupplier done, String what) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("no " + what + " within 30 s: " + LAST);
            }
            Thread.sleep(20); // polling the listener's record, bounded above
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4 || !args[0].equals("events")) {
            System.err.println("usage: events <url> <topic> <subscription>");
            System.exit(2);
        }
        try (PulsarClient client = PulsarClient.builder().serviceUrl(args[1]).build()) {
            Consumer<byte[]> a = client.newConsumer().topic(args[2]).subscriptionName(args[3])
                    .subscriptionType(SubscriptionType.Failover).consumerName("a")
                    .consumerEventListener(listener("a")).subscribe();
            await(() -> "active".equals(LAST.get("a")), "notice to a");
            Consumer<byte[]> b = client.newConsumer().topic(args[2]).subscriptionName(args[3])
                    .subscriptionType(SubscriptionType.Failover).consumerName("b")
                    .consumerEventListener(listener("b")).subscribe();
            await(() -> LAST.containsKey("b") && !LAST.get("a").equals(LAST.get("b")), "states for a and b");
            System.out.println("STATE a " + LAST.get("a"));
            System.out.println("STATE b " + LAST.get("b"));
            boolean aActive = "active".equals(LAST.get("a"));
            String standby = aActive ? "b" : "a";
            (aActive ? a : b).close();
            await(() -> "active".equals(LAST.get(standby)), "notice to " + standby);
            System.out.println("AFTER " + standby + " active");
            (aActive ? b : a).close();
        }
        System.out.println("DONE");
    }
}

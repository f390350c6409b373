// The Java client's side of the retry letter topic test (tests/test_redelivery.py).
//
// Compiled at test time with `javac` against the jars of the broker distribution, then run as
//
//   reconsume <serviceUrl> <topic> <subscription> <count> <delayMs>
//       Subscribes to <topic> (Shared) with enableRetry(true) and the Java client's default
//       retry and dead letter topics, receives <count> messages (from the topic or its retry
//       topic), prints each as one tab-separated line
//           MSG topic payloadUtf8 props
//       where props is "k=v,..." sorted by key, and has each come again with
//       reconsumeLater(msg, <delayMs>, MILLISECONDS).
//
// A run ends with "DONE" on success; any failure exits non-zero with a stack trace.

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;

public final class RetryInterop {
    public static void main(String[] args) throws Exception {
        if (args.length != 6 || !args[0].equals("reconsume")) {
            System.err.println("usage: reconsume <url> <topic> <subscription> <count> <delayMs>");
            System.exit(2);
        }
        int count = Integer.parseInt(args[4]);
        long delayMs = Long.parseLong(args[5]);
        try (PulsarClient client = PulsarClient.builder().serviceUrl(args[1]).build()) {
            Consumer<byte[]> consumer = client.newConsumer()
                    .topic(args[2])
                    .subscriptionName(args[3])
                    .subscriptionType(SubscriptionType.Shared)
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                    .enableRetry(true)
                    .subscribe();
            for (int i = 0; i < count; i++) {
                Message<byte[]> msg = consumer.receive(60, TimeUnit.SECONDS);
                if (msg == null) {
                    throw new IllegalStateException("only " + i + " of " + count + " messages came");
                }
                StringBuilder props = new StringBuilder();
                for (Map.Entry<String, String> e : new TreeMap<>(msg.getProperties()).entrySet()) {
                    if (props.length() > 0) {
                        props.append(',');
                    }
                    props.append(e.getKey()).append('=').append(e.getValue());
                }
                System.out.println("MSG\t" + msg.getTopicName() + "\t"
                        + new String(msg.getData(), StandardCharsets.UTF_8) + "\t" + props);
                consumer.reconsumeLater(msg, delayMs, TimeUnit.MILLISECONDS);
            }
            consumer.close();
        }
        System.out.println("DONE");
        System.out.flush();
        System.exit(0);  // don't wait for the client's non-daemon threads
    }
}

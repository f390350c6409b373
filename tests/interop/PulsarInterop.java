// The Java client side of magnetar's interoperability tests (tests/test_interop.py).
//
// Compiled at test time with `javac` against the jars of the broker distribution
// (magnetar.testing.ensure_distribution()/lib/*), then run in one of two modes:
//
//   produce <serviceUrl> <keysFile> <scheme>=<topic> [<scheme>=<topic> ...]
//       Sends one message per key of <keysFile> (one key per line, hex of its UTF-8 bytes) to
//       each partitioned <topic> with the Java client's default settings and router, hashing
//       keys with <scheme> ("java_string" -> HashingScheme.JavaStringHash, the default, or
//       "murmur3" -> HashingScheme.Murmur3_32Hash; a "+ordering_key" suffix also gives each
//       message the ordering key "ok:" + the key reversed). The payload is the key's UTF-8 bytes.
//       Prints "SENT <topic> <keyHex> <partitionIndexOfTheReceipt>" per message.
//
//   consume <serviceUrl> <topic>=<count> [<topic>=<count> ...]
//       Subscribes to each topic from the earliest message, receives exactly <count>
//       messages and prints every field the Java client decoded, one tab-separated line each:
//       MSG topic sequenceId keyHex|- orderingKeyHex|- eventTime payloadHex props ledger:entry:partition:batchIndex
//       where props is "kHex=vHex,..." sorted by key (or "-"). Prints "EXTRA <topic>" if one
//       more message arrives within a second after the expected ones.
//
// Every run ends with "DONE" on success; any failure exits non-zero with a stack trace.

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.HashingScheme;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;

public final class PulsarInterop {
    private static final HexFormat HEX = HexFormat.of();

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: produce <url> <keysFile> <scheme>=<topic>... | consume <url> <topic>=<count>...");
            System.exit(2);
        }
        try (PulsarClient client = PulsarClient.builder().serviceUrl(args[1]).build()) {
            switch (args[0]) {
                case "produce" -> produce(client, args);
                case "consume" -> consume(client, args);
                default -> throw new IllegalArgumentException("unknown mode " + args[0]);
            }
        }
        System.out.println("DONE");
        System.out.flush();
        System.exit(0);  // don't wait for the client's non-daemon threads
    }

    private static void produce(PulsarClient client, String[] args) throws Exception {
        List<String> keys = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of(args[2]), StandardCharsets.US_ASCII)) {
            if (!line.isEmpty()) {
                keys.add(new String(HEX.parseHex(line), StandardCharsets.UTF_8));
            }
        }
        for (int i = 3; i < args.length; i++) {
            String[] st = args[i].split("=", 2);
            boolean withOrderingKey = st[0].endsWith("+ordering_key");
            HashingScheme scheme = switch (st[0].replace("+ordering_key", "")) {
                case "java_string" -> HashingScheme.JavaStringHash;
                case "murmur3" -> HashingScheme.Murmur3_32Hash;
                default -> throw new IllegalArgumentException("unknown hashing scheme " + st[0]);
            };
            String topic = st[1];
            // Default settings apart from the hashing scheme: batching on, RoundRobinPartition
            // routing (a keyed message goes to hash(key) % partitions).
            try (Producer<byte[]> producer = client.newProducer().topic(topic).hashingScheme(scheme).create()) {
                List<CompletableFuture<MessageId>> receipts = new ArrayList<>();
                for (String key : keys) {
                    var builder = producer.newMessage().key(key).value(key.getBytes(StandardCharsets.UTF_8));
                    if (withOrderingKey) {
                        builder = builder.orderingKey(orderingKeyFor(key));
                    }
                    receipts.add(builder.sendAsync());
                }
                producer.flush();
                for (int k = 0; k < keys.size(); k++) {
                    MessageId id = receipts.get(k).get(30, TimeUnit.SECONDS);
                    int partition = ((MessageIdAdv) id).getPartitionIndex();
                    System.out.println("SENT " + topic + " " + HEX.formatHex(keys.get(k).getBytes(StandardCharsets.UTF_8)) + " " + partition);
                }
            }
        }
    }

    /** The ordering key sent along with a key when asked: "ok:" and the key reversed. */
    static byte[] orderingKeyFor(String key) {
        return ("ok:" + new StringBuilder(key).reverse()).getBytes(StandardCharsets.UTF_8);
    }

    private static void consume(PulsarClient client, String[] args) throws Exception {
        List<Consumer<byte[]>> consumers = new ArrayList<>();
        List<String> topics = new ArrayList<>();
        try {
            for (int i = 2; i < args.length; i++) {
                int eq = args[i].lastIndexOf('=');
                String topic = args[i].substring(0, eq);
                int count = Integer.parseInt(args[i].substring(eq + 1));
                Consumer<byte[]> consumer = client.newConsumer().topic(topic).subscriptionName("java-interop")
                        .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
                consumers.add(consumer);
                topics.add(topic);
                for (int n = 0; n < count; n++) {
                    Message<byte[]> msg = consumer.receive(30, TimeUnit.SECONDS);
                    if (msg == null) {
                        throw new IllegalStateException("only " + n + " of " + count + " messages arrived on " + topic);
                    }
                    System.out.println(describe(topic, msg));
                    consumer.acknowledge(msg);
                }
            }
            // One second for anything beyond the expected messages to show up, on every topic.
            Thread.sleep(1000);
            for (int i = 0; i < consumers.size(); i++) {
                Message<byte[]> extra = consumers.get(i).receive(1, TimeUnit.MILLISECONDS);
                if (extra != null) {
                    System.out.println("EXTRA " + topics.get(i) + " " + describe(topics.get(i), extra));
                }
            }
        } finally {
            for (Consumer<byte[]> c : consumers) {
                c.close();
            }
        }
    }

    private static String describe(String topic, Message<byte[]> msg) {
        String key = msg.hasKey() ? HEX.formatHex(msg.getKey().getBytes(StandardCharsets.UTF_8)) : "-";
        String orderingKey = msg.hasOrderingKey() ? HEX.formatHex(msg.getOrderingKey()) : "-";
        StringBuilder props = new StringBuilder();
        for (Map.Entry<String, String> e : new TreeMap<>(msg.getProperties()).entrySet()) {
            if (props.length() > 0) {
                props.append(',');
            }
            props.append(HEX.formatHex(e.getKey().getBytes(StandardCharsets.UTF_8))).append('=')
                 .append(HEX.formatHex(e.getValue().getBytes(StandardCharsets.UTF_8)));
        }
        MessageIdAdv id = (MessageIdAdv) msg.getMessageId();
        return String.join("\t", "MSG", topic, Long.toString(msg.getSequenceId()), key, orderingKey,
                Long.toString(msg.getEventTime()), HEX.formatHex(msg.getData()),
                props.length() > 0 ? props.toString() : "-",
                id.getLedgerId() + ":" + id.getEntryId() + ":" + id.getPartitionIndex() + ":" + id.getBatchIndex());
    }
}

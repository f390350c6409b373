// The Java client side of the end-to-end encryption interop test (tests/test_encryption.py).
//
// Compiled at test time like PulsarInterop.java (tests/jvm.py), then run in one of two modes:
//
//   produce <serviceUrl> <topic> <publicKeyPem> <count>
//       Sends <count> messages "java-<i>" with the Java client's defaults (batching on), LZ4,
//       encrypted for the key name "app" with the public key of <publicKeyPem>.
//
//   consume <serviceUrl> <topic> <privateKeyPem> <count>
//       Subscribes from the earliest message with the private key of <privateKeyPem>, receives
//       exactly <count> messages and prints "MSG <payloadHex> <encryptionKeyNames>" for each.
//
// Every run ends with "DONE" on success; any failure exits non-zero with a stack trace.

import java.util.HexFormat;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.CompressionType;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.impl.DefaultCryptoKeyReader;

public final class EncryptionInterop {
    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: produce|consume <url> <topic> <keyPem> <count>");
            System.exit(2);
        }
        String topic = args[2];
        String key = "file://" + args[3];
        int count = Integer.parseInt(args[4]);
        try (PulsarClient client = PulsarClient.builder().serviceUrl(args[1]).build()) {
            if (args[0].equals("produce")) {
                var reader = DefaultCryptoKeyReader.builder().defaultPublicKey(key).build();
                try (Producer<byte[]> producer = client.newProducer().topic(topic).addEncryptionKey("app")
                        .cryptoKeyReader(reader).compressionType(CompressionType.LZ4).create()) {
                    for (int i = 0; i < count; i++) {
                        producer.sendAsync(("java-" + i).getBytes());
                    }
                    producer.flush();
                }
            } else {
                var reader = DefaultCryptoKeyReader.builder().defaultPrivateKey(key).build();
                try (Consumer<byte[]> consumer = client.newConsumer().topic(topic).subscriptionName("java")
                        .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                        .cryptoKeyReader(reader).subscribe()) {
                    for (int n = 0; n < count; n++) {
                        Message<byte[]> msg = consumer.receive(30, TimeUnit.SECONDS);
                        if (msg == null) {
                            throw new IllegalStateException("only " + n + " of " + count + " messages arrived");
                        }
                        var names = msg.getEncryptionCtx().map(c -> String.join(",", c.getKeys().keySet())).orElse("-");
                        System.out.println("MSG " + HexFormat.of().formatHex(msg.getData()) + " " + names);
                        consumer.acknowledge(msg);
                    }
                }
            }
        }
        System.out.println("DONE");
        System.out.flush();
        System.exit(0);  // don't wait for the client's non-daemon threads
    }
}

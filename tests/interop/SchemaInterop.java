// The Java client side of magnetar's schema interoperability tests (tests/test_schema_java.py).
//
// Compiled at test time with `javac` against the jars of the broker distribution, then run as
//
//   produce <serviceUrl> <topic> avro|json <count>
//       Sends <count> Order POJOs with Schema.AVRO(Order.class) or Schema.JSON(Order.class):
//       id = i, amount = i + 0.5, note = "n<i>" for even i, null for odd i.
//
//   produce-kv <serviceUrl> <topic> inline|separated <count>
//       Sends <count> KeyValue<String, Order> with Schema.KeyValue(Schema.STRING,
//       Schema.AVRO(Order.class), <encoding>): key "k<i>", the Order as above.
//
//   consume-kv <serviceUrl> <topic> inline|separated <count>
//       Subscribes from the earliest message with that KeyValue schema and prints, per message,
//       "ORDER <id> <amount> <note or -> <key>".
//
//   protobuf-avro <base64 FileDescriptorSet> <root file name> <root message name>
//       Builds the message's descriptor and prints what the Java client's Schema.PROTOBUF
//       registers for it: "PROTOBUF AVRO <avro-protobuf's Avro schema>" and
//       "PROTOBUF PARSING <the __PARSING_INFO__ property>".
//
//   consume <serviceUrl> <topic> avro|json <count>
//       Subscribes from the earliest message with the same schema and prints, per message,
//       "ORDER <id> <amount> <note or ->".
//
// Every run ends with "DONE" on success; any failure exits non-zero with a stack trace.

import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.DescriptorProtos;
import com.google.protobuf.Descriptors;
import org.apache.avro.protobuf.ProtobufData;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.impl.schema.ProtobufSchema;
import org.apache.pulsar.common.schema.KeyValue;
import org.apache.pulsar.common.schema.KeyValueEncodingType;

public final class SchemaInterop {
    /** The record both sides share: Java's reflection names it "Order". */
    public static class Order {
        public long id;
        public double amount;
        public String note;
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("produce-kv")) {
            produceKeyValue(args);
            return;
        }
        if (args[0].equals("protobuf-avro")) {
            protobufAvro(args);
            return;
        }
        if (args[0].equals("consume-kv")) {
            consumeKeyValue(args);
            return;
        }
        Schema<Order> schema = switch (args[3]) {
            case "avro" -> Schema.AVRO(Order.class);
            case "json" -> Schema.JSON(Order.class);
            default -> throw new IllegalArgumentException("unknown kind " + args[3]);
        };
        int count = Integer.parseInt(args[4]);
        try (PulsarClient client = PulsarClient.builder().serviceUrl(args[1]).build()) {
            switch (args[0]) {
                case "produce" -> {
                    try (Producer<Order> p = client.newProducer(schema).topic(args[2]).create()) {
                        for (int i = 0; i < count; i++) {
                            Order o = new Order();
                            o.id = i;
                            o.amount = i + 0.5;
                            o.note = i % 2 == 0 ? "n" + i : null;
                            p.send(o);
                        }
                    }
                }
                case "consume" -> {
                    try (Consumer<Order> c = client.newConsumer(schema).topic(args[2]).subscriptionName("java")
                            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
                        for (int i = 0; i < count; i++) {
                            Message<Order> m = c.receive(30, TimeUnit.SECONDS);
                            if (m == null) {
                                throw new IllegalStateException("no message " + i);
                            }
                            Order o = m.getValue();
                            System.out.println("ORDER " + o.id + " " + o.amount + " " + (o.note == null ? "-" : o.note));
                        }
                    }
                }
                default -> throw new IllegalArgumentException("unknown mode " + args[0]);
            }
        }
        System.out.println("DONE");
        System.out.flush();
        System.exit(0);
    }

    private static void protobufAvro(String[] args) throws Exception {
        DescriptorProtos.FileDescriptorSet set =
                DescriptorProtos.FileDescriptorSet.parseFrom(Base64.getDecoder().decode(args[1]));
        Map<String, Descriptors.FileDescriptor> built = new HashMap<>();
        for (DescriptorProtos.FileDescriptorProto f : set.getFileList()) { // imports come first
            Descriptors.FileDescriptor[] deps = f.getDependencyList().stream().map(built::get)
                    .toArray(Descriptors.FileDescriptor[]::new);
            built.put(f.getName(), Descriptors.FileDescriptor.buildFrom(f, deps));
        }
        Descriptors.Descriptor d = built.get(args[2]).findMessageTypeByName(args[3]);
        // What ProtobufSchema.of(cls) registers: ProtobufData's schema of the class's
        // descriptor, and its fields as ProtoBufParsingInfo written by Jackson.
        System.out.println("PROTOBUF AVRO " + ProtobufData.get().getSchema(d).toString());
        List<ProtobufSchema.ProtoBufParsingInfo> infos = new ArrayList<>();
        for (Descriptors.FieldDescriptor f : d.getFields()) {
            infos.add(new ProtobufSchema.ProtoBufParsingInfo(f.getNumber(), f.getName(), f.getType().name(),
                    f.toProto().getLabel().name(), null));
        }
        System.out.println("PROTOBUF PARSING " + new ObjectMapper().writeValueAsString(infos));
        System.out.println("DONE");
        System.out.flush();
        System.exit(0);
    }

    private static Schema<KeyValue<String, Order>> keyValueSchema(String encoding) {
        return Schema.KeyValue(Schema.STRING, Schema.AVRO(Order.class),
                encoding.equals("inline") ? KeyValueEncodingType.INLINE : KeyValueEncodingType.SEPARATED);
    }

    private static void consumeKeyValue(String[] args) throws Exception {
        int count = Integer.parseInt(args[4]);
        try (PulsarClient client = PulsarClient.builder().serviceUrl(args[1]).build();
             Consumer<KeyValue<String, Order>> c = client.newConsumer(keyValueSchema(args[3])).topic(args[2])
                     .subscriptionName("java")
                     .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
            for (int i = 0; i < count; i++) {
                Message<KeyValue<String, Order>> m = c.receive(30, TimeUnit.SECONDS);
                if (m == null) {
                    throw new IllegalStateException("no message " + i);
                }
                KeyValue<String, Order> kv = m.getValue();
                Order o = kv.getValue();
                System.out.println("ORDER " + o.id + " " + o.amount + " " + (o.note == null ? "-" : o.note)
                        + " " + kv.getKey());
            }
        }
        System.out.println("DONE");
        System.out.flush();
        System.exit(0);
    }

    private static void produceKeyValue(String[] args) throws Exception {
        Schema<KeyValue<String, Order>> schema = keyValueSchema(args[3]);
        int count = Integer.parseInt(args[4]);
        try (PulsarClient client = PulsarClient.builder().serviceUrl(args[1]).build();
             Producer<KeyValue<String, Order>> p = client.newProducer(schema).topic(args[2]).create()) {
            for (int i = 0; i < count; i++) {
                Order o = new Order();
                o.id = i;
                o.amount = i + 0.5;
                o.note = i % 2 == 0 ? "n" + i : null;
                p.send(new KeyValue<>("k" + i, o));
            }
        }
        System.out.println("DONE");
        System.out.flush();
        System.exit(0);
    }
}

//! Builders for the commands a client sends. Each returns a `BaseCommand` with its type set, so
//! a caller never pairs a command with the wrong type tag.

use super::pb::{self, base_command::Type, BaseCommand};

/// Wire `KeyValue`s (properties, producer metadata) from string pairs.
pub fn key_values(pairs: &[(String, String)]) -> Vec<pb::KeyValue> {
    pairs
        .iter()
        .map(|(k, v)| pb::KeyValue {
            key: k.clone(),
            value: v.clone(),
        })
        .collect()
}

fn base(kind: Type) -> BaseCommand {
    BaseCommand {
        r#type: kind as i32,
        ..Default::default()
    }
}

/// `command!(Kind { field: body })`: a `BaseCommand` of type `Kind` with `body` in `field`. The
/// type tag and the field it announces are written side by side, so they cannot drift apart.
macro_rules! command {
    ($kind:ident { $field:ident: $body:expr $(,)? }) => {{
        let mut cmd = base(Type::$kind);
        cmd.$field = Some($body);
        cmd
    }};
}

/// Features this client supports, announced in `Connect`.
pub fn feature_flags() -> pb::FeatureFlags {
    pb::FeatureFlags {
        supports_auth_refresh: Some(true),
        supports_broker_entry_metadata: Some(true),
        supports_partial_producer: Some(true),
        supports_topic_watchers: Some(false),
        ..Default::default()
    }
}

/// `Connect`, optionally with an authentication method and its data.
pub fn connect(auth_method: Option<&str>, auth_data: Option<Vec<u8>>, proxy_to: Option<&str>) -> BaseCommand {
    command!(Connect {
        connect: pb::CommandConnect {
            client_version: super::CLIENT_VERSION.to_string(),
            protocol_version: Some(super::PROTOCOL_VERSION),
            auth_method_name: auth_method.map(str::to_string),
            auth_data: auth_data.map(Into::into),
            proxy_to_broker_url: proxy_to.map(str::to_string),
            feature_flags: Some(feature_flags()),
            ..Default::default()
        }
    })
}

/// `AuthResponse`: the credential asked for by the broker's `AuthChallenge`.
pub fn auth_response(auth_method: &str, auth_data: Vec<u8>) -> BaseCommand {
    command!(AuthResponse {
        auth_response: pb::CommandAuthResponse {
            client_version: Some(super::CLIENT_VERSION.to_string()),
            response: Some(pb::AuthData {
                auth_method_name: Some(auth_method.to_string()),
                auth_data: Some(auth_data.into()),
            }),
            protocol_version: Some(super::PROTOCOL_VERSION),
        }
    })
}

/// `Ping` (keepalive probe).
pub fn ping() -> BaseCommand {
    command!(Ping {
        ping: pb::CommandPing {}
    })
}

/// `Pong` (answer to the broker's `Ping`).
pub fn pong() -> BaseCommand {
    command!(Pong {
        pong: pb::CommandPong {}
    })
}

/// `Lookup` of the broker serving `topic`.
pub fn lookup(topic: &str, request_id: u64, authoritative: bool, listener_name: Option<&str>) -> BaseCommand {
    command!(Lookup {
        lookup_topic: pb::CommandLookupTopic {
            topic: topic.to_string(),
            request_id,
            authoritative: Some(authoritative),
            advertised_listener_name: listener_name.map(str::to_string),
            ..Default::default()
        }
    })
}

/// `PartitionedMetadata`: how many partitions `topic` has (0 for a non-partitioned topic).
pub fn partitioned_metadata(topic: &str, request_id: u64) -> BaseCommand {
    command!(PartitionedMetadata {
        partition_metadata: pb::CommandPartitionedTopicMetadata {
            topic: topic.to_string(),
            request_id,
            ..Default::default()
        }
    })
}

/// `Producer`: attach a producer to a topic. Fill the optional fields on the returned command.
pub fn producer(topic: &str, producer_id: u64, request_id: u64) -> BaseCommand {
    command!(Producer {
        producer: pb::CommandProducer {
            topic: topic.to_string(),
            producer_id,
            request_id,
            ..Default::default()
        }
    })
}

/// `Send` of one message or one batch of `num_messages`.
pub fn send(producer_id: u64, sequence_id: u64, num_messages: i32) -> BaseCommand {
    command!(Send {
        send: pb::CommandSend {
            producer_id,
            sequence_id,
            num_messages: if num_messages == 1 { None } else { Some(num_messages) },
            ..Default::default()
        }
    })
}

/// `CloseProducer`.
pub fn close_producer(producer_id: u64, request_id: u64) -> BaseCommand {
    command!(CloseProducer {
        close_producer: pb::CommandCloseProducer {
            producer_id,
            request_id,
            ..Default::default()
        }
    })
}

/// `Subscribe`. Fill the optional fields on the returned command.
pub fn subscribe(
    topic: &str,
    subscription: &str,
    sub_type: pb::command_subscribe::SubType,
    consumer_id: u64,
    request_id: u64,
) -> BaseCommand {
    command!(Subscribe {
        subscribe: pb::CommandSubscribe {
            topic: topic.to_string(),
            subscription: subscription.to_string(),
            sub_type: sub_type as i32,
            consumer_id,
            request_id,
            ..Default::default()
        }
    })
}

/// `Flow`: grant the broker `permits` more messages for this consumer.
pub fn flow(consumer_id: u64, permits: u32) -> BaseCommand {
    command!(Flow {
        flow: pb::CommandFlow {
            consumer_id,
            message_permits: permits,
        }
    })
}

/// `Ack` of `ids`, individually or cumulatively.
pub fn ack(
    consumer_id: u64,
    ack_type: pb::command_ack::AckType,
    ids: Vec<pb::MessageIdData>,
    validation_error: Option<pb::command_ack::ValidationError>,
    request_id: Option<u64>,
) -> BaseCommand {
    command!(Ack {
        ack: pb::CommandAck {
            consumer_id,
            ack_type: ack_type as i32,
            message_id: ids,
            validation_error: validation_error.map(|v| v as i32),
            request_id,
            ..Default::default()
        }
    })
}

/// `RedeliverUnacknowledgedMessages`: all of them when `ids` is empty.
pub fn redeliver(consumer_id: u64, ids: Vec<pb::MessageIdData>) -> BaseCommand {
    command!(RedeliverUnacknowledgedMessages {
        redeliver_unacknowledged_messages: pb::CommandRedeliverUnacknowledgedMessages {
            consumer_id,
            message_ids: ids,
            ..Default::default()
        }
    })
}

/// `Unsubscribe`.
pub fn unsubscribe(consumer_id: u64, request_id: u64) -> BaseCommand {
    command!(Unsubscribe {
        unsubscribe: pb::CommandUnsubscribe {
            consumer_id,
            request_id,
            ..Default::default()
        }
    })
}

/// `CloseConsumer`.
pub fn close_consumer(consumer_id: u64, request_id: u64) -> BaseCommand {
    command!(CloseConsumer {
        close_consumer: pb::CommandCloseConsumer {
            consumer_id,
            request_id,
            ..Default::default()
        }
    })
}

/// `Seek` to a message id or to a publish time (milliseconds since the epoch).
pub fn seek(
    consumer_id: u64,
    request_id: u64,
    message_id: Option<pb::MessageIdData>,
    publish_time_ms: Option<u64>,
) -> BaseCommand {
    command!(Seek {
        seek: pb::CommandSeek {
            consumer_id,
            request_id,
            message_id,
            message_publish_time: publish_time_ms,
        }
    })
}

/// `GetLastMessageId`.
pub fn get_last_message_id(consumer_id: u64, request_id: u64) -> BaseCommand {
    command!(GetLastMessageId {
        get_last_message_id: pb::CommandGetLastMessageId {
            consumer_id,
            request_id,
        }
    })
}

/// `ConsumerStats`.
pub fn consumer_stats(consumer_id: u64, request_id: u64) -> BaseCommand {
    command!(ConsumerStats {
        consumer_stats: pb::CommandConsumerStats {
            request_id,
            consumer_id,
        }
    })
}

/// `GetTopicsOfNamespace` (persistent topics), for pattern subscriptions.
pub fn get_topics_of_namespace(namespace: &str, request_id: u64) -> BaseCommand {
    command!(GetTopicsOfNamespace {
        get_topics_of_namespace: pb::CommandGetTopicsOfNamespace {
            request_id,
            namespace: namespace.to_string(),
            mode: Some(pb::command_get_topics_of_namespace::Mode::Persistent as i32),
            ..Default::default()
        }
    })
}

/// The request id a response command answers, if it answers one.
pub fn response_request_id(cmd: &BaseCommand) -> Option<u64> {
    Some(match Type::try_from(cmd.r#type).ok()? {
        Type::Success => cmd.success.as_ref()?.request_id,
        Type::Error => cmd.error.as_ref()?.request_id,
        Type::ProducerSuccess => cmd.producer_success.as_ref()?.request_id,
        Type::LookupResponse => cmd.lookup_topic_response.as_ref()?.request_id,
        Type::PartitionedMetadataResponse => cmd.partition_metadata_response.as_ref()?.request_id,
        Type::GetLastMessageIdResponse => cmd.get_last_message_id_response.as_ref()?.request_id,
        Type::ConsumerStatsResponse => cmd.consumer_stats_response.as_ref()?.request_id,
        Type::AckResponse => cmd.ack_response.as_ref()?.request_id?,
        Type::GetTopicsOfNamespaceResponse => cmd.get_topics_of_namespace_response.as_ref()?.request_id,
        Type::GetSchemaResponse => cmd.get_schema_response.as_ref()?.request_id,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::frame;
    use bytes::BytesMut;

    fn round_trip(cmd: BaseCommand) -> BaseCommand {
        let mut buf = BytesMut::new();
        frame::encode_command(&cmd, &mut buf);
        frame::decode(&mut buf, 1 << 20).unwrap().unwrap().command
    }

    #[test]
    fn every_builder_round_trips_with_its_type() {
        let cmds = vec![
            connect(Some("token"), Some(b"abc".to_vec()), None),
            ping(),
            pong(),
            lookup("persistent://public/default/t", 7, true, Some("external")),
            auth_response("token", b"fresh".to_vec()),
            partitioned_metadata("t", 8),
            producer("t", 1, 9),
            send(1, 0, 1),
            close_producer(1, 10),
            subscribe("t", "s", pb::command_subscribe::SubType::Shared, 2, 11),
            flow(2, 1000),
            ack(2, pb::command_ack::AckType::Individual, vec![], None, None),
            redeliver(2, vec![]),
            unsubscribe(2, 12),
            close_consumer(2, 13),
            seek(2, 14, None, Some(5)),
            get_last_message_id(2, 15),
            consumer_stats(2, 16),
            get_topics_of_namespace("public/default", 17),
        ];
        for cmd in cmds {
            assert_eq!(round_trip(cmd.clone()), cmd);
        }
    }

    #[test]
    fn responses_name_their_request() {
        let mut cmd = base(Type::Success);
        cmd.success = Some(pb::CommandSuccess {
            request_id: 42,
            schema: None,
        });
        assert_eq!(response_request_id(&cmd), Some(42));
        assert_eq!(response_request_id(&ping()), None);
    }
}

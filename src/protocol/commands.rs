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

/// `GetTopicsOfNamespace`: the topics of `mode`'s domains, for pattern subscriptions.
pub fn get_topics_of_namespace(
    namespace: &str,
    mode: pb::command_get_topics_of_namespace::Mode,
    request_id: u64,
) -> BaseCommand {
    command!(GetTopicsOfNamespace {
        get_topics_of_namespace: pb::CommandGetTopicsOfNamespace {
            request_id,
            namespace: namespace.to_string(),
            mode: Some(mode as i32),
            ..Default::default()
        }
    })
}

/// A transaction id as the wire spells it: `(most, least)` significant bits; the most
/// significant bits are the id of the coordinator that owns the transaction.
pub type TxnBits = (u64, u64);

/// `TcClientConnectRequest`: opens this connection's session with coordinator `tc_id`.
pub fn tc_client_connect(request_id: u64, tc_id: u64) -> BaseCommand {
    command!(TcClientConnectRequest {
        tc_client_connect_request: pb::CommandTcClientConnectRequest { request_id, tc_id }
    })
}

/// `NewTxn` on coordinator `tc_id`, aborted by the coordinator after `ttl_ms`. The field is
/// named `txn_ttl_seconds`, but brokers read it as milliseconds, which the Java client sends.
pub fn new_txn(request_id: u64, tc_id: u64, ttl_ms: u64) -> BaseCommand {
    command!(NewTxn {
        new_txn: pb::CommandNewTxn {
            request_id,
            txn_ttl_seconds: Some(ttl_ms),
            tc_id: Some(tc_id),
        }
    })
}

/// `AddPartitionToTxn`: the transaction will produce to `partitions`.
pub fn add_partition_to_txn(request_id: u64, txn: TxnBits, partitions: Vec<String>) -> BaseCommand {
    command!(AddPartitionToTxn {
        add_partition_to_txn: pb::CommandAddPartitionToTxn {
            request_id,
            txnid_most_bits: Some(txn.0),
            txnid_least_bits: Some(txn.1),
            partitions,
        }
    })
}

/// `AddSubscriptionToTxn`: the transaction will acknowledge on `subscription` of `topic`.
pub fn add_subscription_to_txn(request_id: u64, txn: TxnBits, topic: &str, subscription: &str) -> BaseCommand {
    command!(AddSubscriptionToTxn {
        add_subscription_to_txn: pb::CommandAddSubscriptionToTxn {
            request_id,
            txnid_most_bits: Some(txn.0),
            txnid_least_bits: Some(txn.1),
            subscription: vec![pb::Subscription {
                topic: topic.to_string(),
                subscription: subscription.to_string(),
            }],
        }
    })
}

/// `EndTxn`: commit or abort.
pub fn end_txn(request_id: u64, txn: TxnBits, action: pb::TxnAction) -> BaseCommand {
    command!(EndTxn {
        end_txn: pb::CommandEndTxn {
            request_id,
            txnid_most_bits: Some(txn.0),
            txnid_least_bits: Some(txn.1),
            txn_action: Some(action as i32),
        }
    })
}

/// The error a transaction response carries in its body, if any: `(code, message)`.
pub fn txn_response_error(cmd: &BaseCommand) -> Option<(i32, String)> {
    let (error, message) = match Type::try_from(cmd.r#type).ok()? {
        Type::TcClientConnectResponse => {
            let r = cmd.tc_client_connect_response.as_ref()?;
            (r.error, r.message.clone())
        }
        Type::NewTxnResponse => {
            let r = cmd.new_txn_response.as_ref()?;
            (r.error, r.message.clone())
        }
        Type::AddPartitionToTxnResponse => {
            let r = cmd.add_partition_to_txn_response.as_ref()?;
            (r.error, r.message.clone())
        }
        Type::AddSubscriptionToTxnResponse => {
            let r = cmd.add_subscription_to_txn_response.as_ref()?;
            (r.error, r.message.clone())
        }
        Type::EndTxnResponse => {
            let r = cmd.end_txn_response.as_ref()?;
            (r.error, r.message.clone())
        }
        _ => return None,
    };
    error.map(|code| (code, message.unwrap_or_default()))
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
        Type::TcClientConnectResponse => cmd.tc_client_connect_response.as_ref()?.request_id,
        Type::NewTxnResponse => cmd.new_txn_response.as_ref()?.request_id,
        Type::AddPartitionToTxnResponse => cmd.add_partition_to_txn_response.as_ref()?.request_id,
        Type::AddSubscriptionToTxnResponse => cmd.add_subscription_to_txn_response.as_ref()?.request_id,
        Type::EndTxnResponse => cmd.end_txn_response.as_ref()?.request_id,
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
            get_topics_of_namespace(
                "public/default",
                pb::command_get_topics_of_namespace::Mode::Persistent,
                17,
            ),
            tc_client_connect(18, 0),
            new_txn(19, 0, 60),
            add_partition_to_txn(20, (0, 1), vec!["persistent://public/default/t".into()]),
            add_subscription_to_txn(21, (0, 1), "persistent://public/default/t", "s"),
            end_txn(22, (0, 1), pb::TxnAction::Abort),
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

    #[test]
    fn transaction_responses_name_their_request_and_error() {
        let mut cmd = base(Type::NewTxnResponse);
        cmd.new_txn_response = Some(pb::CommandNewTxnResponse {
            request_id: 7,
            error: Some(pb::ServerError::TransactionCoordinatorNotFound as i32),
            message: Some("not ready".into()),
            ..Default::default()
        });
        assert_eq!(response_request_id(&cmd), Some(7));
        assert_eq!(
            txn_response_error(&cmd),
            Some((
                pb::ServerError::TransactionCoordinatorNotFound as i32,
                "not ready".into()
            ))
        );
        let mut ok = base(Type::EndTxnResponse);
        ok.end_txn_response = Some(pb::CommandEndTxnResponse {
            request_id: 8,
            ..Default::default()
        });
        assert_eq!(response_request_id(&ok), Some(8));
        assert_eq!(txn_response_error(&ok), None);
    }
}

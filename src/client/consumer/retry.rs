//! The retry letter topic (the Java client's `enableRetry` and `reconsumeLater`): a message
//! the application wants again later is published to the retry topic, which the consumer
//! also subscribes to, to be delivered after a delay; the original is acknowledged. After
//! `max_redeliver_count` retries it goes to the dead letter topic instead.
//!
//! The copies carry the Java client's properties (`RetryMessageUtil`), so Java and magnetar
//! consumers can share a retry topic: `RECONSUMETIMES` (how many retries so far, this one
//! included), `DELAY_TIME` (this retry's delay, milliseconds), `REAL_TOPIC` (the topic the
//! message was first published to, without a partition suffix) and `ORIGIN_MESSAGE_ID` (its id
//! there, as Java prints it; also under the older misspelt key `ORIGIN_MESSAGE_IDY_TIME`). The
//! first two are rewritten on every retry, the others kept from the first.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::Mutex;

use super::Consumer;
use crate::client::error::{Error, Result};
use crate::client::message::{Message, MessageId, OutgoingMessage};
use crate::client::options::ProducerOptions;
use crate::client::partition_consumer::Command;
use crate::client::producer::Producer;
use crate::client::topic::strip_partition;

/// Retries before a message is dead-lettered when `max_redeliver_count` is not given (the
/// Java client's `RetryMessageUtil.MAX_RECONSUMETIMES`).
pub(super) const MAX_RECONSUME_TIMES: u32 = 16;

const RECONSUME_TIMES: &str = "RECONSUMETIMES";
const DELAY_TIME: &str = "DELAY_TIME";
const REAL_TOPIC: &str = "REAL_TOPIC";
const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
/// The Java client still writes this older spelling, for consumers that read it.
const ORIGIN_MESSAGE_ID_OLD: &str = "ORIGIN_MESSAGE_IDY_TIME";

/// The producers `reconsume_later` publishes with, made on first use.
#[derive(Default)]
pub(super) struct RetryProducers {
    retry: Mutex<Option<Producer>>,
    dead: Mutex<Option<Producer>>,
}

impl RetryProducers {
    pub(super) async fn close(&self) {
        for slot in [&self.retry, &self.dead] {
            if let Some(p) = slot.lock().await.take() {
                let _ = p.close().await;
            }
        }
    }
}

impl Consumer {
    /// Publishes `msg` to the retry letter topic, to be delivered again after `delay` (to the
    /// dead letter topic, without delay, once it has been retried `max_redeliver_count`
    /// times), then acknowledges it. Waits for the broker's receipt; when the publish fails
    /// the message is redelivered instead, and the error returned.
    pub async fn reconsume_later(&self, msg: &Message, delay: Duration, custom: Vec<(String, String)>) -> Result<()> {
        let opts = &self.inner.opts;
        if !opts.enable_retry {
            return Err(Error::invalid(
                "reconsume_later needs a consumer made with enable_retry=True",
            ));
        }
        let part = self.open_part_for(&msg.id)?;
        let (properties, times) = retry_properties(msg, delay, custom);
        let dead = times > opts.max_redeliver_count.unwrap_or(MAX_RECONSUME_TIMES);
        let (slot, topic) = if dead {
            (&self.inner.retry.dead, opts.dead_letter_topic.as_deref())
        } else {
            (&self.inner.retry.retry, opts.retry_letter_topic.as_deref())
        };
        let topic = topic.expect("enable_retry names both topics when the consumer is made");
        let deliver_at = (!dead && !delay.is_zero()).then(|| {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
            (now + delay).as_millis() as i64
        });
        let out = OutgoingMessage {
            deliver_at,
            ..OutgoingMessage::copy_of(msg, properties)
        };
        let sent = match self.retry_producer(slot, topic, dead).await {
            Ok(p) => p.send(out).await.map(drop),
            Err(e) => Err(e),
        };
        match sent {
            Ok(()) => {
                if dead {
                    self.inner.inbox.counters.dead_lettered();
                }
                self.ack(&msg.id)
            }
            Err(e) => {
                log::error!(
                    "{}: cannot publish to {topic} ({e}); redelivering the message",
                    part.topic
                );
                let _ = part.tx.send(Command::Redeliver(vec![msg.id.clone()]));
                Err(e)
            }
        }
    }

    async fn retry_producer(&self, slot: &Mutex<Option<Producer>>, topic: &str, dead: bool) -> Result<Producer> {
        let mut held = slot.lock().await;
        if let Some(p) = held.as_ref().filter(|p| !p.is_closed()) {
            return Ok(p.clone());
        }
        // As the Java client's retry and dead letter producers: unbatched (delayed messages
        // never batch), chunked when large, the consumer's schema.
        let opts = ProducerOptions {
            batching: false,
            chunking: true,
            block_if_full: false,
            schema: self.inner.opts.schema.clone(),
            initial_subscription: self
                .inner
                .opts
                .dead_letter_initial_subscription
                .clone()
                .filter(|_| dead),
            ..Default::default()
        };
        let p = Producer::open(self.inner.client.clone(), topic, opts).await?;
        *held = Some(p.clone());
        Ok(p)
    }
}

/// The properties of a retry copy of `msg` (sorted by key, as the Java client's `TreeMap`),
/// and its `RECONSUMETIMES`.
fn retry_properties(msg: &Message, delay: Duration, custom: Vec<(String, String)>) -> (Vec<(String, String)>, u32) {
    let mut props: BTreeMap<String, String> = msg.properties().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    props
        .entry(REAL_TOPIC.into())
        .or_insert_with(|| strip_partition(&msg.topic).to_string());
    let origin = java_id(&msg.id);
    props
        .entry(ORIGIN_MESSAGE_ID_OLD.into())
        .or_insert_with(|| origin.clone());
    props.entry(ORIGIN_MESSAGE_ID.into()).or_insert(origin);
    props.extend(custom);
    let times = props
        .get(RECONSUME_TIMES)
        .and_then(|t| t.trim().parse::<u32>().ok())
        .map_or(1, |t| t.saturating_add(1));
    props.insert(RECONSUME_TIMES.into(), times.to_string());
    props.insert(DELAY_TIME.into(), delay.as_millis().to_string());
    (props.into_iter().collect(), times)
}

/// A message id as the Java client prints it: `ledger:entry:partition`, with `:batchIndex`
/// for a message of a batch.
fn java_id(id: &MessageId) -> String {
    if id.batch_index >= 0 {
        format!("{}:{}:{}:{}", id.ledger_id, id.entry_id, id.partition, id.batch_index)
    } else {
        format!("{}:{}:{}", id.ledger_id, id.entry_id, id.partition)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::protocol::pb::{KeyValue, MessageMetadata};

    fn received(topic: &str, properties: &[(&str, &str)], batch_index: i32) -> Message {
        let meta = MessageMetadata {
            properties: properties
                .iter()
                .map(|(k, v)| KeyValue {
                    key: k.to_string(),
                    value: v.to_string(),
                })
                .collect(),
            ..Default::default()
        };
        let id = MessageId {
            ledger_id: 7,
            entry_id: 3,
            partition: 1,
            batch_index,
            batch_size: if batch_index >= 0 { 5 } else { 0 },
            topic: None,
        };
        Message::delivered(Arc::from(topic), id, Default::default(), meta)
    }

    #[test]
    fn a_first_retry_names_where_the_message_came_from() {
        let msg = received("persistent://public/default/t-partition-1", &[("a", "b")], 2);
        let (props, times) = retry_properties(&msg, Duration::from_millis(1500), vec![]);
        assert_eq!(times, 1);
        let props: BTreeMap<_, _> = props.into_iter().collect();
        assert_eq!(props["a"], "b");
        assert_eq!(props["REAL_TOPIC"], "persistent://public/default/t");
        assert_eq!(props["ORIGIN_MESSAGE_ID"], "7:3:1:2");
        assert_eq!(props["ORIGIN_MESSAGE_IDY_TIME"], "7:3:1:2");
        assert_eq!(props["RECONSUMETIMES"], "1");
        assert_eq!(props["DELAY_TIME"], "1500");
    }

    #[test]
    fn a_later_retry_counts_on_and_keeps_the_origin() {
        let earlier = [
            ("REAL_TOPIC", "persistent://public/default/first"),
            ("ORIGIN_MESSAGE_ID", "1:2:-1"),
            ("RECONSUMETIMES", "3"),
            ("DELAY_TIME", "10"),
        ];
        let msg = received("persistent://public/default/first-sub-RETRY", &earlier, -1);
        let (props, times) = retry_properties(&msg, Duration::ZERO, vec![("x".into(), "y".into())]);
        assert_eq!(times, 4);
        let props: BTreeMap<_, _> = props.into_iter().collect();
        assert_eq!(props["REAL_TOPIC"], "persistent://public/default/first");
        assert_eq!(props["ORIGIN_MESSAGE_ID"], "1:2:-1");
        assert_eq!(props["RECONSUMETIMES"], "4");
        assert_eq!(props["DELAY_TIME"], "0");
        assert_eq!(props["x"], "y");
    }
}

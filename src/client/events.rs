//! What a consumer tells its application besides messages: the broker's choice of the active
//! consumer of a Failover subscription, and the redeliveries the consumer asks for on its own
//! (negative acks coming due, ack timeouts). The application hands a hook in with the
//! consumer's options; the engine calls it from the consumer's task, so a hook must return at
//! once (the Python layer queues the call on its dispatch thread).

use std::fmt;
use std::sync::Arc;

use super::message_id::MessageId;

/// One thing a consumer reports to its [`EventHook`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerEvent {
    /// The broker's `ActiveConsumerChange` for the partition (or topic) `topic`: this consumer
    /// is now the one the broker dispatches to (`active`), or another one is.
    ActiveChanged { topic: String, active: bool },
    /// Negatively acknowledged messages whose delay ended: asked for again.
    NacksSent(Vec<MessageId>),
    /// Messages not acknowledged within the ack timeout: asked for again.
    AckTimeout(Vec<MessageId>),
}

/// The application's receiver of [`ConsumerEvent`]s; it must not block.
#[derive(Clone)]
pub struct EventHook(pub Arc<dyn Fn(ConsumerEvent) + Send + Sync>);

impl EventHook {
    pub fn call(&self, event: ConsumerEvent) {
        (self.0)(event)
    }
}

impl fmt::Debug for EventHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EventHook")
    }
}

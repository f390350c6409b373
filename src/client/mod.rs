//! What users see: producers, consumers and readers, with the semantics of the Pulsar clients
//! (batching, receipts, resend on reconnect, permits, acks, redelivery).
//!
//! Each producer and consumer of one topic partition is an actor task that owns its state and
//! its registration on a connection; partitioned and multi-topic handles fan out over them.

pub mod consumer;
pub mod crypto;
pub mod error;
pub mod events;
pub mod message;
pub mod options;
pub mod producer;
pub mod topic;
pub mod transaction;

pub mod completion;
mod fan_out;
mod handle;
mod inbox;
mod link;
mod memory;
mod message_id;
mod partition_consumer;
mod partition_producer;
mod schema;
mod shared;
pub mod stats;
pub(crate) mod supervisor;
mod timer;

pub use completion::{Completion, SendCallback};
pub use consumer::Consumer;
pub use crypto::{CryptoFailureAction, CryptoKeyReader, EncryptionKeyInfo, KeyReader};
pub use error::{Error, ErrorKind, Result};
pub use handle::Client;
pub use message::{Message, OutgoingMessage};
pub use message_id::MessageId;
pub use options::{
    ClientOptions, ConsumerOptions, FailoverOptions, HashingScheme, InitialPosition, ProducerOptions, RoutingMode,
};
pub use producer::Producer;
pub use shared::ClientState;
pub use topic::TopicName;
pub use transaction::{Transaction, TxnId, TxnState};

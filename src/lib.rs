//! magnetar's engine: a Pulsar client in four layers whose dependencies point one way.
//!
//! - [`protocol`]: the wire format, pure and synchronous (frames, commands, batches, CRC32C,
//!   compression). No I/O, no tokio.
//! - [`net`]: sockets and timers (connection actor, pool, lookup, backoff). No user semantics.
//! - [`client`]: producers, consumers and readers with the semantics users see.
//! - [`columnar`]: messages as Arrow columns and back, for bulk readers and writers.
//! - `python` (feature `python`): the PyO3 surface, the only code that knows Python.

pub mod client;
pub mod columnar;
pub mod net;
pub mod protocol;

#[cfg(feature = "python")]
mod python;

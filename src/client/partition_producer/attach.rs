//! Registering a producer with the broker that serves its topic.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::client::error::Result;
use crate::client::inner::ClientInner;
use crate::client::options::ProducerOptions;
use crate::net::{lookup, Connection, Event, HandlerId};
use crate::protocol::commands;

/// A producer registration that succeeded.
pub(super) struct Attached {
    pub conn: Connection,
    pub events: mpsc::UnboundedReceiver<Event>,
    pub name: String,
    pub last_sequence_id: Option<i64>,
}

pub(super) type Attaching = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Attached>> + Send>>;

pub(super) async fn attach_done(f: &mut Option<Attaching>) -> Result<Attached> {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// Looks the topic up and registers the producer with the broker.
pub(super) async fn attach(
    client: Arc<ClientInner>,
    topic: String,
    producer_id: u64,
    name: String,
    user_named: bool,
    epoch: u64,
    opts: ProducerOptions,
) -> Result<Attached> {
    let conn = lookup::lookup_topic(&client.pool, &topic).await?;
    let id = HandlerId::Producer(producer_id);
    let events = conn.register(id)?;
    let resp = conn
        .request(|rid| {
            let mut cmd = commands::producer(&topic, producer_id, rid);
            let p = cmd.producer.as_mut().expect("producer body");
            p.producer_name = (!name.is_empty()).then(|| name.clone());
            p.user_provided_producer_name = Some(user_named);
            p.epoch = Some(epoch);
            p.producer_access_mode = Some(opts.access_mode as i32);
            p.metadata = commands::key_values(&opts.properties);
            cmd
        })
        .await;
    let frame = match resp {
        Ok(f) => f,
        Err(e) => {
            conn.unregister(id);
            return Err(e.into());
        }
    };
    let ok = frame.command.producer_success.unwrap_or_default();
    Ok(Attached {
        conn,
        events,
        name: ok.producer_name,
        last_sequence_id: ok.last_sequence_id,
    })
}

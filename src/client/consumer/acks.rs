//! Acknowledging what a consumer received: one message, many (grouped per partition),
//! cumulatively, inside a transaction, or with the broker's receipt; negative acks and
//! redelivery. Each goes to the partition the message id names.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::oneshot;

use super::Consumer;
use crate::client::error::{Error, ErrorKind, Result};
use crate::client::message::MessageId;
use crate::client::partition_consumer::{Command, PartitionShared};
use crate::client::transaction::{Scope, Transaction};
use crate::protocol::pb::command_subscribe::SubType;

impl Consumer {
    /// The partition `id` belongs to, while the consumer is open.
    pub(super) fn open_part_for(&self, id: &MessageId) -> Result<Arc<PartitionShared>> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::closed("consumer"));
        }
        self.part_for(id)
    }

    fn command(&self, id: &MessageId, cmd: Command) -> Result<()> {
        let part = self.open_part_for(id)?;
        if let Command::Ack { cumulative, .. } | Command::AckWithReceipt { cumulative, .. } = &cmd {
            part.purge_acked(&self.inner.inbox, std::slice::from_ref(id), *cumulative);
        }
        part.tx.send(cmd).map_err(|_| Error::closed("consumer"))
    }

    /// Acknowledges one message.
    pub fn ack(&self, id: &MessageId) -> Result<()> {
        let part = self.open_part_for(id)?;
        part.purge_acked(&self.inner.inbox, std::slice::from_ref(id), false);
        part.push_ack(id.clone())
    }

    /// Acknowledges many messages individually, with one command per partition they come from.
    pub fn ack_many(&self, ids: Vec<MessageId>) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::closed("consumer"));
        }
        if ids.is_empty() {
            return Ok(());
        }
        let single = self.parts().len() == 1;
        let mut groups: Vec<(Arc<PartitionShared>, Vec<MessageId>)> = Vec::new();
        if single {
            groups.push((self.part_for(&ids[0])?, ids));
        } else {
            for id in ids {
                let part = self.part_for(&id)?;
                match groups.iter_mut().find(|(p, _)| Arc::ptr_eq(p, &part)) {
                    Some((_, group)) => group.push(id),
                    None => groups.push((part, vec![id])),
                }
            }
        }
        for (part, group) in groups {
            part.purge_acked(&self.inner.inbox, &group, false);
            part.tx
                .send(Command::AckMany(group))
                .map_err(|_| Error::closed("consumer"))?;
        }
        Ok(())
    }

    /// Refuses a cumulative ack on a Shared or Key_Shared subscription, where "every message
    /// up to this one" would take messages other consumers of the subscription hold.
    fn check_cumulative(&self, cumulative: bool) -> Result<()> {
        if cumulative && matches!(self.inner.opts.sub_type, SubType::Shared | SubType::KeyShared) {
            return Err(Error::invalid(
                "cumulative acknowledgement is not allowed on Shared or Key_Shared subscriptions",
            ));
        }
        Ok(())
    }

    /// Acknowledges every message up to and including `id` (not on Shared subscriptions).
    pub fn ack_cumulative(&self, id: &MessageId) -> Result<()> {
        self.check_cumulative(true)?;
        self.command(
            id,
            Command::Ack {
                id: id.clone(),
                cumulative: true,
            },
        )
    }

    /// Acknowledges one message (`cumulative`: every message up to it) inside `txn`. Never
    /// waits: the transaction counts the ack until the broker has confirmed it, so its commit
    /// waits for it, and an ack that fails makes the commit abort. If the transaction aborts,
    /// the message is delivered again.
    pub fn ack_in_txn(&self, id: &MessageId, cumulative: bool, txn: &Transaction) -> Result<()> {
        self.check_cumulative(cumulative)?;
        let part = self.open_part_for(id)?;
        let op = txn.begin_op()?;
        if let (false, Some(until)) = (cumulative, txn.expires()) {
            // At once, not once registered: a copy the broker sends meanwhile is held back too.
            let _ = part.tx.send(Command::HoldForTxn(id.clone(), until));
        }
        let scope = Scope::Subscription {
            topic: part.topic.to_string(),
            subscription: self.inner.subscription.clone(),
        };
        let (acked, txn_id) = (id.clone(), txn.id());
        let to = part.clone();
        txn.when_registered(
            scope,
            Box::new(move |registered| match registered {
                // A refused send drops the command, and with it `op`, which counts as failed.
                Ok(()) => drop(to.tx.send(Command::AckInTxn {
                    id: acked,
                    cumulative,
                    txn: txn_id,
                    op,
                })),
                Err(e) => op.finish(&Err::<(), _>(e)),
            }),
        );
        let again = id.clone();
        let inbox = self.inner.inbox.clone();
        let everything = !matches!(self.inner.opts.sub_type, SubType::Shared | SubType::KeyShared);
        txn.on_end(Box::new(move |committed| {
            if committed {
                // Made again plainly, an individual ack is booked, so a copy the broker
                // resends (a batch entry sent again for its other messages, or everything
                // after a broker died before storing the commit's acks) is dropped on arrival;
                // this also ends its hold. (A cumulative one is not: it went as individual
                // acks of what it covered, and a plain cumulative ack would also take what
                // another transaction holds.)
                if !cumulative {
                    let _ = part.tx.send(Command::Ack {
                        id: again,
                        cumulative: false,
                    });
                }
                return;
            }
            if everything {
                // Before abort() returns, as the application may receive next: nothing queued
                // now may be taken, since all of it comes again (the Java client's
                // clearIncomingMessages).
                part.start_redelivery(&inbox);
            }
            let _ = part.tx.send(Command::Redeliver(vec![again]));
        }));
        Ok(())
    }

    /// Acknowledges one message (or, `cumulative`, every message up to it) and waits until the
    /// broker confirms, within the operation timeout. A message of a batch is confirmed only
    /// once the broker has acked it: with its whole entry, unless `batch_index_ack` is on.
    pub async fn ack_with_receipt(&self, id: &MessageId, cumulative: bool) -> Result<()> {
        self.check_cumulative(cumulative)?;
        let (tx, rx) = oneshot::channel();
        self.command(
            id,
            Command::AckWithReceipt {
                id: id.clone(),
                cumulative,
                reply: tx,
            },
        )?;
        let timeout = self.inner.client.opts.connection.operation_timeout;
        match tokio::time::timeout(timeout, rx).await {
            Ok(r) => r.map_err(|_| Error::closed("consumer"))?,
            Err(_) => Err(Error::new(
                ErrorKind::Timeout,
                "the broker did not confirm the acknowledgement within the operation timeout (a message \
                 of a batch is confirmed with its whole batch, once every message of it is acknowledged, \
                 unless batch_index_ack is on)",
            )),
        }
    }

    /// Asks for redelivery of one message after the negative-ack delay (with `nack_backoff`,
    /// the delay for `redelivery_count`, the times it was delivered before).
    pub fn nack(&self, id: &MessageId, redelivery_count: u32) -> Result<()> {
        self.command(id, Command::Nack(id.clone(), redelivery_count))
    }

    /// Redelivers every unacknowledged message now.
    pub fn redeliver_unacknowledged(&self) -> Result<()> {
        for p in self.parts() {
            let _ = p.tx.send(Command::RedeliverAll);
        }
        Ok(())
    }
}

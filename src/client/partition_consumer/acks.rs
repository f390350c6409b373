//! The consumer's books: acks (grouped, individual, cumulative, and batch entries acked a
//! message at a time), negative acks, the ack timeout, and the dead-letter topic.

use super::*;

impl Actor {
    /// Records the individual acks the application made since the actor last looked
    /// (`PartitionShared::push_ack`). Called before anything that depends on which acks are
    /// known: every command, every incoming message, every flush.
    pub(super) fn take_pending_acks(&mut self) {
        // What the application took is owed before any ack of it is booked.
        let taken = self.shared.take_taken();
        if let Some(owed) = self.owed.as_mut() {
            for id in taken {
                owed.received(&id, std::iter::once(id.batch_index));
            }
        }
        let ids = self.shared.take_acks();
        self.ack_all(ids);
    }

    /// Individual acks of many messages, grouped and sent as one.
    pub(super) fn ack_all(&mut self, ids: Vec<MessageId>) {
        let mut ids = ids.into_iter();
        if let Some(last) = ids.next_back() {
            for id in ids {
                self.record_ack(id, false);
            }
            self.ack(last, false);
        }
    }

    pub(super) fn ack(&mut self, id: MessageId, cumulative: bool) {
        self.record_ack(id, cumulative);
        if self.opts.ack_group_time.is_zero() || self.book.held_len() >= self.opts.ack_group_max {
            self.flush_acks();
        } else if self.acks_due.is_none() {
            self.acks_due = Some(Instant::now() + self.opts.ack_group_time);
        }
    }

    /// The broker answered the acks sent under `token`. Refused ones are held again and go
    /// out with the next flush (or the next connection's first); receipts waiting on
    /// confirmed ones are answered.
    pub(super) fn acks_settled(&mut self, token: u64, confirmed: bool) {
        self.book.settled(token, confirmed);
        if !confirmed && self.book.has_held() && self.acks_due.is_none() {
            self.acks_due = Some(Instant::now() + self.opts.ack_group_time.max(Duration::from_millis(100)));
        }
        self.answer_receipts();
    }

    /// Books an ack: the entries it covers join the held acks.
    pub(super) fn record_ack(&mut self, id: MessageId, cumulative: bool) {
        self.txn_acks.release(&id);
        let key = (id.ledger_id, id.entry_id);
        // Hashing costs more than the rest of an ack: skip the maps that are not in use.
        if !self.unacked.is_empty() {
            if cumulative {
                self.unacked.retain(|k, _| *k > key);
            } else {
                self.unacked.remove(&key);
            }
        }
        if let Some(entries) = (!self.chunk_entries.is_empty())
            .then(|| self.chunk_entries.remove(&key))
            .flatten()
        {
            // The earlier chunks are separate entries; the last one is acked below.
            for e in entries {
                if (e.ledger_id as i64, e.entry_id as i64) != key {
                    self.book.record_entry(e);
                }
            }
        }
        if let Some(owed) = self.owed.as_mut() {
            owed.acked(&id, cumulative);
        }
        self.book.record(&id, cumulative, self.opts.batch_index_ack);
    }

    /// Sends the held acks, each command with a request id so the broker's answer tells which
    /// arrived; while detached they stay held (the timer stays armed) and go out on the next
    /// connection before its first `Flow`.
    pub(super) fn flush_acks(&mut self) {
        self.take_pending_acks();
        self.acks_due = None;
        if !self.book.has_held() {
            return;
        }
        let Some(conn) = self.link.conn().cloned() else {
            self.acks_due = Some(Instant::now() + self.opts.ack_group_time.max(Duration::from_millis(100)));
            return;
        };
        for (kind, ids) in self.book.take_held() {
            let token = self.next_ack_token();
            match conn.send_request(|rid| commands::ack(self.consumer_id, kind, ids.clone(), None, Some(rid))) {
                Ok(pending) => {
                    self.book.sent(token, vec![(kind, ids)]);
                    let tx = self.shared.tx.clone();
                    let timeout = conn.operation_timeout();
                    tokio::spawn(async move {
                        let confirmed = ack_outcome(pending.response(timeout).await).is_ok();
                        let _ = tx.send(Command::AcksSettled { token, confirmed });
                    });
                }
                Err(_) => {
                    // The connection just closed: its event follows and reattaching sends these.
                    self.book.unsent(vec![(kind, ids)]);
                }
            }
        }
    }

    fn next_ack_token(&mut self) -> u64 {
        self.ack_tokens += 1;
        self.ack_tokens
    }

    pub(super) fn redeliver_nacked(&mut self) {
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.nacks)
            .into_iter()
            .partition(|(t, _)| *t <= now);
        self.nacks = later;
        let ids: Vec<MessageId> = due.into_iter().map(|(_, id)| id).collect();
        if let (Some(hook), false) = (&self.opts.event_hook, ids.is_empty()) {
            hook.call(ConsumerEvent::NacksSent(ids.clone()));
        }
        self.redeliver(ids);
    }

    pub(super) fn redeliver_timed_out(&mut self) {
        let now = Instant::now();
        let expired: Vec<EntryKey> = self
            .unacked
            .iter()
            .filter(|(_, (t, _))| *t <= now)
            .map(|(k, _)| *k)
            .collect();
        if expired.is_empty() {
            return;
        }
        let ids: Vec<MessageId> = expired
            .iter()
            .filter_map(|k| self.unacked.remove(k))
            .map(|(_, id)| id)
            .collect();
        log::info!(
            "{}: {} messages not acked within the ack timeout; redelivering",
            self.shared.topic,
            ids.len()
        );
        if let Some(hook) = &self.opts.event_hook {
            hook.call(ConsumerEvent::AckTimeout(ids.clone()));
        }
        self.redeliver(ids);
    }

    /// Asks the broker to redeliver `ids`, or everything unacked when empty (or when the
    /// subscription type cannot redeliver single messages).
    pub(super) fn redeliver(&mut self, ids: Vec<MessageId>) {
        for id in &ids {
            self.txn_acks.release(id);
        }
        let individual = matches!(
            SubType::try_from(self.opts.sub_type as i32),
            Ok(SubType::Shared | SubType::KeyShared)
        );
        if ids.is_empty() || !individual {
            // Everything unacknowledged comes again, now or on the next connection: nothing
            // taken before is owed any more (an aborted transaction's messages, say, taken
            // while the broker was gone, must not ride on the next cumulative ack). What the
            // application took and acked meanwhile is booked first.
            self.take_pending_acks();
            if let Some(owed) = self.owed.as_mut() {
                owed.clear();
            }
        }
        let Some(conn) = self.link.conn().cloned() else { return };
        log::debug!(
            "{}: asking the broker to redeliver {} messages (0: all)",
            self.shared.topic,
            ids.len()
        );
        if ids.is_empty() || !individual {
            // The broker resends everything unacked, including what sits in the inbox; the
            // acks go first so that what the application acked is not among it.
            self.flush_acks();
            let epoch = self.shared.start_redelivery(&self.inbox);
            let mut cmd = commands::redeliver(self.consumer_id, Vec::new());
            if !individual {
                if let Some(r) = cmd.redeliver_unacknowledged_messages.as_mut() {
                    r.consumer_epoch = Some(epoch);
                }
            }
            let _ = conn.send_command(&cmd);
            return;
        }
        let mut entries: Vec<MessageIdData> = Vec::new();
        for id in ids {
            let d = id.entry_data();
            if !entries
                .iter()
                .any(|e| e.ledger_id == d.ledger_id && e.entry_id == d.entry_id)
            {
                entries.push(d);
            }
        }
        let _ = conn.send_command(&commands::redeliver(self.consumer_id, entries));
    }

    pub(super) async fn dead_letter(&mut self, msgs: Vec<Message>) {
        let topic = self
            .opts
            .dead_letter_topic
            .clone()
            .unwrap_or_else(|| format!("{}-{}-DLQ", strip_partition(&self.shared.topic), self.subscription));
        if self.dlq.is_none() {
            let opts = crate::client::options::ProducerOptions {
                batching: false,
                initial_subscription: self.opts.dead_letter_initial_subscription.clone(),
                ..Default::default()
            };
            match Producer::open(self.client.clone(), &topic, opts).await {
                Ok(p) => self.dlq = Some(p),
                Err(e) => {
                    log::error!(
                        "{}: cannot create dead-letter producer for {topic}: {e}; delivering instead",
                        self.shared.topic
                    );
                    self.inbox.push_many(msgs);
                    return;
                }
            }
        }
        let dlq = self.dlq.clone().expect("set above");
        for m in msgs {
            let mut properties: Vec<(String, String)> =
                m.properties().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            properties.push(("REAL_TOPIC".into(), self.shared.topic.to_string()));
            properties.push((
                "ORIGIN_MESSAGE_ID".into(),
                format!("{}:{}:{}", m.id.ledger_id, m.id.entry_id, m.id.partition),
            ));
            let out = OutgoingMessage {
                event_time: m.event_time(),
                ..OutgoingMessage::copy_of(&m, properties)
            };
            match dlq.send(out).await {
                Ok(_) => {
                    self.inbox.counters.dead_lettered();
                    self.ack(m.id.clone(), false)
                }
                Err(e) => {
                    log::error!(
                        "{}: dead-letter publish failed ({e}); message stays unacked",
                        self.shared.topic
                    );
                }
            }
        }
    }
}

/// What an ack request's answer means: an `AckResponse` may carry an error of its own.
pub(super) fn ack_outcome(
    response: std::result::Result<crate::protocol::frame::Frame, crate::net::NetError>,
) -> Result<()> {
    let f = response?;
    if let Some(r) = f.command.ack_response {
        if let Some(code) = r.error {
            return Err(Error::from_code(code, r.message.as_deref().unwrap_or("")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::transaction::Transaction;
    use crate::protocol::pb::command_subscribe::SubType;
    use crate::protocol::pb::MessageMetadata;

    /// Index `i` of a batch of 20 in entry 1:7, as the application takes it.
    fn taken(actor: &Actor, i: i32) -> Message {
        let id = MessageId {
            ledger_id: 1,
            entry_id: 7,
            partition: -1,
            batch_index: i,
            batch_size: 20,
            topic: None,
        };
        Message::delivered(
            actor.shared.topic.clone(),
            id,
            Default::default(),
            MessageMetadata::default(),
        )
    }

    /// The kill loop's Failover run with broker kills (docs/transactions.md, "An aborted
    /// transaction's messages, owed across a broker kill"): a transaction took 10-14 and its
    /// cumulative ack failed because the broker was gone; it aborted while the consumer was
    /// still disconnected; the application then took 15-19 and acknowledged them cumulatively
    /// in the next transaction. That ack must cover 15-19 only: 10-14 come again.
    #[tokio::test]
    async fn an_abort_while_disconnected_leaves_nothing_of_it_owed() {
        let mut actor = actor_of(SubType::Failover);
        assert!(actor.link.conn().is_none());

        let first: Vec<Message> = (10..15).map(|i| taken(&actor, i)).collect();
        actor.shared.on_dequeue(first.iter());
        let aborted = Transaction::detached(1, 317);
        let op = aborted.begin_op().expect("an open transaction");
        actor
            .handle(Command::AckInTxn {
                id: first[4].id.clone(),
                cumulative: true,
                txn: aborted.id(),
                op,
            })
            .await;
        // The abort's end hook (`Consumer::ack_in_txn`), with the consumer still detached.
        actor.handle(Command::Redeliver(vec![first[4].id.clone()])).await;

        let next: Vec<Message> = (15..20).map(|i| taken(&actor, i)).collect();
        actor.shared.on_dequeue(next.iter());
        actor.take_pending_acks();
        let covered = actor
            .owed
            .as_mut()
            .expect("a Failover consumer keeps the book")
            .take_through(&next[4].id);
        assert_eq!(covered.cumulative, None);
        assert_eq!(covered.individual.len(), 1);
        let ack = &covered.individual[0];
        let acked: Vec<usize> = (0..20)
            .filter(|i| super::super::receive::batch_index_acked(&ack.ack_set, *i))
            .collect();
        assert_eq!(
            acked,
            (15..20).collect::<Vec<_>>(),
            "the aborted transaction's messages rode on the next ack"
        );
    }

    /// The actor of a consumer of a client that never connects, detached.
    fn actor_of(sub_type: SubType) -> Actor {
        let client = Arc::new(ClientShared::new("pulsar://127.0.0.1:1", Default::default()).expect("a valid URL"));
        let opts = ConsumerOptions {
            sub_type,
            ..Default::default()
        };
        unattached(Placement {
            client,
            topic: "persistent://public/default/t".into(),
            index: 0,
            subscription: "s".into(),
            opts,
            inbox: Arc::new(Inbox::new()),
            paused: false,
        })
    }

    /// The cluster's `txn` scenario: after a move the broker sent the copies of messages a
    /// transaction still held, and the application took them (50 and 550 in two runs).
    #[tokio::test]
    async fn a_message_acked_in_an_open_transaction_is_held_back_until_the_transaction_ends() {
        let mut actor = actor_of(SubType::Shared);
        let (committed, aborted, expired) = (taken(&actor, 3), taken(&actor, 4), taken(&actor, 5));
        let later = Instant::now() + Duration::from_secs(60);
        for m in [&committed, &aborted] {
            actor.handle(Command::HoldForTxn(m.id.clone(), later)).await;
        }
        actor
            .handle(Command::HoldForTxn(expired.id.clone(), Instant::now()))
            .await;
        assert!(actor.txn_acks.holds(&committed.id) && actor.txn_acks.holds(&aborted.id));
        assert!(
            !actor.txn_acks.holds(&expired.id),
            "held past the transaction's timeout"
        );
        assert!(
            !actor.txn_acks.holds(&taken(&actor, 6).id),
            "a message no transaction acked"
        );

        // The commit's end hook books the ack plainly; the abort's asks for the message again.
        actor
            .handle(Command::Ack {
                id: committed.id.clone(),
                cumulative: false,
            })
            .await;
        actor.handle(Command::Redeliver(vec![aborted.id.clone()])).await;
        assert!(!actor.txn_acks.holds(&committed.id), "still held after the commit");
        assert!(
            !actor.txn_acks.holds(&aborted.id),
            "still held after the abort: it would never come again"
        );
        assert!(
            actor.book.covers(&committed.id),
            "a copy after the commit is dropped as acked"
        );
    }

    /// The cluster's `txn` scenario: an ack made while the consumer was between brokers failed
    /// at once, and its transaction aborted. It now waits for the connection, within the
    /// operation timeout, and keeps the transaction's commit waiting meanwhile.
    #[tokio::test]
    async fn an_ack_made_while_detached_waits_for_the_connection_within_the_operation_timeout() {
        let mut actor = actor_of(SubType::Shared);
        let m = taken(&actor, 3);
        let txn = Transaction::detached(1, 318);
        let op = txn.begin_op().expect("an open transaction");
        actor
            .handle(Command::AckInTxn {
                id: m.id.clone(),
                cumulative: false,
                txn: txn.id(),
                op,
            })
            .await;
        assert_eq!(txn.ops().0, 1, "the ack ended while the consumer was detached");
        assert!(txn.ops().1.is_none());

        let timeout = actor.client.opts.connection.operation_timeout;
        let until = actor.txn_acks.waiting[0].until;
        assert!(
            until >= Instant::now() + timeout - Duration::from_secs(1),
            "waits less than the operation timeout"
        );
        actor.expire_txn_acks();
        assert_eq!(txn.ops().0, 1, "gave up before the operation timeout");

        actor.txn_acks.waiting[0].until = Instant::now();
        actor.expire_txn_acks();
        let (running, failed) = txn.ops();
        assert_eq!(running, 0);
        let failed = failed.expect("the ack failed at the timeout").to_string();
        assert!(
            failed.contains("not connected within the operation timeout"),
            "{failed}"
        );
    }
}

//! The consumer's books: acks (grouped, individual, cumulative, and batch entries acked a
//! message at a time), negative acks, the ack timeout, and the dead-letter topic.

use super::*;

impl Actor {
    pub(super) fn ack(&mut self, id: MessageId, cumulative: bool) {
        self.record_ack(id, cumulative);
        if self.opts.ack_group_time.is_zero() || self.individual_acks.len() >= self.opts.ack_group_max {
            self.flush_acks();
        } else if self.acks_due.is_none() {
            self.acks_due = Some(Instant::now() + self.opts.ack_group_time);
        }
    }

    /// Sends every grouped ack with a request id and waits for the broker to confirm them.
    pub(super) async fn flush_acks_with_receipt(&mut self) -> Result<()> {
        self.acks_due = None;
        let conn = self.connection("not connected; the ack was not confirmed")?;
        let mut batches = Vec::new();
        if !self.individual_acks.is_empty() {
            batches.push((AckType::Individual, std::mem::take(&mut self.individual_acks)));
        }
        if let Some(id) = self.cumulative_ack.take() {
            batches.push((AckType::Cumulative, vec![id.entry_data()]));
        }
        for (kind, ids) in batches {
            let f = conn
                .request(|rid| commands::ack(self.consumer_id, kind, ids, None, Some(rid)))
                .await?;
            if let Some(r) = f.command.ack_response {
                if let Some(code) = r.error {
                    let code = crate::protocol::pb::ServerError::try_from(code)
                        .unwrap_or(crate::protocol::pb::ServerError::UnknownError);
                    return Err(Error::from_server(code, r.message.as_deref().unwrap_or("")));
                }
            }
        }
        Ok(())
    }

    /// Books an ack: what can go to the broker joins the grouped acks.
    pub(super) fn record_ack(&mut self, id: MessageId, cumulative: bool) {
        let key = (id.ledger_id, id.entry_id);
        // Hashing costs more than the rest of an ack: skip the maps that are not in use.
        if !self.unacked.is_empty() {
            self.unacked.remove(&key);
        }
        if let Some(entries) = (!self.chunk_entries.is_empty())
            .then(|| self.chunk_entries.remove(&key))
            .flatten()
        {
            // The earlier chunks are separate entries; the last one is acked below.
            self.individual_acks.extend(
                entries
                    .into_iter()
                    .filter(|e| (e.ledger_id as i64, e.entry_id as i64) != key),
            );
        }
        if cumulative {
            let mut target = id.clone();
            let inner_of_batch = id.batch_index >= 0 && id.batch_size > 0 && id.batch_index < id.batch_size - 1;
            if inner_of_batch && !self.opts.batch_index_ack {
                // Not every index of this entry is covered: ack up to the previous entry only.
                target = MessageId::new(id.ledger_id, id.entry_id - 1, id.partition, -1);
            } else if !inner_of_batch {
                target.batch_index = -1;
            }
            self.batches.retain(|k, _| *k > key);
            self.unacked.retain(|k, _| *k > key);
            if self.cumulative_ack.as_ref().is_none_or(|c| *c < target) {
                self.cumulative_ack = Some(target);
            }
        } else if id.batch_index >= 0 && id.batch_size > 1 {
            let size = id.batch_size as usize;
            let bits = self.batches.entry(key).or_insert_with(|| full_bitset(size));
            let i = id.batch_index as usize;
            if i < size {
                bits[i / 64] &= !(1u64 << (i % 64));
            }
            if bits.iter().all(|w| *w == 0) {
                self.batches.remove(&key);
                self.individual_acks.push(id.entry_data());
            } else if self.opts.batch_index_ack {
                let mut data = id.entry_data();
                data.ack_set = bits.iter().map(|w| *w as i64).collect();
                data.batch_size = Some(id.batch_size);
                self.individual_acks.push(data);
            }
        } else {
            self.individual_acks.push(id.entry_data());
        }
    }

    pub(super) fn flush_acks(&mut self) {
        self.acks_due = None;
        let Some(conn) = &self.conn else { return };
        if !self.individual_acks.is_empty() {
            let ids = std::mem::take(&mut self.individual_acks);
            let _ = conn.send_command(&commands::ack(self.consumer_id, AckType::Individual, ids, None, None));
        }
        if let Some(id) = self.cumulative_ack.take() {
            let _ = conn.send_command(&commands::ack(
                self.consumer_id,
                AckType::Cumulative,
                vec![id.entry_data()],
                None,
                None,
            ));
        }
    }

    pub(super) fn redeliver_nacked(&mut self) {
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.nacks)
            .into_iter()
            .partition(|(t, _)| *t <= now);
        self.nacks = later;
        let ids: Vec<MessageId> = due.into_iter().map(|(_, id)| id).collect();
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
        self.redeliver(ids);
    }

    /// Asks the broker to redeliver `ids`, or everything unacked when empty (or when the
    /// subscription type cannot redeliver single messages).
    pub(super) fn redeliver(&mut self, ids: Vec<MessageId>) {
        let Some(conn) = self.conn.clone() else { return };
        let individual = matches!(
            SubType::try_from(self.opts.sub_type as i32),
            Ok(SubType::Shared | SubType::KeyShared)
        );
        if ids.is_empty() || !individual {
            // The broker resends everything unacked, including what sits in the inbox.
            let dropped = self.inbox.drop_origin(self.shared.index) as u32;
            self.batches.clear();
            let _ = conn.send_command(&commands::redeliver(self.consumer_id, Vec::new()));
            self.shared.return_permits(dropped);
            return;
        }
        let mut entries: Vec<MessageIdData> = Vec::new();
        for id in ids {
            self.batches.remove(&(id.ledger_id, id.entry_id));
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
            let client = crate::client::inner::Client {
                inner: self.client.clone(),
            };
            let opts = crate::client::options::ProducerOptions {
                batching: false,
                ..Default::default()
            };
            match client.create_producer(&topic, opts).await {
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
                payload: m.payload.clone(),
                key: m.key().map(str::to_string),
                ordering_key: m.ordering_key().map(<[u8]>::to_vec),
                properties,
                event_time: m.event_time(),
                ..Default::default()
            };
            match dlq.send(out).await {
                Ok(_) => self.ack(m.id.clone(), false),
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

pub(super) fn full_bitset(size: usize) -> Vec<u64> {
    let mut bits = vec![u64::MAX; size.div_ceil(64)];
    if size % 64 != 0 {
        *bits.last_mut().expect("non-empty") = (1u64 << (size % 64)) - 1;
    }
    bits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitsets_cover_exactly_the_batch() {
        assert_eq!(full_bitset(3), vec![0b111]);
        assert_eq!(full_bitset(64), vec![u64::MAX]);
        assert_eq!(full_bitset(65), vec![u64::MAX, 1]);
    }
}

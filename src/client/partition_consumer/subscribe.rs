//! (Re)subscribing: the `Subscribe` command for where the subscription stands, and what the
//! actor does as its link to the broker comes and goes.

use super::*;

impl Actor {
    pub(super) async fn on_link_event(&mut self, ev: LinkEvent) {
        match ev {
            LinkEvent::Connection(ev) => self.on_event(ev).await,
            LinkEvent::RetryDue => self.reconnect(),
            LinkEvent::Attached(_) => {
                self.detached_by_seek = false;
                self.subscribed();
                log::info!("{}: consumer resubscribed", self.shared.topic);
                for reply in std::mem::take(&mut self.deferred_last_ids) {
                    let _ = reply.send(self.last_message_id().await);
                }
                for reply in std::mem::take(&mut self.deferred_stats) {
                    let _ = reply.send(self.stats().await);
                }
                self.txn_acks.subscribed();
                self.send_waiting_txn_acks();
                if !self.deferred_seeks.is_empty() {
                    let (target, reply) = self.deferred_seeks.remove(0);
                    let _ = reply.send(self.seek(target).await);
                }
            }
            LinkEvent::Retrying => {}
            LinkEvent::Migrated => self.migrated(),
            LinkEvent::Failed(e) => {
                log::error!("{}: consumer cannot resubscribe: {e}", self.shared.topic);
                self.inbox.end(e);
            }
        }
    }

    /// Starts resubscribing.
    pub(super) fn reconnect(&mut self) {
        if self.client.is_closed() {
            self.closing = Some((oneshot::channel().0, false));
            return;
        }
        if self.link.take_abandoned() {
            // The broker may never answer the subscribe it left (see `link::REATTACH_PATIENCE`)
            // and refuses another under its id meanwhile.
            self.consumer_id = self.client.next_consumer_id();
            self.link.renew(HandlerId::Consumer(self.consumer_id));
        }
        let request = self.subscribe_request();
        self.link.reattach(request);
    }

    /// The `Subscribe` command for the current position.
    pub(super) fn subscribe_request(&mut self) -> AttachRequest {
        let cmd = self.prepare_subscribe();
        Arc::new(move |rid| {
            let mut cmd = cmd.clone();
            if let Some(s) = cmd.subscribe.as_mut() {
                s.request_id = rid;
            }
            cmd
        })
    }

    /// The `Subscribe` command for the current position (request id filled in later).
    pub(super) fn prepare_subscribe(&mut self) -> BaseCommand {
        // Readers resume right after the last message the application took.
        let resume_from = self.shared.last_dequeued.lock().expect("last_dequeued lock").clone();
        if !self.opts.durable {
            if let Some(id) = resume_from {
                self.opts.start_message_id = Some(id);
                self.opts.start_inclusive = false;
                self.not_before_ms = None;
            }
        }
        let start = self
            .opts
            .start_message_id
            .clone()
            .filter(|_| !self.opts.durable)
            .map(|s| {
                let mut d = s.to_data();
                let sentinel = s == MessageId::EARLIEST || s == MessageId::LATEST;
                if !sentinel && self.opts.start_inclusive && s.batch_index < 0 {
                    // A batch index makes the broker start at the entry itself, not after it.
                    d.batch_index = Some(0);
                }
                d
            });
        let mut cmd = commands::subscribe(
            &self.shared.topic,
            &self.subscription,
            self.opts.sub_type,
            self.consumer_id,
            0,
        );
        let s = cmd.subscribe.as_mut().expect("subscribe body");
        s.consumer_name = Some(self.name.clone());
        s.priority_level = Some(self.opts.priority_level);
        s.durable = Some(self.opts.durable);
        s.start_message_id = start;
        s.metadata = commands::key_values(&self.opts.properties);
        s.read_compacted = Some(self.opts.read_compacted);
        s.initial_position = Some(match self.opts.initial_position {
            InitialPosition::Latest => command_subscribe::InitialPosition::Latest,
            InitialPosition::Earliest => command_subscribe::InitialPosition::Earliest,
        } as i32);
        s.replicate_subscription_state = Some(self.opts.replicate_subscription_state);
        if !matches!(self.opts.sub_type, SubType::Shared | SubType::KeyShared) {
            s.consumer_epoch = Some(self.shared.redelivery_epoch.load(Ordering::Acquire));
        }
        if let (Some(t), false) = (self.not_before_ms, self.opts.durable) {
            // Start a little before the time; what precedes it is skipped on arrival.
            let back_ms = now_ms().saturating_sub(t);
            s.start_message_rollback_duration_sec = Some(back_ms / 1000 + 2);
        }
        s.subscription_properties = commands::key_values(&self.opts.subscription_properties);
        s.schema = self.opts.schema.as_ref().map(|s| s.to_pb());
        if self.opts.sub_type == SubType::KeyShared {
            s.key_shared_meta = Some(KeySharedMeta {
                key_shared_mode: self.opts.key_shared_mode as i32,
                hash_ranges: (self.opts.key_shared_ranges.iter())
                    .map(|&(start, end)| IntRange { start, end })
                    .collect(),
                allow_out_of_order_delivery: Some(self.opts.allow_out_of_order_delivery),
            });
        }
        cmd
    }

    /// Takes over a successful subscription and grants the first permits. The held acks go
    /// first: an Exclusive or Failover subscribe rewinds the cursor to its mark-delete
    /// position, and the first `Flow` would have the broker resend whatever it has not yet
    /// seen acked.
    pub(super) fn subscribed(&mut self) {
        self.shared.connected.store(true, Ordering::Release);
        self.flush_acks();
        let queue = self.opts.receiver_queue_size as u32;
        self.held_permits = 0;
        self.grant(queue);
        if self.shared.zero_queue && self.shared.asked.load(Ordering::Acquire) {
            // The permit asked for on the last connection went with it.
            self.grant(1);
        }
    }
}

/// A consumer name when the application gives none.
pub(super) fn random_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("magnetar-{:05x}{:05x}", std::process::id() & 0xfffff, nanos & 0xfffff)
}

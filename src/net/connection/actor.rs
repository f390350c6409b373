//! The connection's task.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::*;
use crate::net::auth::AuthFuture;
use crate::protocol::pb::command_topic_migrated::ResourceType;

/// The task that owns the socket: writes what the handles post, routes what the broker
/// sends to the request waiting for it or the handler registered for it, and keeps the
/// connection alive.
pub(super) struct Actor {
    pub(super) addr: String,
    pub(super) max_frame_size: usize,
    pub(super) keepalive: Duration,
    pub(super) auth: Option<Arc<dyn AuthProvider>>,
    /// The credential being fetched for the broker's latest `AuthChallenge`.
    pub(super) challenge: Option<AuthFuture>,
    pub(super) pending: HashMap<u64, oneshot::Sender<Result<Frame, NetError>>>,
    pub(super) handlers: HashMap<HandlerId, mpsc::UnboundedSender<Event>>,
    pub(super) closed: Arc<AtomicBool>,
}

impl Actor {
    pub(super) async fn run<R, W>(
        mut self,
        mut rd: R,
        mut wr: W,
        flush_writes: bool,
        mut read_buf: BytesMut,
        mut rx: mpsc::UnboundedReceiver<Outbound>,
    ) where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        // `out` collects frames; `writing` is what the socket is taking now. Writing (and, over
        // TLS, flushing what rustls holds back) is one branch of the select, so a peer that
        // stops reading never stalls reads, pings or close: the unanswered ping then ends the
        // connection.
        let mut out = BytesMut::with_capacity(64 * 1024);
        let mut writing = BytesMut::new();
        let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + self.keepalive, self.keepalive);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut awaiting_pong = false;
        // Whether the writer may hold bytes that a flush must push out (TLS only).
        let mut unflushed = false;
        // Frames that arrived with the handshake's last read.
        let mut reason = self.drain_frames(&mut read_buf, &mut out, &mut awaiting_pong).err();
        while reason.is_none() {
            if writing.is_empty() && !out.is_empty() {
                std::mem::swap(&mut writing, &mut out);
            }
            // Stop taking work while a large backlog waits for the socket.
            let accept_more = out.len() < MAX_WRITE_BACKLOG;
            tokio::select! {
                read = rd.read_buf(&mut read_buf) => match read {
                    Ok(0) => reason = Some(NetError::Closed(format!("closed by {}", self.addr))),
                    Ok(_) => reason = self.drain_frames(&mut read_buf, &mut out, &mut awaiting_pong).err(),
                    Err(e) => reason = Some(NetError::Io(e.to_string())),
                },
                written = async {
                    if writing.is_empty() {
                        wr.flush().await.map(|()| None)
                    } else {
                        wr.write_buf(&mut writing).await.map(Some)
                    }
                }, if !writing.is_empty() || unflushed => match written {
                    Ok(Some(0)) => reason = Some(NetError::Closed(format!("{} stopped accepting data", self.addr))),
                    Ok(Some(_)) => unflushed = flush_writes,
                    Ok(None) => unflushed = false,
                    Err(e) => reason = Some(NetError::Io(e.to_string())),
                },
                msg = rx.recv(), if accept_more => {
                    let mut next = msg;
                    // Drain whatever else is queued so one write carries many frames.
                    loop {
                        match next {
                            None => { reason = Some(NetError::Closed("client dropped the connection".into())); break; }
                            Some(Outbound::Close) => { reason = Some(NetError::Closed("closed by the client".into())); break; }
                            Some(m) => self.handle_outbound(m, &mut out),
                        }
                        if out.len() > 1 << 20 { break; }
                        match rx.try_recv() { Ok(m) => next = Some(m), Err(_) => break }
                    }
                },
                data = async { self.challenge.as_mut().expect("guarded").await }, if self.challenge.is_some() => {
                    self.challenge = None;
                    match data {
                        Ok(data) => {
                            let method = self.auth.as_ref().map_or("", |a| a.method());
                            frame::encode_command(&commands::auth_response(method, data), &mut out);
                        }
                        // The broker drops a connection whose credential is not renewed;
                        // closing now says why, and the reconnect asks the provider again.
                        Err(e) => reason = Some(e),
                    }
                },
                _ = ping.tick() => {
                    if awaiting_pong {
                        reason = Some(NetError::Timeout("keepalive (no pong within one interval)"));
                    } else {
                        awaiting_pong = true;
                        frame::encode_command(&commands::ping(), &mut out);
                    }
                },
            }
        }
        let reason = reason.expect("loop exits with a reason");
        self.closed.store(true, Ordering::Release);
        log::info!("connection to {} closed: {reason}", self.addr);
        // A TLS close_notify needs the peer to read; one that stopped reading must not keep
        // the pending requests below waiting.
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, wr.shutdown()).await;
        for (_, reply) in self.pending.drain() {
            let _ = reply.send(Err(reason.clone()));
        }
        for (_, handler) in self.handlers.drain() {
            let _ = handler.send(Event::Closed(Box::new(reason.clone())));
        }
        // Answer anything still queued so no caller waits for a timeout.
        rx.close();
        while let Ok(m) = rx.try_recv() {
            if let Outbound::Request { reply, .. } = m {
                let _ = reply.send(Err(reason.clone()));
            } else if let Outbound::Register(_, h) = m {
                let _ = h.send(Event::Closed(Box::new(reason.clone())));
            }
        }
    }

    fn handle_outbound(&mut self, msg: Outbound, out: &mut BytesMut) {
        match msg {
            Outbound::Request {
                request_id,
                frame,
                reply,
            } => {
                self.pending.insert(request_id, reply);
                out.extend_from_slice(&frame);
            }
            Outbound::Cancel(id) => {
                self.pending.remove(&id);
            }
            Outbound::Write(frame) => out.extend_from_slice(&frame),
            Outbound::Register(id, tx) => {
                self.handlers.insert(id, tx);
            }
            Outbound::Unregister(id) => {
                self.handlers.remove(&id);
            }
            Outbound::Close => unreachable!("handled by the loop"),
        }
    }

    fn drain_frames(
        &mut self,
        buf: &mut BytesMut,
        out: &mut BytesMut,
        awaiting_pong: &mut bool,
    ) -> Result<(), NetError> {
        while let Some(f) = frame::decode(buf, self.max_frame_size)? {
            self.dispatch(f, out, awaiting_pong)?;
        }
        Ok(())
    }

    fn dispatch(&mut self, f: Frame, out: &mut BytesMut, awaiting_pong: &mut bool) -> Result<(), NetError> {
        use HandlerId::{Consumer, Producer};
        let cmd = &f.command;
        let kind = Type::try_from(cmd.r#type).map_err(|_| NetError::UnexpectedResponse("unknown type".into()))?;
        let handler = match kind {
            Type::Ping => {
                frame::encode_command(&commands::pong(), out);
                return Ok(());
            }
            Type::Pong => {
                *awaiting_pong = false;
                return Ok(());
            }
            Type::AuthChallenge => {
                // A later challenge supersedes one still being answered.
                self.challenge = Some(match &self.auth {
                    Some(auth) => auth.auth_data(),
                    None => Box::pin(async { Ok(Vec::new()) }),
                });
                return Ok(());
            }
            Type::SendReceipt => cmd.send_receipt.as_ref().map(|c| Producer(c.producer_id)),
            Type::SendError => cmd.send_error.as_ref().map(|c| Producer(c.producer_id)),
            Type::CloseProducer => cmd.close_producer.as_ref().map(|c| Producer(c.producer_id)),
            Type::Message => cmd.message.as_ref().map(|c| Consumer(c.consumer_id)),
            Type::ReachedEndOfTopic => cmd.reached_end_of_topic.as_ref().map(|c| Consumer(c.consumer_id)),
            Type::CloseConsumer => cmd.close_consumer.as_ref().map(|c| Consumer(c.consumer_id)),
            Type::ActiveConsumerChange => cmd.active_consumer_change.as_ref().map(|c| Consumer(c.consumer_id)),
            Type::TopicMigrated => cmd.topic_migrated.as_ref().map(|c| match c.resource_type() {
                ResourceType::Producer => Producer(c.resource_id),
                ResourceType::Consumer => Consumer(c.resource_id),
            }),
            // Commands only a client sends (also what an empty command decodes as): a broker
            // sending one is not speaking the protocol.
            Type::Connect
            | Type::Subscribe
            | Type::Producer
            | Type::Send
            | Type::Ack
            | Type::Flow
            | Type::Unsubscribe
            | Type::Lookup
            | Type::PartitionedMetadata
            | Type::ConsumerStats
            | Type::Seek
            | Type::GetLastMessageId
            | Type::RedeliverUnacknowledgedMessages
            | Type::GetTopicsOfNamespace
            | Type::GetSchema
            | Type::AuthResponse => {
                return Err(NetError::UnexpectedResponse(format!(
                    "the broker sent {kind:?}, a client-only command"
                )));
            }
            _ => {
                let Some(request_id) = response_request_id(&f.command) else {
                    log::debug!("{}: ignoring unsolicited {kind:?}", self.addr);
                    return Ok(());
                };
                // A producer waiting for exclusive access gets a not-ready success first and
                // the real one later, under the same request id.
                if kind == Type::ProducerSuccess
                    && f.command.producer_success.as_ref().and_then(|p| p.producer_ready) == Some(false)
                {
                    return Ok(());
                }
                match self.pending.remove(&request_id) {
                    Some(reply) => {
                        let _ = reply.send(Ok(f));
                    }
                    None => log::debug!("{}: response to unknown request {request_id}", self.addr),
                }
                return Ok(());
            }
        };
        match handler {
            Some(id) => match self.handlers.get(&id) {
                Some(tx) => {
                    if tx.send(Event::Frame(Box::new(f))).is_err() {
                        self.handlers.remove(&id);
                    }
                }
                None => log::debug!("{}: {kind:?} for unregistered {id:?}", self.addr),
            },
            None => log::debug!("{}: {kind:?} without its body", self.addr),
        }
        Ok(())
    }
}

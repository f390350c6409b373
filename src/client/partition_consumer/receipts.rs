//! Acks the application waits on (`ack_with_receipt`). The actor never waits for the broker's
//! answer itself: it sends the ack like any other, and answers the receipt once its book says
//! the broker has the ack, by whichever send and on whichever connection (an answer lost with
//! a connection is sent again on the next one). Waiting inline would stall the partition for
//! as long as the broker takes to answer, which is the whole operation timeout when the broker
//! closes the consumer meanwhile (an unload) and the answer never comes.

use super::*;

/// One application ack awaiting the broker's confirmation.
pub(super) struct Receipt {
    id: MessageId,
    cumulative: bool,
    reply: oneshot::Sender<Result<()>>,
}

impl Actor {
    /// Records the ack, sends it now, and answers `reply` once the broker confirmed it.
    pub(super) fn ack_with_receipt(&mut self, id: MessageId, cumulative: bool, reply: oneshot::Sender<Result<()>>) {
        self.record_ack(id.clone(), cumulative);
        self.flush_acks();
        self.receipts.push(Receipt { id, cumulative, reply });
        self.answer_receipts();
    }

    /// Answers the receipts whose acks are confirmed now; forgets those nobody waits for any
    /// more (the application's wait timed out).
    pub(super) fn answer_receipts(&mut self) {
        if self.receipts.is_empty() {
            return;
        }
        let batch_index_ack = self.opts.batch_index_ack;
        let (done, waiting): (Vec<Receipt>, Vec<Receipt>) = std::mem::take(&mut self.receipts)
            .into_iter()
            .filter(|r| !r.reply.is_closed())
            .partition(|r| self.book.confirmed(&r.id, r.cumulative, batch_index_ack));
        self.receipts = waiting;
        for r in done {
            let _ = r.reply.send(Ok(()));
        }
    }

    /// A seek moved the subscription: it is where the seek put it, whatever became of the acks
    /// made before (those already sent reached the broker before the seek, on one connection).
    pub(super) fn seek_ends_receipts(&mut self) {
        for r in self.receipts.drain(..) {
            let _ = r.reply.send(Ok(()));
        }
    }

    /// The consumer is closing: nothing more will be confirmed.
    pub(super) fn fail_receipts(&mut self) {
        for r in self.receipts.drain(..) {
            let _ = r.reply.send(Err(Error::closed("consumer")));
        }
    }
}

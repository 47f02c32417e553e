//! Step 6 of a batch and its failures: reply and ack the settled commands, NAK
//! the failed ones by their error's kind, terminate what cannot be decoded.

use holdpoint_bus::ErrorKind;
use holdpoint_bus::backoff::Backoff;
use holdpoint_domain::{Event, EventData, OrgId, decode_subject_token};
use holdpoint_telemetry::metrics::{OUTCOME_DEAD_LETTER, OUTCOME_OK, OUTCOME_RETRY};
use time::OffsetDateTime;
use tracing::{debug, warn};

use super::{Cmd, Runner};
use holdpoint_bus::delivery::Delivery;

impl Runner {
    /// Replies and acks a command whose decision was committed.
    pub(super) async fn finish(&self, c: Cmd) {
        let Some(d) = &c.decision else { return };
        self.cfg.metrics.command(
            c.env.verb(),
            match &d.outcome.result {
                Ok(_) => OUTCOME_OK,
                Err(r) => r.code.spec().code,
            },
        );
        if let Some(reply) = &c.reply
            && let Ok(body) = serde_json::to_vec(&d.outcome)
        {
            self.bus.reply(reply, body.into()).await;
        }
        debug!(
            command_id = %c.ctx.command_id,
            verb = c.env.verb(),
            org = %c.env.org,
            result = ?d.outcome.result,
            replay = d.replay,
            "command done"
        );
        c.delivery.ack().await;
    }

    /// NAKs (or, for a permanent failure, terminates with a dead letter) the
    /// commands that failed.
    pub(super) async fn settle_failed(&self, cmds: Vec<Cmd>) {
        for c in cmds {
            let Some((kind, why)) = c.failure.clone() else {
                // Not failed: settled already (unreachable by construction).
                continue;
            };
            match kind {
                ErrorKind::Permanent => {
                    let subject = c.delivery.subject.clone();
                    self.cfg.metrics.command(c.env.verb(), OUTCOME_DEAD_LETTER);
                    self.dead_letter(c.delivery, &subject, &why, &c.traceparent)
                        .await;
                }
                kind => {
                    self.cfg.metrics.command(c.env.verb(), OUTCOME_RETRY);
                    warn!(command_id = %c.ctx.command_id, error = %why, "command not finished; will be redelivered");
                    c.delivery.fail(kind, &Backoff::TRANSIENT).await;
                }
            }
        }
    }

    /// Terminates a command and leaves a `dead-letter` event naming it; if the event
    /// cannot be stored the command is NAKed instead (nothing is dropped silently).
    pub(super) async fn dead_letter(
        &self,
        delivery: Delivery,
        subject: &str,
        reason: &str,
        traceparent: &str,
    ) {
        let seq = delivery.stream_sequence;
        warn!(subject, seq, reason, "dead-lettering command");
        // `hp.cmd.<p>.<org>.…`
        let org = subject
            .split('.')
            .nth(3)
            .and_then(decode_subject_token)
            .and_then(|s| OrgId::parse(s).ok())
            .or_else(|| OrgId::parse("_unknown").ok());
        let Some(org) = org else {
            delivery
                .fail(ErrorKind::Permanent, &Backoff::TRANSIENT)
                .await;
            return;
        };
        let event = Event::new(
            &org,
            None,
            subject,
            &format!("dead-letter\u{0}{seq}"),
            OffsetDateTime::now_utc(),
            EventData::DeadLetter {
                subject: subject.to_owned(),
                stream_sequence: seq,
                reason: reason.to_owned(),
            },
        );
        let stored = self.bus.store_event(&event, traceparent).await;
        match stored {
            Ok(()) => {
                delivery
                    .fail(ErrorKind::Permanent, &Backoff::TRANSIENT)
                    .await
            }
            Err(e) => {
                warn!(error = %e, "dead-letter event not stored; command stays for redelivery");
                delivery
                    .fail(ErrorKind::Transient, &Backoff::TRANSIENT)
                    .await;
            }
        }
    }
}

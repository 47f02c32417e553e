//! One commit for all of a worker's partitions: the groups its partition runners
//! decided while the previous batch was in flight are stored by **one** atomic
//! batch (group commit across partitions).
//!
//! Each runner decides its own pulled group as before and hands the [`Commit`] to
//! the worker's [`GroupCommit`]; it gets back the PubAck its commit would have had
//! alone, or the error it would have had alone. The committer is a queue and one
//! loop, and the loop is the state machine below:
//!
//! | state | on | next |
//! |---|---|---|
//! | idle | a commit arrives | **gathering**: it, and every commit already queued, up to [`MAX_MESSAGES`] messages |
//! | gathering | one commit | **sending alone** |
//! | gathering | several | **sending merged**: their messages one after another ([`Commit::append`]); one that writes a record another already writes waits for the next batch |
//! | sending merged | PubAck | each runner gets its part of it ([`Committed::part`]) → idle |
//! | sending merged | any error | nothing was stored (or, after an unanswered last resend, the expectations will tell): **sending each alone**, so each runner gets its own commit's answer: a conflict is the conflicting runner's only → idle |
//! | sending alone | PubAck or error | the runner gets it → idle |
//!
//! Why the fallback is sound: a batch is all or nothing, so a merged batch that
//! failed stored none of its parts, and resending a part alone is what its runner
//! would have done. A part whose merged batch did commit although its PubAck was
//! lost (an unanswered last resend) comes back alone as a conflict, which its
//! runner reads as its own earlier commit (a replay), as for a commit of its own.
//!
//! Why one batch at a time: the commits of one stream are applied one after the
//! other under its lock anyway, and with `sync_interval: always` each batch costs
//! an fsync and, on one server, an on-disk staging store: what the runners decide
//! while a batch is in flight rides in the next one, so batches grow with load by
//! themselves, and an idle worker commits at once (no timer, no added wait).

use std::collections::VecDeque;
use std::sync::Arc;

use futures::future::BoxFuture;
use holdpoint_bus::batch::{BatchError, Committed, DEFAULT_MAX_MESSAGES};
use holdpoint_bus::commit::Commit;
use holdpoint_telemetry::metrics::Metrics;
use tokio::sync::{mpsc, oneshot};
use tracing::debug;

/// Most messages one merged batch carries: the server's default batch limit. A
/// single commit larger than that is sent alone (and refused, then isolated, by
/// its runner).
pub const MAX_MESSAGES: usize = DEFAULT_MAX_MESSAGES;

/// What sends one batch under an id and waits for its PubAck: the bus
/// ([`holdpoint_bus::Bus::commit`]) in the worker.
pub type SendBatch = Arc<
    dyn Fn(String, Arc<Commit>) -> BoxFuture<'static, Result<Committed, BatchError>> + Send + Sync,
>;

/// A commit waiting for its batch.
struct Pending {
    commit: Commit,
    done: oneshot::Sender<Result<Committed, BatchError>>,
}

/// The handle the partition runners commit through (cheap to clone). The loop
/// behind it ends once every handle is dropped.
#[derive(Clone)]
pub struct GroupCommit {
    queue: mpsc::UnboundedSender<Pending>,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").finish_non_exhaustive()
    }
}

impl GroupCommit {
    /// A committer sending through `send`, and the loop to spawn for it. Batch ids
    /// are `<prefix>-<32 hex>` (keep `prefix` under 20 characters: resends add
    /// `.<n>` and the server takes 64).
    pub fn new(
        prefix: &str,
        send: SendBatch,
        metrics: Arc<Metrics>,
    ) -> (GroupCommit, BoxFuture<'static, ()>) {
        let (queue, rx) = mpsc::unbounded_channel();
        let prefix = prefix.to_owned();
        (
            GroupCommit { queue },
            Box::pin(serve(rx, prefix, send, metrics)),
        )
    }

    /// A committer on `bus`.
    pub fn on_bus(
        bus: &holdpoint_bus::Bus,
        prefix: &str,
        metrics: Arc<Metrics>,
    ) -> (GroupCommit, BoxFuture<'static, ()>) {
        let bus = bus.clone();
        let send: SendBatch = Arc::new(move |id, c| {
            let bus = bus.clone();
            Box::pin(async move { bus.commit(&id, &c).await })
        });
        GroupCommit::new(prefix, send, metrics)
    }

    /// Commits `commit`, alone or with the other runners' commits of the moment,
    /// and returns the PubAck of its messages as if it had been sent alone.
    ///
    /// # Errors
    /// The [`BatchError`] of its own commit (see the module's table);
    /// [`BatchError::Unanswered`] when the committer stopped.
    pub async fn commit(&self, commit: Commit) -> Result<Committed, BatchError> {
        let (done, answer) = oneshot::channel();
        let stopped = || BatchError::Unanswered("the worker's committer stopped".into());
        self.queue
            .send(Pending { commit, done })
            .map_err(|_| stopped())?;
        answer.await.unwrap_or_else(|_| Err(stopped()))
    }
}

/// The committer's loop: gather, send, answer, until every handle is dropped.
async fn serve(
    mut rx: mpsc::UnboundedReceiver<Pending>,
    prefix: String,
    send: SendBatch,
    metrics: Arc<Metrics>,
) {
    let mut waiting: VecDeque<Pending> = VecDeque::new();
    loop {
        while let Ok(p) = rx.try_recv() {
            waiting.push_back(p);
        }
        if waiting.is_empty() {
            match rx.recv().await {
                Some(p) => waiting.push_back(p),
                None => return,
            }
            continue;
        }
        let group = gather(&mut waiting);
        send_group(group, &prefix, &send, &metrics).await;
    }
}

/// Takes from the front of `waiting` the commits one batch carries: as many as fit
/// in [`MAX_MESSAGES`], skipping (and leaving queued, in order) any that writes a
/// record an earlier one of the group writes. The first is always taken.
fn gather(waiting: &mut VecDeque<Pending>) -> Vec<(usize, Pending)> {
    let mut merged = Commit::new();
    let mut group = Vec::new();
    let mut left = VecDeque::new();
    while let Some(p) = waiting.pop_front() {
        if !group.is_empty() && merged.len() + p.commit.len() > MAX_MESSAGES {
            left.push_back(p);
            left.extend(waiting.drain(..));
            break;
        }
        let offset = merged.len();
        // The first always fits an empty batch.
        if merged.append(&p.commit).is_ok() {
            group.push((offset, p));
        } else {
            left.push_back(p);
        }
    }
    *waiting = left;
    group
}

fn batch_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// Sends one gathered group and answers each of its commits.
async fn send_group(
    mut group: Vec<(usize, Pending)>,
    prefix: &str,
    send: &SendBatch,
    metrics: &Metrics,
) {
    if group.len() == 1 {
        let (_, p) = group.remove(0);
        let result = send_alone(&p.commit, prefix, send, metrics).await;
        let _ = p.done.send(result);
        return;
    }
    let mut merged = Commit::new();
    for (_, p) in &group {
        // Gathered to fit: cannot fail.
        let _ = merged.append(&p.commit);
    }
    let transitions = merged.transitions();
    let id = batch_id(prefix);
    match send(id.clone(), Arc::new(merged)).await {
        Ok(done) => {
            metrics.commit_transitions.observe(transitions as f64);
            for (offset, p) in group {
                let part = done.part(offset, p.commit.len()).ok_or_else(|| {
                    BatchError::Unanswered(format!(
                        "the PubAck of batch {id} does not cover message {offset}"
                    ))
                });
                let _ = p.done.send(part);
            }
        }
        Err(e) => {
            debug!(batch = %id, parts = group.len(), error = %e, "merged commit failed; sending each part alone");
            let alone = group
                .iter()
                .map(|(_, p)| send_alone(&p.commit, prefix, send, metrics));
            let results = futures::future::join_all(alone).await;
            for ((_, p), r) in group.into_iter().zip(results) {
                let _ = p.done.send(r);
            }
        }
    }
}

async fn send_alone(
    commit: &Commit,
    prefix: &str,
    send: &SendBatch,
    metrics: &Metrics,
) -> Result<Committed, BatchError> {
    let transitions = commit.transitions();
    let result = send(batch_id(prefix), Arc::new(commit.clone())).await;
    if result.is_ok() {
        metrics.commit_transitions.observe(transitions as f64);
    }
    result
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use bytes::Bytes;
    use holdpoint_bus::Topology;
    use holdpoint_bus::records::Bucket;

    use super::*;

    /// A fake server: stores batches in one sequence, refuses a batch whose record
    /// subject is in `conflicting`, and records each batch's subjects.
    #[derive(Default)]
    struct FakeStream {
        seq: u64,
        conflicting: Vec<String>,
        sent: Vec<Vec<String>>,
    }

    fn fake(stream: Arc<Mutex<FakeStream>>) -> SendBatch {
        Arc::new(move |_id, c: Arc<Commit>| {
            let stream = stream.clone();
            Box::pin(async move {
                // Yield, so commits sent meanwhile queue up as on a real round trip.
                tokio::task::yield_now().await;
                let mut s = stream.lock().expect("the fake stream's lock");
                let subjects: Vec<String> = c
                    .batch()
                    .messages()
                    .iter()
                    .map(|m| m.subject.clone())
                    .collect();
                s.sent.push(subjects.clone());
                if subjects.iter().any(|m| s.conflicting.contains(m)) {
                    return Err(BatchError::Conflict("wrong last sequence".into()));
                }
                s.seq += c.len() as u64;
                Ok(Committed {
                    stream: "KV_HP_STATE".into(),
                    last: s.seq,
                    count: c.len() as u64,
                })
            })
        })
    }

    fn commit_of(topo: &Topology, keys: &[&str]) -> Commit {
        let mut c = Commit::new();
        for k in keys {
            c.record(topo, Bucket::Interactions, k, 0, Bytes::new())
                .expect("a record of a fresh commit");
        }
        c
    }

    fn key(i: usize) -> String {
        format!("int.o.{i}")
    }

    /// `n` commits sent at once, commit `i` writing records `2i` and `2i + 1`.
    async fn commit_pairs(
        gc: &GroupCommit,
        topo: &Topology,
        n: usize,
    ) -> Vec<Result<Committed, BatchError>> {
        let commits: Vec<_> = (0..n)
            .map(|i| {
                let gc = gc.clone();
                let c = commit_of(topo, &[&key(2 * i), &key(2 * i + 1)]);
                async move { gc.commit(c).await }
            })
            .collect();
        futures::future::join_all(commits).await
    }

    #[tokio::test]
    async fn commits_sent_together_share_one_batch_and_each_gets_its_own_sequences() {
        let topo = Topology::default();
        let stream = Arc::new(Mutex::new(FakeStream::default()));
        let metrics = Arc::new(Metrics::new());
        let (gc, serve) = GroupCommit::new("t", fake(stream.clone()), metrics);
        tokio::spawn(serve);
        // Six runners commit at once: they share batches, and each gets back
        // the PubAck of its own messages.
        let results = commit_pairs(&gc, &topo, 6).await;
        let sent = stream.lock().expect("the fake stream's lock").sent.clone();
        assert!(sent.len() < 6, "six commits took {} batches", sent.len());
        // Every record of every commit stored once, at the sequence its own PubAck
        // says.
        let mut seen = std::collections::BTreeMap::new();
        for batch in &sent {
            for s in batch {
                *seen.entry(s.clone()).or_insert(0) += 1;
            }
        }
        assert_eq!(seen.len(), 12);
        assert!(seen.values().all(|n| *n == 1));
        let mut sequences: Vec<u64> = Vec::new();
        for r in results {
            let done = r.expect("each commit stored");
            assert_eq!(done.count, 2);
            sequences.extend((0..2).filter_map(|i| done.sequence_of(i)));
        }
        sequences.sort_unstable();
        assert_eq!(sequences, (1..=12).collect::<Vec<u64>>());
    }

    #[tokio::test]
    async fn a_conflict_in_a_merged_batch_fails_only_the_conflicting_commit() {
        let topo = Topology::default();
        let stream = Arc::new(Mutex::new(FakeStream {
            conflicting: vec![format!("$KV.{}.{}", topo.state_bucket(), key(7))],
            ..FakeStream::default()
        }));
        let (gc, serve) = GroupCommit::new("t", fake(stream.clone()), Arc::new(Metrics::new()));
        tokio::spawn(serve);
        let results = commit_pairs(&gc, &topo, 5).await;
        for (i, r) in results.iter().enumerate() {
            if i == 3 {
                assert!(matches!(r, Err(BatchError::Conflict(_))), "{r:?}");
            } else {
                assert!(r.is_ok(), "commit {i}: {r:?}");
            }
        }
        // The four that succeeded stored 8 messages, no more: the failed merged
        // batch stored nothing.
        assert_eq!(stream.lock().expect("the fake stream's lock").seq, 8);
    }

    #[tokio::test]
    async fn two_commits_of_one_record_never_share_a_batch() {
        let topo = Topology::default();
        let stream = Arc::new(Mutex::new(FakeStream::default()));
        let (gc, serve) = GroupCommit::new("t", fake(stream.clone()), Arc::new(Metrics::new()));
        tokio::spawn(serve);
        let shared = key(1);
        let commits: Vec<_> = [
            vec![key(0)],
            vec![shared.clone()],
            vec![shared.clone(), key(2)],
            vec![key(3)],
        ]
        .into_iter()
        .map(|keys| {
            let gc = gc.clone();
            let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
            let c = commit_of(&topo, &refs);
            async move { gc.commit(c).await }
        })
        .collect();
        let results = futures::future::join_all(commits).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let subject = format!("$KV.{}.{shared}", topo.state_bucket());
        for batch in &stream.lock().expect("the fake stream's lock").sent {
            assert!(
                batch.iter().filter(|s| **s == subject).count() <= 1,
                "{batch:?}"
            );
        }
    }

    #[test]
    fn a_group_holds_at_most_the_server_limit_but_always_its_first_commit() {
        let topo = Topology::default();
        let big: Vec<String> = (0..MAX_MESSAGES + 5).map(key).collect();
        let refs: Vec<&str> = big.iter().map(String::as_str).collect();
        let mut waiting = VecDeque::new();
        for c in [commit_of(&topo, &refs), commit_of(&topo, &["int.o.x"])] {
            let (done, _) = oneshot::channel();
            waiting.push_back(Pending { commit: c, done });
        }
        let group = gather(&mut waiting);
        assert_eq!(group.len(), 1);
        assert_eq!(waiting.len(), 1);
        let group = gather(&mut waiting);
        assert_eq!(group.len(), 1);
        assert!(waiting.is_empty());
    }

    #[tokio::test]
    async fn a_stopped_committer_answers_unanswered() {
        let stream = Arc::new(Mutex::new(FakeStream::default()));
        let (gc, serve) = GroupCommit::new("t", fake(stream), Arc::new(Metrics::new()));
        drop(serve);
        let r = gc.commit(Commit::new()).await;
        assert!(matches!(r, Err(BatchError::Unanswered(_))), "{r:?}");
    }
}

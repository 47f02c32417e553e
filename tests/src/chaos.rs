//! Load, faults and the invariant check shared by the fault suite
//! (`tests/integration/fault_suite.rs`, `cluster.rs`) and the long soak
//! (`tests/soak/main.rs`, `ops/soak.sh`).
//!
//! - [`Scenario`]: one run described once (what is opened, how it is answered,
//!   the bounds it is judged by); [`Scenario::start`] runs the pieces below in
//!   order, the test injects its faults while [`Running::progress`] moves, and
//!   [`Running::judge`] settles and checks.
//! - [`open_targets`]: opens blocking questions and approvals to answer.
//! - [`plan_jobs`]: one answer per target with its own `Idempotency-Key`, plus a
//!   racing second answer (another key, another body) for some targets.
//! - [`run_clients`]: concurrent HTTP clients, each retrying a job on `503` with the
//!   same key until it gets something else (bounded); every attempt is logged with
//!   its timing, status, code and `Retry-After`.
//! - [`WorkerPool`]: `holdpoint worker` child processes to SIGKILL and respawn.
//! - [`check`]: reports the figures and every violation of the guarantees: each
//!   2xx is the recorded resolution (nothing lost), each target resolved exactly
//!   once with exactly one `tool-call-finished` (and one `tool-call-released` for
//!   an approved call), no event id with two contents, nothing left pending, every
//!   `503` a retryable `NRY-0050` with `Retry-After`, every request answered
//!   within its bound.
//! - [`race_opens_and_answers`]: opens interactions and answers each one a moment
//!   after its opening was sent, before it is confirmed (a UI that learned the id
//!   from the runtime), over REST or A2A, each answer retried with its own key
//!   while it is refused as not found yet.
//! - [`Rng`]: a small seeded generator so a failing run can be replayed
//!   (`HOLDPOINT_FAULT_SEED`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use holdpoint_client::{HoldCall, Placement, Runtime};
use holdpoint_domain::{Answer, CallResult, Event, EventData, Interaction, QuestionSpec, State};
use serde_json::json;
use tokio::sync::Mutex;

use crate::app::{Broker, Person, TestApp};
pub use crate::load::{AttemptLog, Job, JobResult, Target, TargetKind};

/// splitmix64: small, seeded, good enough to pick moments and victims.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn seeded(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The seed in `$var` if set (to replay a run), else one from the clock; the
    /// seed is returned so the caller can print it.
    pub fn from_env(var: &str) -> (Rng, u64) {
        let seed = std::env::var(var)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0x5eed)
                    ^ u64::from(std::process::id())
            });
        (Rng(seed), seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// A duration uniform in `lo..=hi`.
    pub fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = hi.saturating_sub(lo).as_millis() as u64;
        lo + Duration::from_millis(self.below(span + 1))
    }
}

/// The two questions every question target asks.
pub fn two_questions() -> Vec<QuestionSpec> {
    vec![
        QuestionSpec {
            text: "Which branch?".into(),
            options: vec!["main".into(), "release".into()],
            multiple: false,
            allow_text: false,
            schema: None,
        },
        QuestionSpec {
            text: "What about duplicates?".into(),
            options: vec!["Delete".into(), "Merge".into(), "Keep both".into()],
            multiple: false,
            allow_text: true,
            schema: None,
        },
    ]
}

fn short_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..16].to_owned()
}

/// Retries a runtime call while it times out (NATS or workers away), up to `deadline`.
async fn retry_runtime<T, F, Fut>(what: &str, deadline: Duration, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, holdpoint_client::ClientError>>,
{
    let end = Instant::now() + deadline;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(holdpoint_client::ClientError::Timeout(_)) if Instant::now() < end => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => anyhow::bail!("{what}: {e}"),
        }
    }
}

/// Opens `questions` blocking questions and `approvals` approvals in `org`
/// (blocking sessions of up to 50 interactions, each on its own task), `parallel`
/// at a time. Needs a live worker.
///
/// # Errors
/// When an open is refused or times out for 60 s.
pub async fn open_targets<N: Broker>(
    app: &TestApp<N>,
    org: &str,
    questions: usize,
    approvals: usize,
    parallel: usize,
) -> anyhow::Result<Vec<Target>> {
    let rt = app.runtime(org).await;
    let total = questions + approvals;
    let sessions: Vec<String> = (0..total.div_ceil(50))
        .map(|_| format!("s-{}", short_id()))
        .collect();
    for s in &sessions {
        retry_runtime("open session", Duration::from_secs(60), || {
            rt.open_session(s, holdpoint_domain::SessionMode::Blocking)
        })
        .await?;
    }
    let opened = futures::stream::iter(0..total)
        .map(|n| {
            let rt = rt.clone();
            let session = sessions[n / 50].clone();
            let org = org.to_owned();
            async move {
                let task = format!("task-{}", short_id());
                let at = Placement::new(&session, "main", &task, "ctx-1")?;
                let call = format!("call-{}", short_id());
                if n < questions {
                    let qid = uuid::Uuid::new_v4();
                    let id = retry_runtime("ask_user", Duration::from_secs(60), || {
                        rt.ask_user(&at, &call, two_questions(), Some(qid))
                    })
                    .await?;
                    Ok::<_, anyhow::Error>(Target {
                        org,
                        id: id.to_string(),
                        kind: TargetKind::Question,
                    })
                } else {
                    let effect = format!("eff_{}", short_id());
                    retry_runtime("hold", Duration::from_secs(60), || {
                        rt.hold_for_approval(
                            &at,
                            HoldCall {
                                effect_id: effect.clone(),
                                call_id: call.clone(),
                                server: "github".into(),
                                tool: "create_pull_request".into(),
                                arguments: json!({"repo": "acme/app", "n": n}),
                                reason: None,
                                editable: false,
                                approvals: None,
                            },
                        )
                    })
                    .await?;
                    Ok(Target {
                        org,
                        id: effect,
                        kind: TargetKind::Approval,
                    })
                }
            }
        })
        .buffer_unordered(parallel.max(1))
        .collect::<Vec<_>>()
        .await;
    opened.into_iter().collect()
}

/// One answer per target, plus, for a `race` fraction of them, a second answer
/// with another key and another body (they race; one must win). Shuffled.
pub fn plan_jobs(targets: &[Target], race: f64, rng: &mut Rng) -> Vec<Job> {
    let mut jobs = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        let v = rng.next_u64();
        jobs.push(Job {
            target: i,
            key: format!("k-{}-{}-a", t.id, v % 10_000),
            body: t.body(v),
        });
        if rng.chance(race) {
            jobs.push(Job {
                target: i,
                key: format!("k-{}-{}-b", t.id, v % 10_000),
                body: t.body(v + 1),
            });
        }
    }
    for i in (1..jobs.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        jobs.swap(i, j);
    }
    jobs
}

/// How clients behave.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Concurrent clients.
    pub clients: usize,
    /// Pause between one client's jobs (random in the range).
    pub pace: (Duration, Duration),
    /// Pause before retrying a `503` (random in the range).
    pub retry_pause: (Duration, Duration),
    /// Longest a single request may take before it counts as hung (and is retried).
    pub request_bound: Duration,
    /// A job that has not got a non-`503` answer after this long gives up (stuck).
    pub give_up_after: Duration,
    /// When set, clients take no new job (the jobs not taken are not in the results;
    /// [`check`] looks only at targets that have results).
    pub stop: Option<Arc<AtomicBool>>,
}

/// Live counters of a client run.
#[derive(Debug, Default)]
pub struct Progress {
    /// Jobs finished (either way).
    pub jobs_done: AtomicU64,
    /// Requests sent.
    pub requests: AtomicU64,
    /// 2xx answers.
    pub ok: AtomicU64,
    /// `503` answers.
    pub unavailable: AtomicU64,
    /// Set when every job is finished.
    pub finished: AtomicBool,
}

/// Runs `jobs` on `options.clients` concurrent clients (one person per
/// organisation, from `persons`), in the background. Await the handle for the
/// results, in job order; watch `progress` meanwhile.
pub fn run_clients(
    persons: HashMap<String, Person>,
    targets: Arc<Vec<Target>>,
    jobs: Vec<Job>,
    options: ClientOptions,
    seed: u64,
) -> (
    Arc<Progress>,
    tokio::task::JoinHandle<anyhow::Result<Vec<JobResult>>>,
) {
    let progress = Arc::new(Progress::default());
    let queue = Arc::new(Mutex::new(jobs.into_iter().enumerate().collect::<Vec<_>>()));
    let p = progress.clone();
    let handle = tokio::spawn(async move {
        let mut tasks = tokio::task::JoinSet::new();
        for c in 0..options.clients.max(1) {
            let queue = queue.clone();
            let persons = persons.clone();
            let targets = targets.clone();
            let options = options.clone();
            let progress = p.clone();
            let mut rng = Rng::seeded(seed ^ (c as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D));
            tasks.spawn(async move {
                let mut done = Vec::new();
                loop {
                    if options
                        .stop
                        .as_ref()
                        .is_some_and(|s| s.load(Ordering::SeqCst))
                    {
                        break;
                    }
                    let next = queue.lock().await.pop();
                    let Some((n, job)) = next else { break };
                    let target = &targets[job.target];
                    let person = persons
                        .get(&target.org)
                        .ok_or_else(|| anyhow::anyhow!("no person for {}", target.org))?;
                    let result =
                        answer_job(person, target, job, &options, &progress, &mut rng).await;
                    progress.jobs_done.fetch_add(1, Ordering::Relaxed);
                    done.push((n, result));
                    tokio::time::sleep(rng.between(options.pace.0, options.pace.1)).await;
                }
                Ok::<_, anyhow::Error>(done)
            });
        }
        let mut all = Vec::new();
        while let Some(r) = tasks.join_next().await {
            all.extend(r??);
        }
        all.sort_by_key(|(n, _)| *n);
        p.finished.store(true, Ordering::SeqCst);
        Ok(all.into_iter().map(|(_, r)| r).collect())
    });
    (progress, handle)
}

async fn answer_job(
    person: &Person,
    target: &Target,
    job: Job,
    options: &ClientOptions,
    progress: &Progress,
    rng: &mut Rng,
) -> JobResult {
    let path = target.path();
    let started = Instant::now();
    let mut attempts = Vec::new();
    loop {
        let sent = Instant::now();
        progress.requests.fetch_add(1, Ordering::Relaxed);
        let reply = tokio::time::timeout(
            options.request_bound,
            person.try_post_keyed(&path, &job.key, &job.body),
        )
        .await;
        let done = Instant::now();
        let log = match reply {
            Ok(Ok(r)) => AttemptLog {
                sent,
                done,
                status: r.status,
                code: r.code().to_owned(),
                retry_after: r.retry_after,
            },
            // A transport error (the ingress is in-process and never goes away) or
            // no answer within the bound: a hang, retried.
            Ok(Err(e)) => AttemptLog {
                sent,
                done,
                status: 0,
                code: format!("transport: {e}"),
                retry_after: None,
            },
            Err(_) => AttemptLog {
                sent,
                done,
                status: 0,
                code: "no answer within the bound".into(),
                retry_after: None,
            },
        };
        let status = log.status;
        attempts.push(log);
        match status {
            200..=299 => {
                progress.ok.fetch_add(1, Ordering::Relaxed);
                break;
            }
            503 | 0 => {
                if status == 503 {
                    progress.unavailable.fetch_add(1, Ordering::Relaxed);
                }
                if started.elapsed() >= options.give_up_after {
                    break;
                }
                tokio::time::sleep(rng.between(options.retry_pause.0, options.retry_pause.1)).await;
            }
            _ => break,
        }
    }
    JobResult { job, attempts }
}

/// `holdpoint worker` child processes of a [`TestApp`], to kill and respawn.
#[derive(Debug, Default)]
pub struct WorkerPool {
    live: Vec<usize>,
    /// SIGKILLs sent so far.
    pub kills: u64,
    /// Processes spawned so far.
    pub spawned: u64,
}

impl WorkerPool {
    /// Spawns `n` workers.
    pub fn start<N: Broker>(app: &mut TestApp<N>, n: usize) -> WorkerPool {
        let mut pool = WorkerPool::default();
        for _ in 0..n {
            pool.spawn(app);
        }
        pool
    }

    /// Spawns one more worker.
    pub fn spawn<N: Broker>(&mut self, app: &mut TestApp<N>) {
        self.live.push(app.spawn_worker_process(None));
        self.spawned += 1;
    }

    /// Live workers, in the order they were spawned.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// True when no worker runs.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// SIGKILLs a random live worker; false if there is none.
    pub fn kill_random<N: Broker>(&mut self, app: &mut TestApp<N>, rng: &mut Rng) -> bool {
        if self.live.is_empty() {
            return false;
        }
        let i = self.live.remove(rng.below(self.live.len() as u64) as usize);
        app.kill_process(i);
        self.kills += 1;
        true
    }

    /// SIGKILLs the longest-lived worker half of the time, else a random one; false
    /// if there is none. A partition stays with the worker pinned to it until that
    /// worker dies, so a worker spawned after the others holds nothing until one
    /// of them is killed: random kills alone land more and more on workers with
    /// nothing in flight (the 300-900 ms storm once killed 17 times in 4 rounds and
    /// no command was delivered again).
    pub fn kill_likely_owner<N: Broker>(&mut self, app: &mut TestApp<N>, rng: &mut Rng) -> bool {
        if self.live.is_empty() {
            return false;
        }
        let at = if rng.below(2) == 0 {
            0
        } else {
            rng.below(self.live.len() as u64) as usize
        };
        let i = self.live.remove(at);
        app.kill_process(i);
        self.kills += 1;
        true
    }

    /// Process indices of the live workers.
    pub fn live(&self) -> &[usize] {
        &self.live
    }

    /// Every live worker is still running (none died by itself).
    pub fn all_running<N: Broker>(&self, app: &mut TestApp<N>) -> bool {
        self.live.iter().all(|&i| app.process_running(i))
    }
}

/// Kills a worker (the longest-lived one half the time, see
/// [`WorkerPool::kill_likely_owner`]), then respawns one after a random pause, at
/// random moments (`every`), until `stop` is set. Returns the kills made.
pub async fn kill_workers_until<N: Broker>(
    app: &mut TestApp<N>,
    pool: &mut WorkerPool,
    rng: &mut Rng,
    every: (Duration, Duration),
    stop: &AtomicBool,
) -> u64 {
    let before = pool.kills;
    while !stop.load(Ordering::SeqCst) {
        tokio::time::sleep(rng.between(every.0, every.1)).await;
        if stop.load(Ordering::SeqCst) {
            break;
        }
        pool.kill_likely_owner(app, rng);
        tokio::time::sleep(rng.between(Duration::ZERO, every.0)).await;
        pool.spawn(app);
    }
    pool.kills - before
}

/// Figures of a run and every violation found.
#[derive(Debug, Default, Clone)]
pub struct Figures {
    /// Targets (interactions) answered.
    pub targets: u64,
    /// Answers (jobs: one key each).
    pub answers: u64,
    /// HTTP requests sent (retries included).
    pub requests: u64,
    /// Answers that ended with a 2xx.
    pub ok: u64,
    /// Race losers (`409 NRY-0009`).
    pub conflicts: u64,
    /// `503` answers received (each retried).
    pub unavailable: u64,
    /// Requests with no answer within the bound.
    pub hangs: u64,
    /// 2xx answers that are not the recorded resolution.
    pub lost: u64,
    /// Interactions with more than one resolution, release or `tool-call-finished`.
    pub duplicated: u64,
    /// Interactions whose resolution, release or `tool-call-finished` event is
    /// missing although the record says it happened (a lost effect).
    pub missing_effects: u64,
    /// Interactions not settled, or never answered with a 2xx.
    pub stuck: u64,
    /// Event ids seen with two different contents.
    pub id_conflicts: u64,
    /// Events of the checked interactions.
    pub events: u64,
    /// Longest single request.
    pub max_request: Duration,
    /// Every violation, for the failure message.
    pub violations: Vec<String>,
}

impl Figures {
    /// Adds another run's figures.
    pub fn add(&mut self, o: &Figures) {
        self.targets += o.targets;
        self.answers += o.answers;
        self.requests += o.requests;
        self.ok += o.ok;
        self.conflicts += o.conflicts;
        self.unavailable += o.unavailable;
        self.hangs += o.hangs;
        self.lost += o.lost;
        self.duplicated += o.duplicated;
        self.missing_effects += o.missing_effects;
        self.stuck += o.stuck;
        self.id_conflicts += o.id_conflicts;
        self.events += o.events;
        self.max_request = self.max_request.max(o.max_request);
        self.violations.extend(o.violations.iter().cloned());
    }

    /// Panics with every violation if there is one.
    pub fn assert_clean(&self) {
        assert!(
            self.violations.is_empty(),
            "{} violation(s):\n{}\n{self}",
            self.violations.len(),
            self.violations
                .iter()
                .take(40)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "interactions {}, answers {}, requests {}, 2xx {}, 409 races lost {}, 503 {}, hangs {}, \
             lost {}, duplicated {}, missing effects {}, stuck {}, event-id conflicts {}, events {}, \
             longest request {:?}, violations {}",
            self.targets,
            self.answers,
            self.requests,
            self.ok,
            self.conflicts,
            self.unavailable,
            self.hangs,
            self.lost,
            self.duplicated,
            self.missing_effects,
            self.stuck,
            self.id_conflicts,
            self.events,
            self.max_request,
            self.violations.len()
        )
    }
}

/// Reports the results of every approved (released) call through the runtime, so
/// each blocked call can get its `tool-call-finished`. Needs a live worker.
///
/// # Errors
/// When a report is refused or keeps timing out for 60 s.
pub async fn finish_released<N: Broker>(
    app: &TestApp<N>,
    targets: &[Target],
) -> anyhow::Result<u64> {
    let mut runtimes: HashMap<String, Runtime> = HashMap::new();
    let mut reported = 0;
    for t in targets.iter().filter(|t| t.kind == TargetKind::Approval) {
        let Some(record) = app.interaction(&t.org, &t.id).await else {
            continue;
        };
        if record.state != State::Resolved {
            continue;
        }
        if !runtimes.contains_key(&t.org) {
            runtimes.insert(t.org.clone(), app.runtime(&t.org).await);
        }
        let rt = &runtimes[&t.org];
        retry_runtime("tool result", Duration::from_secs(60), || {
            rt.report_tool_result(
                &t.id,
                CallResult::Ok {
                    output: json!({"ran": t.id}),
                },
            )
        })
        .await?;
        reported += 1;
    }
    Ok(reported)
}

fn approved(record: &Interaction) -> Option<bool> {
    match record.resolution.as_ref().map(|r| &r.answer) {
        Some(Answer::Approval { approved, .. }) => Some(*approved),
        _ => None,
    }
}

/// Checks every guarantee over the `targets` that were answered (have `results`),
/// once the workers are idle (and released calls reported, see
/// [`finish_released`]). `request_bound` is the longest a request may take.
pub async fn check<N: Broker>(
    app: &TestApp<N>,
    targets: &[Target],
    results: &[JobResult],
    request_bound: Duration,
) -> Figures {
    let answered: HashSet<usize> = results.iter().map(|r| r.job.target).collect();
    let all = targets;
    let targets: Vec<Target> = answered.iter().map(|&i| all[i].clone()).collect();
    let index: HashMap<usize, usize> = answered.iter().enumerate().map(|(n, &i)| (i, n)).collect();
    let results: Vec<JobResult> = results
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.job.target = index[&r.job.target];
            r
        })
        .collect();
    let (targets, results) = (&targets[..], &results[..]);
    let mut f = Figures {
        targets: targets.len() as u64,
        answers: results.len() as u64,
        ..Figures::default()
    };
    let mut v = Vec::new();

    // Every request: its answer in time; every 503 retryable, with Retry-After.
    for r in results {
        for a in &r.attempts {
            f.requests += 1;
            let took = a.done - a.sent;
            f.max_request = f.max_request.max(took);
            match a.status {
                0 => {
                    f.hangs += 1;
                    v.push(format!(
                        "{}: request with key {} had no answer after {took:?} ({})",
                        targets[r.job.target].id, r.job.key, a.code
                    ));
                }
                503 => {
                    f.unavailable += 1;
                    if a.code != "NRY-0050" || a.retry_after.as_deref() != Some("1") {
                        v.push(format!(
                            "503 without NRY-0050 and Retry-After: 1 (code {:?}, Retry-After {:?})",
                            a.code, a.retry_after
                        ));
                    }
                }
                _ => {}
            }
            if took > request_bound {
                v.push(format!(
                    "{}: a request took {took:?}, over the bound {request_bound:?}",
                    targets[r.job.target].id
                ));
            }
        }
        match r.final_status() {
            Some(s) if (200..300).contains(&s) => f.ok += 1,
            Some(409) if r.attempts.last().is_some_and(|a| a.code == "NRY-0009") => {
                f.conflicts += 1;
            }
            Some(s) => v.push(format!(
                "{}: key {} ended with {s} {:?}",
                targets[r.job.target].id,
                r.job.key,
                r.attempts.last().map(|a| a.code.clone())
            )),
            None => {} // counted below as stuck unless another job won
        }
    }

    // The records.
    let records: Vec<Option<Interaction>> = futures::stream::iter(targets.iter())
        .map(|t| app.interaction(&t.org, &t.id))
        .buffered(32)
        .collect()
        .await;

    // The events, once per organisation, grouped by interaction.
    let orgs: HashSet<&str> = targets.iter().map(|t| t.org.as_str()).collect();
    let mut by_id: HashMap<(String, String), Vec<Event>> = HashMap::new();
    let mut seen: HashMap<String, Event> = HashMap::new();
    let ids: HashSet<(&str, &str)> = targets
        .iter()
        .map(|t| (t.org.as_str(), t.id.as_str()))
        .collect();
    for org in orgs {
        for e in app.events(org).await {
            if ids.contains(&(org, e.subject.as_str())) {
                f.events += 1;
            }
            if let Some(prev) = seen.get(&e.id) {
                if prev != &e {
                    f.id_conflicts += 1;
                    v.push(format!("event id {} appears with different content", e.id));
                }
            } else {
                seen.insert(e.id.clone(), e.clone());
            }
            by_id
                .entry((org.to_owned(), e.subject.clone()))
                .or_default()
                .push(e);
        }
    }

    let mut jobs_of: BTreeMap<usize, Vec<&JobResult>> = BTreeMap::new();
    for r in results {
        jobs_of.entry(r.job.target).or_default().push(r);
    }
    for (i, t) in targets.iter().enumerate() {
        let jobs = jobs_of.get(&i).cloned().unwrap_or_default();
        let ok_keys: HashSet<&str> = jobs
            .iter()
            .filter(|r| r.succeeded())
            .map(|r| r.job.key.as_str())
            .collect();
        let Some(record) = &records[i] else {
            f.stuck += 1;
            v.push(format!("{}: no record", t.id));
            continue;
        };
        let resolved_key = record.resolution.as_ref().map(|r| r.key.as_str());
        if ok_keys.is_empty() {
            f.stuck += 1;
            v.push(format!(
                "{}: no answer got a 2xx (state {:?}, statuses {:?})",
                t.id,
                record.state,
                jobs.iter()
                    .map(|r| r.attempts.iter().map(|a| a.status).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            ));
        }
        for k in &ok_keys {
            if Some(*k) != resolved_key {
                f.lost += 1;
                v.push(format!(
                    "{}: key {k} got a 2xx but the record holds {resolved_key:?}",
                    t.id
                ));
            }
        }
        if record.state != State::Finished {
            f.stuck += 1;
            v.push(format!("{}: state {:?}, not finished", t.id, record.state));
        }
        let none = Vec::new();
        let events = by_id.get(&(t.org.clone(), t.id.clone())).unwrap_or(&none);
        let count = |name: &str| events.iter().filter(|e| e.name() == name).count();
        let resolved = count("interaction-resolved");
        let released = count("tool-call-released");
        let finished = events
            .iter()
            .filter(|e| {
                matches!(&e.body, EventData::ToolCallFinished { interaction_id, .. }
                    if interaction_id.as_str() == t.id)
            })
            .count();
        let want_released = usize::from(approved(record) == Some(true));
        if resolved > 1 || finished > 1 || released > want_released {
            f.duplicated += 1;
        }
        if resolved < 1 || finished < 1 || released < want_released {
            f.missing_effects += 1;
        }
        if resolved != 1 || finished != 1 || released != want_released {
            let outbox: Vec<String> = record
                .outbox
                .iter()
                .map(|o| {
                    format!(
                        "{}{}: [{}]",
                        &o.command_id[..o.command_id.len().min(12)],
                        if o.confirmed { " (confirmed)" } else { "" },
                        o.effects
                            .events
                            .iter()
                            .map(|e| e.name())
                            .collect::<Vec<_>>()
                            .join(" ")
                    )
                })
                .collect();
            v.push(format!(
                "{}: {resolved} interaction-resolved, {finished} tool-call-finished, \
                 {released} tool-call-released (want 1, 1, {want_released}); state {:?}, \
                 stored events {:?}, outbox {outbox:?}",
                t.id,
                record.state,
                events.iter().map(|e| e.name()).collect::<Vec<_>>()
            ));
        }
        if let Some(e) = events.iter().find(|e| e.name() == "interaction-resolved")
            && let EventData::InteractionResolved { key, .. } = &e.body
            && Some(key.as_str()) != resolved_key
        {
            v.push(format!(
                "{}: interaction-resolved says key {key}, the record {resolved_key:?}",
                t.id
            ));
        }
    }
    f.violations = v;
    f
}

/// Whether each approval target was approved (for the effect its answer has).
pub async fn approvals<N: Broker>(app: &TestApp<N>, targets: &[Target]) -> HashMap<String, bool> {
    let mut out = HashMap::new();
    for t in targets.iter().filter(|t| t.kind == TargetKind::Approval) {
        if let Some(record) = app.interaction(&t.org, &t.id).await
            && let Some(a) = approved(&record)
        {
            out.insert(t.id.clone(), a);
        }
    }
    out
}

/// One person per organisation of `targets`.
pub fn persons_for<N: Broker>(app: &TestApp<N>, targets: &[Target]) -> HashMap<String, Person> {
    targets
        .iter()
        .map(|t| (t.org.clone(), app.person(&t.org, "chaos-client")))
        .collect()
}

/// When the last 2xx ended before `at`, and the first 2xx ended after it
/// (for the unavailability window around a fault at `at`).
pub fn successes_around(results: &[JobResult], at: Instant) -> (Option<Instant>, Option<Instant>) {
    let mut before = None;
    let mut after = None;
    for a in results.iter().flat_map(|r| r.attempts.iter()) {
        if !(200..300).contains(&a.status) {
            continue;
        }
        if a.done <= at {
            before = before.max(Some(a.done));
        } else if after.is_none_or(|x| a.done < x) {
            after = Some(a.done);
        }
    }
    (before, after)
}

// ---------------------------------------------------------------- scenarios

/// Interactions a [`Scenario`] opens in one organisation.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Organisation.
    pub org: String,
    /// Blocking questions.
    pub questions: usize,
    /// Approvals.
    pub approvals: usize,
}

impl Batch {
    /// `questions` questions and `approvals` approvals in `org`.
    pub fn new(org: &str, questions: usize, approvals: usize) -> Batch {
        Batch {
            org: org.to_owned(),
            questions,
            approvals,
        }
    }
}

/// One chaos run, described once for the fault suite, the cluster test and the
/// soak: the load (what is opened, how it is answered, by how many clients) and
/// the judgement (the request bound in [`ClientOptions::request_bound`], how long
/// the workers may take to settle, how late an effect may reach a live reader).
/// The faults are what the test does while [`Running::progress`] moves, between
/// [`Scenario::start`] and [`Running::judge`].
#[derive(Debug, Clone)]
pub struct Scenario {
    /// What is opened, organisation by organisation (in this order).
    pub batches: Vec<Batch>,
    /// Interactions opened at a time.
    pub open_parallel: usize,
    /// The share of interactions that also get a racing second answer
    /// ([`plan_jobs`]).
    pub race: f64,
    /// How the clients answer.
    pub clients: ClientOptions,
    /// How long the workers may take to go idle after the answers (twice: before
    /// and after the released calls' results are reported).
    pub settle: Duration,
    /// The longest an answer's effect may take to reach a live reader after its 2xx.
    pub effect_delay_bound: Duration,
}

/// A [`Scenario`] under way: the targets opened, the clients answering them, live
/// readers on the event subjects.
pub struct Running {
    /// The interactions opened.
    pub targets: Arc<Vec<Target>>,
    /// The clients' live counters.
    pub progress: Arc<Progress>,
    /// The jobs planned.
    pub jobs: u64,
    clients: tokio::task::JoinHandle<anyhow::Result<Vec<JobResult>>>,
    live: crate::readers::Readers,
}

/// What a [`Running::judge`] found: the guarantees ([`check`]) and what the live
/// readers saw ([`crate::readers::judge_around`]), each with its violations.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The guarantees over the records and the stream.
    pub figures: Figures,
    /// What the live readers saw.
    pub seen: crate::readers::ReaderFigures,
}

impl Verdict {
    /// The figures with the readers' violations added.
    pub fn merged(mut self) -> Figures {
        self.figures
            .violations
            .extend(self.seen.violations.iter().cloned());
        self.figures
    }
}

impl Scenario {
    /// Opens the batches (needs a live worker), plans the jobs, starts the live
    /// readers and the clients, in that order (`rng` is drawn from in the same
    /// order every time, so a seed replays a run).
    ///
    /// # Errors
    /// When an interaction cannot be opened.
    pub async fn start<N: Broker>(
        &self,
        app: &TestApp<N>,
        rng: &mut Rng,
    ) -> anyhow::Result<Running> {
        let mut targets = Vec::new();
        for b in &self.batches {
            targets.extend(
                open_targets(app, &b.org, b.questions, b.approvals, self.open_parallel)
                    .await
                    .map_err(|e| e.context(format!("opening in {}", b.org)))?,
            );
        }
        let jobs = plan_jobs(&targets, self.race, rng);
        let planned = jobs.len() as u64;
        let targets = Arc::new(targets);
        let live = crate::readers::Readers::start(&app.nats.url()).await;
        let (progress, clients) = run_clients(
            persons_for(app, &targets),
            targets.clone(),
            jobs,
            self.clients.clone(),
            rng.next_u64(),
        );
        Ok(Running {
            targets,
            progress,
            jobs: planned,
            clients,
            live,
        })
    }
}

impl Running {
    /// Waits for the clients (all jobs done, or `stop` set) and returns their results.
    ///
    /// # Errors
    /// When the client task failed.
    pub async fn results(&mut self) -> anyhow::Result<Vec<JobResult>> {
        (&mut self.clients).await?
    }

    /// Settles the run (workers idle, released calls reported, idle again), stops
    /// the live readers and judges `results` against `scenario`'s bounds; `outages`
    /// are the NATS outages (`(down, back)`) the effect delays allow for.
    ///
    /// # Errors
    /// When a released call's result cannot be reported.
    pub async fn judge<N: Broker>(
        self,
        app: &TestApp<N>,
        scenario: &Scenario,
        results: &[JobResult],
        outages: &[(Instant, Instant)],
    ) -> anyhow::Result<Verdict> {
        app.wait_idle_within(scenario.settle).await;
        finish_released(app, &self.targets).await?;
        app.wait_idle_within(scenario.settle).await;
        let figures = check(app, &self.targets, results, scenario.clients.request_bound).await;
        let approved = approvals(app, &self.targets).await;
        let (core, durable, at_finish) = self
            .live
            .finish(Duration::from_secs(15), Duration::from_millis(500))
            .await;
        let mut seen = crate::readers::judge_around(
            &core,
            &durable,
            &self.targets,
            results,
            &approved,
            scenario.effect_delay_bound,
            outages,
        );
        seen.durable_at_finish = at_finish;
        Ok(Verdict { figures, seen })
    }
}

// ---------------------------------------------------------------- races

/// Which surface a race answers on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// `POST /v1/interactions/{id}/approve` and `/v1/questions/{id}/answer`, with
    /// `Idempotency-Key`.
    Rest,
    /// A2A `SendMessage` naming the interaction, with the key as `messageId`.
    A2a,
}

/// A race of openings against their answers: `count` interactions in `org` (every
/// other one a question, the rest approvals), each on its own task of a blocking
/// session, answered `answer_after` after its opening was sent.
#[derive(Debug, Clone)]
pub struct Race {
    /// Organisation.
    pub org: String,
    /// Interactions opened and answered.
    pub count: usize,
    /// Where the answers go.
    pub surface: Surface,
    /// How long after sending the opening its answer is sent (random in the range).
    pub answer_after: (Duration, Duration),
    /// Openings (each with its answer) under way at once.
    pub parallel: usize,
    /// How the answers are retried: `retry_pause`, `request_bound` and
    /// `give_up_after` apply (an answer refused as not found yet, `503` or a
    /// transport error is retried with the same key).
    pub clients: ClientOptions,
}

/// One A2A `SendMessage` answering `target` at `at` with `key` as its `messageId`,
/// read back as a REST-like [`AttemptLog`]: success is 200, an error the status of
/// its Holdpoint code (`NRY-0004` 404, `NRY-0050` 503 ...), with that code and the
/// response's `Retry-After`.
async fn a2a_attempt(
    person: &Person,
    at: &Placement,
    target: &Target,
    key: &str,
    variant: u64,
) -> Result<crate::app::Reply, reqwest::Error> {
    let uri = holdpoint_domain::EXTENSION_URI;
    let part = match target.kind {
        TargetKind::Approval => json!({"data": {"approved": variant % 4 != 3}}),
        TargetKind::Question => json!({"data": target.body(variant)}),
    };
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "role": "ROLE_USER", "messageId": key,
        "taskId": at.task_id.as_str(), "contextId": at.context_id.as_str(),
        "parts": [part], "extensions": [uri],
        "metadata": {uri: {"interactionId": target.id}},
    }}});
    let mut r = person
        .try_post_with(
            "/a2a",
            &[("A2A-Version", "1.0"), ("A2A-Extensions", uri)],
            &body,
        )
        .await?;
    if r.status == 200 {
        let code = r.body["error"]["data"][0]["metadata"]["code"]
            .as_str()
            .map(str::to_owned);
        if let Some(code) = code {
            r.status = holdpoint_domain::ErrorCode::ALL
                .iter()
                .find(|c| c.spec().code == code)
                .map_or(500, |c| c.spec().status);
            r.body = json!({"code": code});
        } else if r.body["error"].is_object() {
            r.status = 500;
            r.body = json!({"code": format!("json-rpc {}", r.body["error"]["code"])});
        }
    }
    Ok(r)
}

/// Opens one target with `rt` and answers it `after` later (REST or A2A, per
/// `race`), retrying the answer with the same key while it is not found yet,
/// `503` or a transport error, until something else comes or
/// `race.clients.give_up_after` passes.
async fn race_one(
    rt: &Runtime,
    person: &Person,
    race: &Race,
    (at, target, job): (Placement, Target, Job),
    (after, variant, seed): (Duration, u64, u64),
) -> anyhow::Result<JobResult> {
    let opening = {
        let (rt, at, target) = (rt.clone(), at.clone(), target.clone());
        tokio::spawn(async move {
            let call = format!("call-{}", target.id);
            match target.kind {
                TargetKind::Question => {
                    let qid = uuid::Uuid::parse_str(&target.id)?;
                    retry_runtime("ask_user", Duration::from_secs(60), || {
                        rt.ask_user(&at, &call, two_questions(), Some(qid))
                    })
                    .await
                    .map(|_| ())
                }
                TargetKind::Approval => retry_runtime("hold", Duration::from_secs(60), || {
                    rt.hold_for_approval(
                        &at,
                        HoldCall {
                            effect_id: target.id.clone(),
                            call_id: call.clone(),
                            server: "github".into(),
                            tool: "merge".into(),
                            arguments: json!({"id": target.id}),
                            reason: None,
                            editable: false,
                            approvals: None,
                        },
                    )
                })
                .await
                .map(|_| ()),
            }
        })
    };
    tokio::time::sleep(after).await;
    let mut rng = Rng::seeded(seed);
    let started = Instant::now();
    let mut attempts = Vec::new();
    loop {
        let sent = Instant::now();
        let reply = tokio::time::timeout(race.clients.request_bound, async {
            match race.surface {
                Surface::Rest => {
                    person
                        .try_post_keyed(&target.path(), &job.key, &job.body)
                        .await
                }
                Surface::A2a => a2a_attempt(person, &at, &target, &job.key, variant).await,
            }
        })
        .await;
        let (status, code, retry_after) = match reply {
            Ok(Ok(r)) => (r.status, r.code().to_owned(), r.retry_after),
            Ok(Err(e)) => (0, format!("transport: {e}"), None),
            Err(_) => (0, "no answer within the bound".to_owned(), None),
        };
        attempts.push(AttemptLog {
            sent,
            done: Instant::now(),
            status,
            code: code.clone(),
            retry_after,
        });
        let again = status == 503 || status == 0 || code == "NRY-0004";
        if !again || started.elapsed() >= race.clients.give_up_after {
            break;
        }
        tokio::time::sleep(rng.between(race.clients.retry_pause.0, race.clients.retry_pause.1))
            .await;
    }
    opening.await??;
    // A 404 kept past the give-up time is judged by `check` as what it is: the
    // answer never resolved the interaction it raced.
    Ok(JobResult { job, attempts })
}

/// A race under way: await it for the targets and the results, in order.
pub type RaceHandle = tokio::task::JoinHandle<anyhow::Result<(Vec<Target>, Vec<JobResult>)>>;

/// Runs `race` in the background (so the test can kill workers meanwhile): opens
/// its sessions, then for each target sends the opening and, a moment later, its
/// answer with its own key. Await the handle for the targets and the results, in
/// order; judge them with [`check`] once settled ([`finish_released`]).
pub fn race_opens_and_answers(
    rt: Runtime,
    person: Person,
    race: Race,
    seed: u64,
) -> (Arc<Progress>, RaceHandle) {
    let progress = Arc::new(Progress::default());
    let p = progress.clone();
    let handle = tokio::spawn(async move {
        let sessions: Vec<String> = (0..race.count.div_ceil(50))
            .map(|_| format!("s-{}", short_id()))
            .collect();
        for s in &sessions {
            retry_runtime("open session", Duration::from_secs(60), || {
                rt.open_session(s, holdpoint_domain::SessionMode::Blocking)
            })
            .await?;
        }
        let mut rng = Rng::seeded(seed);
        let mut planned = Vec::with_capacity(race.count);
        for n in 0..race.count {
            let at = Placement::new(
                &sessions[n / 50],
                "main",
                &format!("task-{}", short_id()),
                "ctx-1",
            )?;
            let target = Target {
                org: race.org.clone(),
                id: if n % 2 == 0 {
                    uuid::Uuid::new_v4().to_string()
                } else {
                    format!("eff_{}", short_id())
                },
                kind: if n % 2 == 0 {
                    TargetKind::Question
                } else {
                    TargetKind::Approval
                },
            };
            let variant = rng.next_u64();
            let job = Job {
                target: n,
                key: format!("k-{}-{}", target.id, variant % 10_000),
                body: target.body(variant),
            };
            let after = rng.between(race.answer_after.0, race.answer_after.1);
            planned.push(((at, target, job), (after, variant, rng.next_u64())));
        }
        let targets: Vec<Target> = planned.iter().map(|((_, t, _), _)| t.clone()).collect();
        let results = futures::stream::iter(planned)
            .map(|(what, how)| {
                let (rt, person, race, progress) = (&rt, &person, &race, &p);
                async move {
                    let r = race_one(rt, person, race, what, how).await;
                    progress.jobs_done.fetch_add(1, Ordering::Relaxed);
                    r
                }
            })
            .buffered(race.parallel.max(1))
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<anyhow::Result<Vec<_>>>()?;
        p.finished.store(true, Ordering::SeqCst);
        Ok((targets, results))
    });
    (progress, handle)
}

//! The load: the pool of pending interactions, saturation (closed loop) and fixed-
//! rate open loops whose latency counts from each request's scheduled time.

#[allow(unused_imports)]
use super::*;

/// An interaction waiting in the pool: its answer path and body.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub(crate) id: String,
    pub(crate) path: String,
    pub(crate) body: Value,
}

pub(crate) struct Pool {
    pub(crate) items: Vec<Pending>,
    pub(crate) next: AtomicUsize,
}

impl Pool {
    pub(crate) fn take(&self) -> Option<&Pending> {
        self.items.get(self.next.fetch_add(1, Ordering::Relaxed))
    }
    pub(crate) fn left(&self) -> usize {
        self.items
            .len()
            .saturating_sub(self.next.load(Ordering::Relaxed))
    }
}

pub(crate) async fn open_pool(
    rt: &Runtime,
    n: usize,
    offset: usize,
) -> anyhow::Result<(Vec<Pending>, Duration)> {
    open_some(rt, n, offset, false).await
}

/// `n` pending approvals only (each answered with a denial), for the batch figure.
pub(crate) async fn open_approvals(
    rt: &Runtime,
    n: usize,
    offset: usize,
) -> anyhow::Result<Vec<Pending>> {
    Ok(open_some(rt, n, offset, true).await?.0)
}

async fn open_some(
    rt: &Runtime,
    n: usize,
    offset: usize,
    approvals_only: bool,
) -> anyhow::Result<(Vec<Pending>, Duration)> {
    let session = format!("bench-{}", uuid::Uuid::new_v4().simple());
    rt.open_session(&session, SessionMode::Blocking).await?;
    let pb = bar(n as u64, "opening pending interactions");
    let started = Instant::now();
    let rt = Arc::new(rt.clone());
    let results: Vec<anyhow::Result<Pending>> = futures::stream::iter(0..n)
        .map(|i| {
            let (rt, session, pb) = (rt.clone(), session.clone(), pb.clone());
            async move {
                let k = i + offset;
                let at = Placement::new(&session, "main", &format!("task-{k}"), "ctx")?;
                let p = if !approvals_only && k.is_multiple_of(2) {
                    let id = rt
                        .ask_user(
                            &at,
                            &format!("call-{k}"),
                            vec![
                                QuestionSpec { text: "Which branch?".into(), options: vec!["main".into(), "release".into()], multiple: false, allow_text: false , schema: None },
                                QuestionSpec { text: "Duplicates?".into(), options: vec!["Delete".into(), "Merge".into(), "Keep both".into()], multiple: false, allow_text: true , schema: None },
                            ],
                            None,
                        )
                        .await?;
                    Pending {
                        path: format!("/v1/questions/{id}/answer"),
                        id: id.to_string(),
                        body: json!({"answers": [{"options": [0]}, {"options": [2], "text": "Keep both and reconcile nightly."}]}),
                    }
                } else {
                    let id = format!("eff_{k}_{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
                    rt.hold_for_approval(
                        &at,
                        HoldCall {
                            effect_id: id.clone(),
                            call_id: format!("call-{k}"),
                            server: "github".into(),
                            tool: "create_pull_request".into(),
                            arguments: json!({"repo": "acme/app", "n": k}),
                            reason: None,
                            editable: false,
                            approvals: None,
                        },
                    )
                    .await?;
                    // Denied, so the blocked call finishes at once (no executor in the loop).
                    Pending { path: format!("/v1/interactions/{id}/approve"), id, body: json!({"approved": false}) }
                };
                pb.inc(1);
                Ok(p)
            }
        })
        .buffer_unordered(256)
        .collect()
        .await;
    let took = started.elapsed();
    pb.finish_and_clear();
    results
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()
        .map(|v| (v, took))
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Lat {
    pub(crate) rate: f64,
    pub(crate) sent: u64,
    pub(crate) to_204: [u64; 4],
    pub(crate) to_finished: [u64; 4],
    pub(crate) errors: u64,
}

pub(crate) struct Target {
    pub(crate) http: reqwest::Client,
    pub(crate) base: String,
    pub(crate) token: String,
}

impl Target {
    pub(crate) async fn answer(&self, p: &Pending) -> bool {
        match self
            .http
            .post(format!("{}{}", self.base, p.path))
            .bearer_auth(&self.token)
            .json(&p.body)
            .send()
            .await
        {
            Ok(r) => r.status().as_u16() == 204,
            Err(_) => false,
        }
    }
}

pub(crate) async fn saturation(t: &Arc<Target>, pool: &Arc<Pool>, plan: &Plan) -> (f64, u64) {
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let pb = ProgressBar::new_spinner();
    pb.set_message("saturation (closed loop)");
    let deadline = Instant::now() + plan.saturation;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..plan.clients {
        let (t, pool, done, errors, pb) = (
            t.clone(),
            pool.clone(),
            done.clone(),
            errors.clone(),
            pb.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let Some(p) = pool.take() else { break };
                if t.answer(p).await {
                    done.fetch_add(1, Ordering::Relaxed);
                } else {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                pb.inc(1);
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    pb.finish_and_clear();
    let n = done.load(Ordering::Relaxed);
    (
        n as f64 / started.elapsed().as_secs_f64(),
        errors.load(Ordering::Relaxed),
    )
}

pub(crate) async fn open_loop(
    t: &Arc<Target>,
    pool: &Arc<Pool>,
    finished: &Arc<Mutex<HashMap<String, Instant>>>,
    rate: f64,
    d: Duration,
) -> Lat {
    let h204 = Arc::new(Mutex::new(hist()));
    let errors = Arc::new(AtomicU64::new(0));
    let interval = Duration::from_secs_f64(1.0 / rate.max(1.0));
    let total = (d.as_secs_f64() * rate) as u64;
    let pb = bar(total, &format!("open loop at {rate:.0}/s"));
    let start = Instant::now() + Duration::from_millis(50);
    let mut tasks = Vec::new();
    let mut scheduled_ids = Vec::new();
    for i in 0..total {
        let at = start + interval.mul_f64(i as f64);
        tokio::time::sleep_until(at.into()).await;
        let Some(p) = pool.take() else { break };
        scheduled_ids.push((p.id.clone(), at));
        let (t, h204, errors, pb, p) = (
            t.clone(),
            h204.clone(),
            errors.clone(),
            pb.clone(),
            p.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let ok = t.answer(&p).await;
            let us = at.elapsed().as_micros() as u64;
            if ok {
                h204.lock().await.record(us.max(1)).ok();
            } else {
                errors.fetch_add(1, Ordering::Relaxed);
            }
            pb.inc(1);
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    pb.finish_and_clear();
    // Wait (bounded) for the last tool-call-finished events.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = {
            let f = finished.lock().await;
            scheduled_ids
                .iter()
                .filter(|(id, _)| f.contains_key(id))
                .count()
        };
        if seen >= scheduled_ids.len() || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut hf = hist();
    {
        let f = finished.lock().await;
        for (id, at) in &scheduled_ids {
            if let Some(seen) = f.get(id) {
                hf.record(seen.saturating_duration_since(*at).as_micros() as u64 + 1)
                    .ok();
            }
        }
    }
    let h = h204.lock().await;
    let q = |h: &Histogram<u64>| {
        [
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.9),
            h.value_at_quantile(0.99),
            h.max(),
        ]
    };
    Lat {
        rate,
        sent: scheduled_ids.len() as u64,
        to_204: q(&h),
        to_finished: q(&hf),
        errors: errors.load(Ordering::Relaxed) + (scheduled_ids.len() as u64 - hf.len()),
    }
}

/// Items in one `POST /v1/answers` of the batch figure (the most a batch takes).
pub(crate) const BATCH: usize = 100;

/// The batch figure: the wall time of answering [`BATCH`] approvals as one
/// `POST /v1/answers`, against [`BATCH`] single `approve` requests sent one after
/// another (one client) and all at once (`BATCH` clients), `rounds` of each,
/// interleaved, each on approvals of its own.
#[derive(Debug, Clone, Default)]
pub(crate) struct BatchFigure {
    pub(crate) rounds: usize,
    /// p50 and max wall time, µs: one batch of [`BATCH`].
    pub(crate) batch: [u64; 2],
    /// p50 and max wall time, µs: [`BATCH`] singles one after another.
    pub(crate) sequential: [u64; 2],
    /// p50 and max wall time, µs: [`BATCH`] singles all in flight at once.
    pub(crate) concurrent: [u64; 2],
    /// Answers that were not `204` (a batch item's status, or a single's).
    pub(crate) errors: u64,
}

pub(crate) async fn batch_figure(
    t: &Arc<Target>,
    rt: &Runtime,
    rounds: usize,
    offset: usize,
) -> anyhow::Result<BatchFigure> {
    let items = open_approvals(rt, rounds * BATCH * 3, offset).await?;
    let mut chunks = items.chunks(BATCH);
    let (mut hb, mut hs, mut hc) = (hist(), hist(), hist());
    let mut errors = 0u64;
    let pb = bar(rounds as u64, "batch of 100 against 100 singles");
    for _ in 0..rounds {
        let (Some(batch), Some(seq), Some(conc)) = (chunks.next(), chunks.next(), chunks.next())
        else {
            bail!("the batch pool ran short");
        };
        let body = json!({"items": batch.iter().map(|p| json!({
            "interactionId": p.id,
            "operation": "approve",
            "body": p.body,
            "idempotencyKey": format!("bench-batch-{}", p.id),
        })).collect::<Vec<_>>()});
        let s = Instant::now();
        let r = t
            .http
            .post(format!("{}/v1/answers", t.base))
            .bearer_auth(&t.token)
            .json(&body)
            .send()
            .await?;
        let status = r.status();
        let v: Value = r.json().await?;
        hb.record(s.elapsed().as_micros() as u64).ok();
        if status != 200 {
            bail!("POST /v1/answers answered {status}: {v}");
        }
        let results = v["results"].as_array().map_or(&[][..], |a| a.as_slice());
        errors += (BATCH - results.iter().filter(|r| r["status"] == 204).count()) as u64;

        let s = Instant::now();
        for p in seq {
            if !t.answer(p).await {
                errors += 1;
            }
        }
        hs.record(s.elapsed().as_micros() as u64).ok();

        let s = Instant::now();
        let oks = futures::future::join_all(conc.iter().map(|p| t.answer(p))).await;
        hc.record(s.elapsed().as_micros() as u64).ok();
        errors += oks.iter().filter(|ok| !**ok).count() as u64;
        pb.inc(1);
    }
    pb.finish_and_clear();
    let q = |h: &Histogram<u64>| [h.value_at_quantile(0.5), h.max()];
    Ok(BatchFigure {
        rounds,
        batch: q(&hb),
        sequential: q(&hs),
        concurrent: q(&hc),
        errors,
    })
}

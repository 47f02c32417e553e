//! Node loss in a 3-node JetStream cluster (RELIABILITY.md guarantees
//! 1 and 3 with R3 streams and buckets).
//!
//! Holdpoint runs against all three nodes (comma-separated URLs) with every stream
//! and bucket at 3 replicas; answers flow from concurrent clients that retry `503`
//! with the same key. The leader of `HP_COMMANDS` is SIGKILLed, restarted, then
//! another node (the interactions bucket's leader when that is another node) is
//! SIGKILLed. No 2xx is lost, nothing takes effect twice, the ingress and the
//! worker processes reconnect by themselves, and the unavailability window around
//! each kill (last 2xx before it to first 2xx after it) is measured and printed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use holdpoint_bus::Topology;
use holdpoint_tests::app::{AppOptions, TestApp};
use holdpoint_tests::chaos::{self, Batch, ClientOptions, Rng, Scenario, WorkerPool};
use holdpoint_tests::nats::{NatsCluster, NatsClusterOptions, wait_for};

/// The node leading `stream`, as an index into the cluster.
async fn leader_of(app: &TestApp<NatsCluster>, stream: &str) -> Option<usize> {
    let mut s = app.bus.js.get_stream(stream).await.ok()?;
    let info = s.info().await.ok()?;
    let leader = info.cluster.as_ref()?.leader.clone()?;
    app.nats.index_of(&leader)
}

/// Waits until every replica of `stream` is current and a leader is elected.
async fn wait_replicas_current(app: &TestApp<NatsCluster>, stream: &str) {
    wait_for(
        Duration::from_secs(60),
        &format!("{stream} to have a leader and 2 current replicas"),
        || async move {
            let mut s = app.bus.js.get_stream(stream).await.ok()?;
            let info = s.info().await.ok()?;
            let c = info.cluster.as_ref()?;
            let ok = c.leader.is_some()
                && c.replicas.len() == 2
                && c.replicas.iter().all(|p| p.current && !p.offline);
            ok.then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn killing_the_commands_leader_then_another_node_loses_nothing() {
    let (mut rng, seed) = Rng::from_env("HOLDPOINT_FAULT_SEED");
    println!("seed {seed} (HOLDPOINT_FAULT_SEED replays it)");
    let outcome_timeout = Duration::from_secs(2);
    let mut app = TestApp::start_cluster(
        AppOptions {
            topo: Topology {
                replicas: 3,
                ack_wait: Duration::from_secs(2),
                ..Topology::default()
            },
            workers: 0,
            outcome_timeout,
            ..AppOptions::default()
        },
        NatsClusterOptions::default(),
    )
    .await;
    let commands = app.bus.topo.commands_stream();
    let interactions = app.bus.topo.state_stream();
    for stream in [&commands, &interactions] {
        let mut s = app.bus.js.get_stream(stream).await.expect("stream");
        let replicas = s.info().await.expect("info").config.num_replicas;
        assert_eq!(replicas, 3, "{stream} is R3");
    }
    let pool = WorkerPool::start(&mut app, 2);
    // A request waits its outcome timeout; a JetStream request may wait its own
    // timeout (5 s) on top while a leader is being elected.
    let bound = outcome_timeout + Duration::from_secs(6);
    let stop = Arc::new(AtomicBool::new(false));
    let scenario = Scenario {
        batches: vec![Batch::new("acme", 360, 40)],
        open_parallel: 16,
        race: 0.1,
        clients: ClientOptions {
            clients: 4,
            pace: (Duration::from_millis(100), Duration::from_millis(300)),
            retry_pause: (Duration::from_millis(100), Duration::from_millis(300)),
            request_bound: bound,
            give_up_after: Duration::from_secs(60),
            stop: Some(stop.clone()),
        },
        settle: Duration::from_secs(60),
        // A node loss moves stream leaders, and a public stream's sourcing from
        // the state stream picks up again once its durable source consumer has a
        // new leader: seconds after the state stream serves again (RELIABILITY.md,
        // "Effect delay per fault"; nats-server's ephemeral source consumers took
        // 12-16 s when the state stream's leader died alone).
        effect_delay_bound: Duration::from_secs(10),
    };
    let mut run = scenario.start(&app, &mut rng).await.expect("open");
    let progress = run.progress.clone();
    let ok_now = || progress.ok.load(Ordering::SeqCst);
    wait_for(Duration::from_secs(30), "answers to flow", || async {
        (ok_now() >= 10).then_some(())
    })
    .await;

    let mut kills = Vec::new();
    // 1. The leader of HP_COMMANDS.
    let leader = leader_of(&app, &commands).await.expect("commands leader");
    let kvl = leader_of(&app, &interactions).await;
    println!(
        "HP_COMMANDS leader: {}, {interactions} leader: {:?}",
        app.nats.server_name(leader),
        kvl.map(|i| app.nats.server_name(i).to_owned())
    );
    let at = Instant::now();
    app.nats.kill(leader).await;
    kills.push(("HP_COMMANDS leader", at));
    let before = ok_now();
    wait_for(
        Duration::from_secs(60),
        "answers after the leader kill",
        || async { (ok_now() >= before + 10).then_some(()) },
    )
    .await;
    let new_leader = leader_of(&app, &commands).await;
    assert!(
        new_leader.is_some_and(|l| l != leader),
        "a new HP_COMMANDS leader was elected"
    );
    app.nats.restart(leader).await;
    wait_replicas_current(&app, &commands).await;
    wait_replicas_current(&app, &interactions).await;

    // 2. Another node: the interactions bucket's leader if it is not the node just
    // restarted, else a follower of HP_COMMANDS.
    let second = match leader_of(&app, &interactions).await {
        Some(l) if l != leader => l,
        _ => (0..app.nats.len()).find(|&i| i != leader).expect("a node"),
    };
    println!("second victim: {}", app.nats.server_name(second));
    let at = Instant::now();
    app.nats.kill(second).await;
    kills.push(("another node", at));
    let before = ok_now();
    wait_for(
        Duration::from_secs(60),
        "answers after the second kill",
        || async { (ok_now() >= before + 10).then_some(()) },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    let results = run.results().await.expect("clients ran");
    assert!(
        pool.all_running(&mut app),
        "a worker process died: they must reconnect by themselves"
    );
    app.nats.restart(second).await;

    // Each node loss is an outage from the kill to the first 2xx after it: an effect
    // owed across it is measured from when the cluster served again, as the fault
    // suite measures a nats-server restart.
    let mut outages = Vec::new();
    for (what, at) in &kills {
        let (last, first) = chaos::successes_around(&results, *at);
        let (last, first) = (last.expect("a 2xx before"), first.expect("a 2xx after"));
        outages.push((*at, first));
        println!(
            "{what} killed: unavailability window {:?} (last 2xx {:?} before the kill, first \
             2xx {:?} after it)",
            first - last,
            *at - last,
            first - *at
        );
    }
    let verdict = run
        .judge(&app, &scenario, &results, &outages)
        .await
        .expect("tool results");
    println!("{}\n{}", verdict.figures, verdict.seen);
    verdict.merged().assert_clean();
    // No second copy after the node losses: each event, audit record and lane
    // message once in its stream.
    let copies = holdpoint_tests::copies::count(&app.bus).await;
    println!("{copies}");
    copies.assert_each_once();
    // pool is kept alive until here so its workers run through the checks.
    drop(pool);
}

/// Kills the processes on drop.
struct Nodes(Vec<std::process::Child>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts the three shipped configs on loopback (hosts, ports and the store
/// directory rewritten) in `dir`; returns the nodes, their (client, route,
/// monitoring) ports and each node's `/varz`. Picks fresh ports and starts again
/// when a port picked as free was taken meanwhile (other tests run alongside).
async fn start_production_cluster(
    dir: &std::path::Path,
) -> (Nodes, Vec<(u16, u16, u16)>, Vec<serde_json::Value>) {
    use holdpoint_tests::nats::{free_ports, nats_server_binary, workspace_root};
    let conf_dir = workspace_root().join("ops/nats/cluster");
    std::fs::create_dir_all(dir.join("cluster")).expect("mkdir");
    std::fs::copy(
        workspace_root().join("ops/nats/holdpoint.conf"),
        dir.join("holdpoint.conf"),
    )
    .expect("copy holdpoint.conf");
    let http = reqwest::Client::new();
    let mut failures = Vec::new();
    for attempt in 0..5 {
        let ports: Vec<(u16, u16, u16)> = free_ports(9)
            .expect("free ports")
            .chunks(3)
            .map(|p| (p[0], p[1], p[2]))
            .collect();
        let mut nodes = Nodes(Vec::new());
        let mut logs = Vec::new();
        for (i, (client, route, http)) in ports.iter().enumerate() {
            let n = i + 1;
            let mut text =
                std::fs::read_to_string(conf_dir.join(format!("nats-{n}.conf"))).expect("config");
            let store = dir.join(format!("store-{attempt}-{n}"));
            for (from, to) in [
                ("0.0.0.0:4222".to_owned(), format!("127.0.0.1:{client}")),
                ("0.0.0.0:6222".to_owned(), format!("127.0.0.1:{route}")),
                ("127.0.0.1:8222".to_owned(), format!("127.0.0.1:{http}")),
                (
                    "/var/lib/holdpoint/nats".to_owned(),
                    store.display().to_string(),
                ),
            ] {
                assert!(text.contains(&from), "nats-{n}.conf has no {from}");
                text = text.replace(&from, &to);
            }
            for (j, (_, r, _)) in ports.iter().enumerate() {
                text = text.replace(&format!("nats-{}:6222", j + 1), &format!("127.0.0.1:{r}"));
            }
            // The include is relative to the file: the same layout as ops/nats.
            let path = dir.join(format!("cluster/nats-{n}.conf"));
            std::fs::write(&path, text).expect("write config");
            let log_path = dir.join(format!("nats-{attempt}-{n}.log"));
            nodes.0.push(
                holdpoint_cli::localnats::spawn(
                    &nats_server_binary(),
                    [std::ffi::OsStr::new("-c"), path.as_os_str()],
                    Some(&log_path),
                )
                .expect("spawn nats-server"),
            );
            logs.push(log_path);
        }
        // Every node answers its monitoring port, or one exited.
        let started = std::time::Instant::now();
        let mut varz: Vec<Option<serde_json::Value>> = vec![None; 3];
        let exited = loop {
            if let Some(i) = nodes
                .0
                .iter_mut()
                .position(|c| !matches!(c.try_wait(), Ok(None)))
            {
                break Some(i);
            }
            for (i, (_, _, port)) in ports.iter().enumerate() {
                if varz[i].is_none() {
                    varz[i] = async {
                        http.get(format!("http://127.0.0.1:{port}/varz"))
                            .send()
                            .await
                            .ok()?
                            .json()
                            .await
                            .ok()
                    }
                    .await;
                }
            }
            if varz.iter().all(Option::is_some) {
                break None;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the nodes did not answer /varz in 60 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        match exited {
            None => return (nodes, ports, varz.into_iter().flatten().collect()),
            Some(i) => {
                let log = std::fs::read_to_string(&logs[i]).unwrap_or_default();
                if !log.contains("address already in use") {
                    panic!("nats-{} exited at start-up:\n{log}", i + 1);
                }
                failures.push(log);
            }
        }
    }
    panic!("no free ports in 5 attempts:\n{}", failures.join("\n---\n"));
}

/// `ops/nats/cluster/nats-{1,2,3}.conf`, as shipped (only hosts, ports and the
/// store directory rewritten for loopback), form a JetStream cluster that fsyncs
/// every write, and Holdpoint's setup makes every stream and bucket R3 on it.
#[tokio::test]
async fn the_production_cluster_configs_form_a_synced_r3_cluster() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_nodes, ports, varz) = start_production_cluster(dir.path()).await;
    // Every node fsyncs every write.
    for (i, v) in varz.iter().enumerate() {
        assert_eq!(
            v["jetstream"]["config"]["sync_always"],
            true,
            "node {}",
            i + 1
        );
        assert_eq!(v["cluster"]["name"], "holdpoint");
    }
    // Holdpoint's setup (as the setup role) makes everything R3 on it.
    let urls: Vec<String> = ports
        .iter()
        .map(|(c, _, _)| format!("nats://setup:setup-dev-only@127.0.0.1:{c}"))
        .collect();
    let client = holdpoint_bus::connect(&urls.join(","), "setup")
        .await
        .expect("connect");
    let topo = Topology {
        replicas: 3,
        ..Topology::default()
    };
    let bus = wait_for(Duration::from_secs(60), "an R3 setup", || {
        let (client, topo) = (client.clone(), topo.clone());
        async move { holdpoint_bus::Bus::setup(client, topo).await.ok() }
    })
    .await;
    for stream in [
        bus.topo.commands_stream(),
        bus.topo.events_stream(),
        bus.topo.state_stream(),
        format!("KV_{}", bus.topo.outcomes_bucket()),
    ] {
        let mut s = bus.js.get_stream(&stream).await.expect("stream");
        let info = s.info().await.expect("info");
        assert_eq!(info.config.num_replicas, 3, "{stream}");
        assert_eq!(
            info.cluster.as_ref().map(|c| c.replicas.len()),
            Some(2),
            "{stream}"
        );
    }
}

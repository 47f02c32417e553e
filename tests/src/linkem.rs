//! A degraded link in userspace, for a [`Lab`]: what `tc netem` would do (this
//! kernel is built without the netem qdisc).
//!
//! [`LinkEmulator::start`] creates a TUN device in the lab's switch namespace and,
//! on the bridge port of each host of a pair, a tc `clsact` ingress filter (`u32`
//! on the destination address) whose `mirred` action redirects the pair's IPv4
//! packets into that device, before the bridge sees them. A thread reads each
//! packet and, like netem with `delay D J loss L reorder R`:
//!
//! - drops it with probability `loss`;
//! - else sends it on at once with probability `reorder` (it overtakes the packets
//!   being held);
//! - else holds it for `delay` ± a uniform `jitter`, so packets also overtake one
//!   another when their draws differ.
//!
//! A packet written back to the device enters the switch namespace's IP stack and
//! is routed out through the bridge to its destination (TTL one lower). Every
//! packet of the pair takes the detour, both ways, TCP and all: the hosts see a
//! slow, lossy, reordering link and nothing else. [`LinkEmulator::stop`] (or
//! dropping it) removes the filters first, then sends what it still holds, then
//! closes the device.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

use crate::chaos::Rng;
use crate::lab::{Lab, SWITCH};

/// How a link is degraded (netem's `delay`, jitter, `loss`, `reorder`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    /// Delay added to each held packet, one way.
    pub delay: Duration,
    /// The delay varies uniformly by up to this much either way.
    pub jitter: Duration,
    /// Share of packets dropped (0 to 1).
    pub loss: f64,
    /// Share of the packets not dropped that are sent on at once (0 to 1).
    pub reorder: f64,
}

impl Profile {
    /// 200 ms ± 50 ms one way, 5 % loss, 25 % reordered.
    pub const WAN: Profile = Profile {
        delay: Duration::from_millis(200),
        jitter: Duration::from_millis(50),
        loss: 0.05,
        reorder: 0.25,
    };
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "delay {:?} ± {:?}, loss {:.0} %, reorder {:.0} %",
            self.delay,
            self.jitter,
            self.loss * 100.0,
            self.reorder * 100.0
        )
    }
}

/// What a [`LinkEmulator`] did.
#[derive(Debug, Default)]
pub struct LinkStats {
    /// Packets read from the detour.
    pub packets: AtomicU64,
    /// Packets dropped.
    pub dropped: AtomicU64,
    /// Packets sent on at once (reordered ahead of held ones).
    pub reordered: AtomicU64,
    /// Packets the device refused to take back (counted, not retried).
    pub write_errors: AtomicU64,
}

/// A running degraded link; see the module documentation.
#[derive(Debug)]
pub struct LinkEmulator {
    switch_ns: String,
    ports: Vec<String>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// What it did so far.
    pub stats: Arc<LinkStats>,
    /// The profile it applies.
    pub profile: Profile,
}

const DEVICE: &str = "em0";
const POLL: Duration = Duration::from_millis(10);

impl LinkEmulator {
    /// Degrades every link between a host of `a` and a host of `b` (both ways) in
    /// `lab` with `profile`; `seed` drives the drops and delays. One emulator at a
    /// time per lab.
    ///
    /// # Errors
    /// When the TUN device or a tc filter cannot be made (whatever was made is
    /// removed again).
    pub fn start(
        lab: &Lab,
        a: &[&str],
        b: &[&str],
        profile: Profile,
        seed: u64,
    ) -> Result<LinkEmulator> {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(LinkStats::default());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
        let switch_file = std::fs::File::open(format!("/run/netns/{}", lab.switch_ns()))
            .context("opening the switch namespace")?;
        let thread = {
            let (stop, stats) = (stop.clone(), stats.clone());
            std::thread::Builder::new()
                .name("linkem".into())
                .spawn(move || {
                    let device =
                        nix::sched::setns(&switch_file, nix::sched::CloneFlags::CLONE_NEWNET)
                            .context("entering the switch namespace")
                            .and_then(|()| {
                                let mut config = tun::Configuration::default();
                                config.tun_name(DEVICE).up();
                                tun::create(&config).context("creating the TUN device")
                            });
                    match device {
                        Ok(device) => {
                            let _ = ready_tx.send(Ok(()));
                            pump(&device, profile, seed, &stop, &stats);
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                })
                .context("spawning the link emulator thread")?
        };
        let mut emulator = LinkEmulator {
            switch_ns: lab.switch_ns().to_owned(),
            ports: Vec::new(),
            stop,
            thread: Some(thread),
            stats,
            profile,
        };
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .context("the link emulator did not start")??;
        lab.exec(
            SWITCH,
            "sysctl",
            &["-qw", &format!("net.ipv4.conf.{DEVICE}.rp_filter=0")],
        )?;
        for (from, to) in a
            .iter()
            .flat_map(|x| b.iter().map(move |y| (*x, *y)))
            .flat_map(|(x, y)| [(x, y), (y, x)])
        {
            if from == to {
                continue;
            }
            let port = lab.host(from).port.clone();
            if !emulator.ports.contains(&port) {
                lab.switch_tc(&["qdisc", "replace", "dev", &port, "clsact"])?;
                emulator.ports.push(port.clone());
            }
            let dst = format!("{}/32", lab.addr(to));
            lab.switch_tc(&[
                "filter", "add", "dev", &port, "ingress", "protocol", "ip", "u32", "match", "ip",
                "dst", &dst, "action", "mirred", "egress", "redirect", "dev", DEVICE,
            ])?;
        }
        Ok(emulator)
    }

    /// Removes the filters, sends on what is held and closes the device.
    pub fn stop(mut self) -> Arc<LinkStats> {
        self.shutdown();
        self.stats.clone()
    }

    fn shutdown(&mut self) {
        for port in self.ports.drain(..) {
            let _ = crate::lab::run(
                "ip",
                &[
                    "netns",
                    "exec",
                    &self.switch_ns,
                    "tc",
                    "qdisc",
                    "del",
                    "dev",
                    &port,
                    "clsact",
                ],
            );
        }
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for LinkEmulator {
    fn drop(&mut self) {
        self.shutdown();
    }
}

type Held = Reverse<(Instant, u64, Vec<u8>)>;

fn pump(device: &tun::Device, profile: Profile, seed: u64, stop: &AtomicBool, stats: &LinkStats) {
    let mut rng = Rng::seeded(seed);
    let mut held: BinaryHeap<Held> = BinaryHeap::new();
    let mut buf = vec![0u8; 65_536];
    let mut n = 0u64;
    let send = |p: &[u8]| {
        if device.send(p).is_err() {
            stats.write_errors.fetch_add(1, Ordering::Relaxed);
        }
    };
    loop {
        let now = Instant::now();
        while let Some(Reverse((due, _, _))) = held.peek() {
            if *due > now {
                break;
            }
            if let Some(Reverse((_, _, p))) = held.pop() {
                send(&p);
            }
        }
        if stop.load(Ordering::SeqCst) {
            for Reverse((_, _, p)) in held.into_sorted_vec().into_iter().rev() {
                send(&p);
            }
            return;
        }
        let wait = held
            .peek()
            .map(|Reverse((due, _, _))| due.saturating_duration_since(now))
            .unwrap_or(POLL)
            .min(POLL);
        let len = match device.recv_timeout(&mut buf, wait) {
            Ok(len) => len,
            Err(_) => continue,
        };
        stats.packets.fetch_add(1, Ordering::Relaxed);
        if rng.chance(profile.loss) {
            stats.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let packet = buf[..len].to_vec();
        if rng.chance(profile.reorder) {
            stats.reordered.fetch_add(1, Ordering::Relaxed);
            send(&packet);
            continue;
        }
        let jitter = profile.jitter.as_micros() as u64;
        let offset = rng.below(2 * jitter + 1);
        let delay = (profile.delay + Duration::from_micros(offset))
            .saturating_sub(Duration::from_micros(jitter));
        n += 1;
        held.push(Reverse((Instant::now() + delay, n, packet)));
    }
}

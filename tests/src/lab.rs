//! A network lab inside this machine: one Linux network namespace per host, each
//! with one veth link to a bridge in a switch namespace of its own, for the partition
//! harness ([`crate::netcluster`], `ops/partition.sh`).
//!
//! ```text
//!   <prefix>-n1  <prefix>-n2  ...  <prefix>-ld        (one namespace per host:
//!      eth0 10.213.0.1   eth0 10.213.0.2   eth0 ...    lo + eth0, nothing else)
//!        │             │                │
//!   ─────┴── p-n1 ─────┴── p-n2 ... ────┴── p-ld ──── br0 10.213.0.254   <prefix>-sw
//!                                        nft table bridge hplab  (allow list, cuts)
//!                                        em0 (TUN): the link emulator's detour
//! ```
//!
//! - **Who reaches whom.** The bridge forwards IPv4 only between the pairs given to
//!   [`Lab::allow`] (plus ARP); every other packet is dropped, so a process reaches
//!   exactly the addresses the harness gave it.
//! - **Partitions** ([`Lab::cut`]) drop packets from one host to another on the bridge,
//!   in one direction: a symmetric partition is two cuts. [`Lab::heal_cuts`] removes
//!   them all. The hosts see nothing but silence, as with a real network fault.
//! - **Degraded links** are [`crate::linkem::LinkEmulator`]'s: packets between chosen
//!   hosts are redirected (tc `mirred`) into a TUN device of the switch namespace,
//!   delayed, dropped and reordered in userspace, then routed on (this kernel has no
//!   netem qdisc).
//! - **Clean-up.** Every namespace name starts with `hpl<pid of the owner>-`. Dropping
//!   the [`Lab`] SIGKILLs every process still inside its namespaces (by pid, from `ip
//!   netns pids`) and deletes the namespaces, which removes their links, qdiscs, nft
//!   tables and TUN devices with them. [`Lab::sweep_leftovers`] (run by
//!   [`Lab::create`]) does the same for labs whose owner process is gone (a test
//!   killed before its `Drop` ran).
//! - **Where it cannot run** (not root, no `ip netns`, no `nft`), [`Lab::unavailable`]
//!   says why; tests then report themselves as not run, never as passed.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail};

/// The lab's subnet: host `k` (1-based, in [`Lab::create`]'s order) is `10.213.0.k`.
/// It exists only inside the lab's namespaces.
pub const SUBNET: [u8; 3] = [10, 213, 0];
/// The switch namespace's bridge address (the link emulator routes through it).
pub const SWITCH_ADDR: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 254);
/// The prefix of every lab namespace: `hpl<owner pid>-<host>`.
pub const NS_PREFIX: &str = "hpl";
/// The name of the switch host.
pub const SWITCH: &str = "sw";
/// The nft table (bridge family) of the switch namespace.
pub const NFT_TABLE: &str = "hplab";

/// One host of a [`Lab`].
#[derive(Debug, Clone)]
pub struct Host {
    /// Its name in the lab (`n1`, `ingress`, ...).
    pub name: String,
    /// Its network namespace (`hpl<pid>-<name>`).
    pub ns: String,
    /// Its address on the bridge.
    pub addr: Ipv4Addr,
    /// The switch-side end of its veth link (`p-<k>`).
    pub port: String,
}

/// A set of namespaces on one bridge; see the module documentation.
#[derive(Debug)]
pub struct Lab {
    prefix: String,
    hosts: BTreeMap<String, Host>,
    switch_ns: String,
    created: Vec<String>,
}

/// Runs `program args` and fails with its stderr when it exits non-zero.
pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `program args` inside namespace `ns`.
fn run_in(ns: &str, program: &str, args: &[&str]) -> Result<String> {
    let mut all = vec!["netns", "exec", ns, program];
    all.extend_from_slice(args);
    run("ip", &all)
}

/// Feeds `script` to `nft -f -` inside namespace `ns`.
fn nft_in(ns: &str, script: &str) -> Result<()> {
    use std::io::Write as _;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running nft")?;
    child
        .stdin
        .take()
        .context("nft stdin")?
        .write_all(script.as_bytes())
        .context("writing to nft")?;
    let out = child.wait_with_output().context("waiting for nft")?;
    if !out.status.success() {
        bail!(
            "nft failed in {ns}: {}\nscript:\n{script}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn ns_owner(ns: &str) -> Option<u32> {
    ns.strip_prefix(NS_PREFIX)?.split('-').next()?.parse().ok()
}

fn netns_list() -> Vec<String> {
    run("ip", &["netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// SIGKILLs every process inside `ns` (by pid) and deletes it.
fn destroy_ns(ns: &str) {
    if let Ok(pids) = run("ip", &["netns", "pids", ns]) {
        for pid in pids
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
    // A process being killed may hold the namespace a moment longer; `ip netns del`
    // unmounts it either way, and the kernel frees it once the last user is gone.
    let _ = run("ip", &["netns", "del", ns]);
}

impl Lab {
    /// Why a lab cannot be made here (`None` when it can): not root, no `ip netns`,
    /// no `nft`, or the kernel refused a namespace or a veth link.
    pub fn unavailable() -> Option<String> {
        if !nix::unistd::Uid::effective().is_root() {
            return Some(
                "not root: network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN".into(),
            );
        }
        for (tool, args) in [("ip", &["-V"][..]), ("nft", &["--version"][..])] {
            if let Err(e) = run(tool, args) {
                return Some(format!(
                    "{tool} is not usable ({e:#}); Debian packages iproute2 and nftables"
                ));
            }
        }
        let probe = format!("{NS_PREFIX}{}-probe", std::process::id());
        let result = run("ip", &["netns", "add", &probe]).and_then(|_| {
            run_in(
                &probe,
                "ip",
                &[
                    "link", "add", "name", "hpa", "type", "veth", "peer", "name", "hpb",
                ],
            )
        });
        destroy_ns(&probe);
        result
            .err()
            .map(|e| format!("cannot create a network namespace with a veth link: {e:#}"))
    }

    /// Deletes the namespaces (and kills the processes inside them) of labs whose
    /// owner process no longer runs. Returns the namespaces removed.
    pub fn sweep_leftovers() -> Vec<String> {
        let mut removed = Vec::new();
        for ns in netns_list() {
            let Some(owner) = ns_owner(&ns) else { continue };
            if Path::new(&format!("/proc/{owner}")).exists() {
                continue;
            }
            destroy_ns(&ns);
            removed.push(ns);
        }
        removed
    }

    /// Creates the switch namespace with its bridge and one namespace per name in
    /// `hosts` (host `k`, 1-based, gets `10.213.0.k`), each linked to the bridge. No
    /// host reaches another until [`Lab::allow`].
    ///
    /// # Errors
    /// When a namespace, link, address or the nft table cannot be made; whatever was
    /// made is removed again.
    pub fn create(hosts: &[&str]) -> Result<Lab> {
        let swept = Self::sweep_leftovers();
        if !swept.is_empty() {
            eprintln!(
                "lab: removed leftovers of earlier runs: {}",
                swept.join(" ")
            );
        }
        let prefix = format!("{NS_PREFIX}{}-{}", std::process::id(), unique());
        let mut lab = Lab {
            switch_ns: format!("{prefix}-{SWITCH}"),
            prefix,
            hosts: BTreeMap::new(),
            created: Vec::new(),
        };
        lab.build(hosts)?;
        Ok(lab)
    }

    fn build(&mut self, hosts: &[&str]) -> Result<()> {
        anyhow::ensure!(hosts.len() < 250, "at most 249 hosts");
        let sw = self.switch_ns.clone();
        run("ip", &["netns", "add", &sw])?;
        self.created.push(sw.clone());
        run_in(&sw, "ip", &["link", "set", "lo", "up"])?;
        run_in(&sw, "ip", &["link", "add", "br0", "type", "bridge"])?;
        run_in(
            &sw,
            "ip",
            &["addr", "add", &format!("{SWITCH_ADDR}/24"), "dev", "br0"],
        )?;
        run_in(&sw, "ip", &["link", "set", "br0", "up"])?;
        // The link emulator's packets come back in on its TUN device and are routed
        // out through br0.
        run_in(
            &sw,
            "sysctl",
            &[
                "-qw",
                "net.ipv4.ip_forward=1",
                "net.ipv4.conf.all.rp_filter=0",
                "net.ipv4.conf.default.rp_filter=0",
                "net.ipv4.conf.all.send_redirects=0",
                "net.ipv4.conf.default.send_redirects=0",
            ],
        )?;
        for (i, name) in hosts.iter().enumerate() {
            anyhow::ensure!(
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()),
                "host names are letters and digits: {name:?}"
            );
            let k = u8::try_from(i + 1).context("host index")?;
            let ns = format!("{}-{name}", self.prefix);
            let port = format!("p-{k}");
            let addr = Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], k);
            run("ip", &["netns", "add", &ns])?;
            self.created.push(ns.clone());
            run_in(&ns, "ip", &["link", "set", "lo", "up"])?;
            run_in(
                &sw,
                "ip",
                &[
                    "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &ns,
                ],
            )?;
            run_in(&sw, "ip", &["link", "set", &port, "master", "br0", "up"])?;
            run_in(
                &ns,
                "ip",
                &["addr", "add", &format!("{addr}/24"), "dev", "eth0"],
            )?;
            run_in(&ns, "ip", &["link", "set", "eth0", "up"])?;
            self.hosts.insert(
                (*name).to_owned(),
                Host {
                    name: (*name).to_owned(),
                    ns,
                    addr,
                    port,
                },
            );
        }
        nft_in(
            &sw,
            &format!(
                "table bridge {NFT_TABLE} {{\n\
                 \x20 set allowed {{ type ipv4_addr . ipv4_addr; }}\n\
                 \x20 set cut {{ type ipv4_addr . ipv4_addr; }}\n\
                 \x20 chain forward {{\n\
                 \x20   type filter hook forward priority 0; policy drop;\n\
                 \x20   ether type arp accept\n\
                 \x20   ip saddr . ip daddr @cut drop\n\
                 \x20   ip saddr . ip daddr @allowed accept\n\
                 \x20 }}\n\
                 \x20 chain output {{\n\
                 \x20   type filter hook output priority 0; policy accept;\n\
                 \x20   ip saddr . ip daddr @cut drop\n\
                 \x20 }}\n\
                 }}\n"
            ),
        )?;
        Ok(())
    }

    /// The host called `name`.
    ///
    /// # Panics
    /// When the lab has no such host.
    pub fn host(&self, name: &str) -> &Host {
        self.hosts
            .get(name)
            .unwrap_or_else(|| panic!("the lab has no host {name}"))
    }

    /// Every host, by name.
    pub fn hosts(&self) -> impl Iterator<Item = &Host> {
        self.hosts.values()
    }

    /// `name`'s address.
    pub fn addr(&self, name: &str) -> Ipv4Addr {
        self.host(name).addr
    }

    /// The switch namespace.
    pub fn switch_ns(&self) -> &str {
        &self.switch_ns
    }

    /// The prefix of this lab's namespace names.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A command that runs `program` inside `host`'s namespace (`ip netns exec`, which
    /// execs the program: the child's pid is the program's).
    pub fn command(&self, host: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.host(host).ns])
            .arg(program)
            .stdin(Stdio::null());
        cmd
    }

    /// Moves the calling thread into `host`'s network namespace ([`SWITCH`] for the
    /// switch): sockets and TUN devices it creates from then on live there. Threads
    /// it spawns inherit it.
    ///
    /// # Errors
    /// When the namespace cannot be opened or entered.
    pub fn enter(&self, host: &str) -> Result<()> {
        let ns = if host == SWITCH {
            self.switch_ns.clone()
        } else {
            self.host(host).ns.clone()
        };
        let file = File::open(format!("/run/netns/{ns}"))
            .with_context(|| format!("opening namespace {ns}"))?;
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
            .with_context(|| format!("entering namespace {ns}"))?;
        Ok(())
    }

    /// Lets each pair `(a, b)` exchange packets, both ways.
    ///
    /// # Errors
    /// When nft refuses the elements.
    pub fn allow(&self, pairs: &[(&str, &str)]) -> Result<()> {
        let mut elements = Vec::new();
        for (a, b) in pairs {
            let (a, b) = (self.addr(a), self.addr(b));
            elements.push(format!("{a} . {b}"));
            elements.push(format!("{b} . {a}"));
        }
        self.set_elements("add", "allowed", &elements)
    }

    /// Drops every packet from each host of `from` to each host of `to` (one
    /// direction) until [`Lab::heal_cuts`].
    ///
    /// # Errors
    /// When nft refuses the elements.
    pub fn cut(&self, from: &[&str], to: &[&str]) -> Result<()> {
        let mut elements = Vec::new();
        for a in from {
            for b in to {
                if a != b {
                    elements.push(format!("{} . {}", self.addr(a), self.addr(b)));
                }
            }
        }
        self.set_elements("add", "cut", &elements)
    }

    /// Cuts both directions between `a` and `b`.
    ///
    /// # Errors
    /// When nft refuses the elements.
    pub fn split(&self, a: &[&str], b: &[&str]) -> Result<()> {
        self.cut(a, b)?;
        self.cut(b, a)
    }

    /// Removes every cut.
    ///
    /// # Errors
    /// When nft fails.
    pub fn heal_cuts(&self) -> Result<()> {
        nft_in(
            &self.switch_ns,
            &format!("flush set bridge {NFT_TABLE} cut\n"),
        )
    }

    fn set_elements(&self, verb: &str, set: &str, elements: &[String]) -> Result<()> {
        if elements.is_empty() {
            return Ok(());
        }
        nft_in(
            &self.switch_ns,
            &format!(
                "{verb} element bridge {NFT_TABLE} {set} {{ {} }}\n",
                elements.join(", ")
            ),
        )
    }

    /// Runs `tc args` inside the switch namespace.
    ///
    /// # Errors
    /// When tc fails.
    pub fn switch_tc(&self, args: &[&str]) -> Result<String> {
        run_in(&self.switch_ns, "tc", args)
    }

    /// Runs `program args` inside `host`'s namespace ([`SWITCH`] for the switch).
    ///
    /// # Errors
    /// When it exits non-zero.
    pub fn exec(&self, host: &str, program: &str, args: &[&str]) -> Result<String> {
        let ns = if host == SWITCH {
            self.switch_ns.clone()
        } else {
            self.host(host).ns.clone()
        };
        run_in(&ns, program, args)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in self.created.iter().rev() {
            destroy_ns(ns);
        }
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

//! `weft router`: run the router (`--config FILE`, in the foreground until SIGINT or
//! SIGTERM: load the configuration, open the ports, install the routes, serve the
//! control socket, run the data plane, print the counters on the way out) and talk to
//! a running one (`weft router ctl`).
//!
//! The `weft` binary only parses arguments and calls [`run`] or [`ctl`](fn@ctl); the router's
//! benchmarks (`weft router bench`, `rfc2544`) are weft-bench's, not the library's.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use weft_link::xdp_fwd::FastPathUnavailable;
use weft_link::{BufferPool, Link};

use crate::cluster::config::ClusterPlan;
use crate::cluster::fabric::VerbsFabric;
use crate::cluster::node::Interconnect;
use crate::config::{Backend, Config, ConfigError, FastPathHook};
use crate::ctl::{self, ControlServer};
use crate::fastpath::FastPathSync;
use crate::instance;
use crate::{Architecture, Dataplane, Options, Router, RouterConfig};

/// How often the XDP fast path's maps are rebuilt even when neither the FIB nor the
/// neighbour table changed (a neighbour's state also moves with time).
const FAST_PATH_RESYNC: Duration = Duration::from_secs(1);

/// The control socket when neither `--socket` nor the configuration names one.
pub const DEFAULT_SOCKET: &str = "/run/weft-router.sock";

/// Arguments of `weft router` when it runs the router.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The router's TOML configuration.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override the configured architecture: push, pull or central.
    #[arg(long)]
    pub arch: Option<String>,
    /// Override the control socket path.
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// In a cluster (a configuration with `[cluster]`): which node this is.
    #[arg(long)]
    pub node: Option<u32>,
}

/// Arguments of `weft router ctl`.
#[derive(Debug, clap::Args)]
#[command(after_help = ctl::COMMANDS)]
pub struct CtlArgs {
    /// Control socket.
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// The command (listed below).
    #[arg(trailing_var_arg = true, required = true)]
    pub command: Vec<String>,
}

/// Sends one command to a running router's control socket and prints the answer;
/// exits with status 1 when the router answered with an error.
pub fn ctl(c: CtlArgs) -> anyhow::Result<()> {
    let answer = ctl::request(&c.socket, &c.command.join(" "))
        .with_context(|| format!("control socket {}", c.socket.display()))?;
    print!("{answer}");
    if answer.starts_with("error") {
        std::process::exit(1);
    }
    Ok(())
}

/// Runs the router until SIGINT or SIGTERM, or until the data plane stops.
pub fn run(args: Args) -> anyhow::Result<()> {
    let Some(config) = args.config else {
        bail!("weft router needs --config FILE (or a subcommand: see weft router --help)");
    };
    run_router(&config, args.arch.as_deref(), args.socket, args.node)
}

fn run_router(
    path: &Path,
    arch: Option<&str>,
    socket: Option<PathBuf>,
    node: Option<u32>,
) -> anyhow::Result<()> {
    let cfg = Config::load(path)?;
    let plan = ClusterPlan::for_node(&cfg, node).map_err(ConfigError::Cluster)?;
    let arch: Architecture = match arch {
        Some(a) => a.parse().map_err(anyhow::Error::msg)?,
        None => cfg.architecture()?,
    };
    let socket = socket
        .or_else(|| cfg.router.control_socket.clone())
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET));
    // One router per interface and control socket (issue 20): refuse before touching
    // either, so a second instance cannot disturb the first.
    // (In a cluster, only this node's ports.)
    let local = |i: usize| plan.as_ref().is_none_or(|p| p.owns(i));
    let _instance = instance::claim_interfaces(
        cfg.ports
            .iter()
            .enumerate()
            .filter(|&(i, _)| local(i))
            .map(|(_, p)| p.interface.as_str()),
    )?;
    instance::free_control_socket(&socket)?;
    let stop = weft_link::signal::stop_on_termination().context("signal handlers")?;
    let pool = BufferPool::new(32768, 2048);
    // The XDP forwarding fast path (weft_link::xdp_fwd), on the ports that run it (by
    // default every afxdp port in generic mode): one set of maps for every such port;
    // egress may be any kernel interface. Where it was only defaulted, a fast path
    // that cannot be set up leaves the port on the pipeline alone, with a warning;
    // where the config asked for it, that is an error.
    let wants_fast =
        |i: usize, p: &crate::config::PortConfig| local(i) && p.fast_path() != FastPathHook::Off;
    let mut fast = if cfg.ports.iter().enumerate().any(|(i, p)| wants_fast(i, p)) {
        let ifindex = cfg
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| match p.backend() {
                Ok(Backend::AfXdp(_) | Backend::AfPacket(_)) if local(i) => {
                    weft_link::xdp_fwd::interface_index(&p.interface).ok()
                }
                _ => None,
            })
            .collect();
        let explicit = cfg
            .ports
            .iter()
            .enumerate()
            .any(|(i, p)| wants_fast(i, p) && p.xdp_forward_explicit());
        match FastPathSync::new(ifindex) {
            Ok(f) => Some(f),
            Err(e) if !explicit => {
                eprintln!(
                    "weft router: warning: XDP fast path off, its maps could not be created ({e}); \
                     afxdp ports forward through the pipeline alone (xdp_forward = false silences this)"
                );
                None
            }
            Err(e) => return Err(e).context("XDP fast path maps"),
        }
    } else {
        None
    };
    let mut fast_ports = 0;
    let mut links: Vec<Option<Box<dyn Link>>> = Vec::new();
    let mut info = Vec::new();
    for (i, p) in cfg.ports.iter().enumerate() {
        let backend = p.backend()?;
        if !local(i) {
            // Another node's port: never sent on here. A MAC that is only a name, and
            // the interconnect's limit as its frame size: a larger packet gets its
            // ICMP too-big (DF, IPv6) or is fragmented, unfinished, here; the owner
            // applies its port's own MTU after. (Without a limit here a frame larger
            // than an interconnect slot was a counted drop at the interconnect, a
            // path-MTU black hole.)
            info.push((
                [
                    0x02,
                    0xcf,
                    0,
                    0,
                    plan.as_ref().map_or(0, |p| p.owner[i]),
                    i as u8,
                ],
                crate::cluster::fabric::SLOT - crate::cluster::batch::HEADER_LEN,
            ));
            links.push(None);
            continue;
        }
        let with_fast = fast
            .as_ref()
            .filter(|_| p.fast_path() != FastPathHook::Off)
            .map(FastPathSync::fast_path);
        let what = || format!("port {}: interface {} ({backend:?})", p.name, p.interface);
        let l = match backend.open_with_fast_path(&p.interface, pool.clone(), with_fast) {
            Ok(l) => {
                fast_ports += usize::from(with_fast.is_some());
                l
            }
            Err(e) if falls_back(with_fast.is_some(), p.xdp_forward_explicit(), &e) => {
                eprintln!(
                    "weft router: warning: port {}: fast path off ({e}); the port forwards \
                     through the pipeline alone (xdp_forward = false silences this)",
                    p.name
                );
                backend
                    .open_with_fast_path(&p.interface, pool.clone(), None)
                    .with_context(what)?
            }
            Err(e) => return Err(e).with_context(what),
        };
        info.push((l.info().mac, l.info().max_frame));
        links.push(Some(l));
    }
    if fast_ports == 0 {
        // No port runs the fast path: no maps to keep in step.
        fast = None;
    }
    let specs = cfg.port_specs(&info)?;
    let router = match &plan {
        None => Router::new(specs, RouterConfig::default()),
        Some(p) => {
            let remote = (0..cfg.ports.len()).map(|i| !p.owns(i)).collect();
            Router::with_remote_ports(specs, RouterConfig::default(), remote)
        }
    };
    let base = path.parent().unwrap_or(Path::new("."));
    let n = cfg.install_routes(&router, base)?;
    let ctl = ControlServer::start(&socket, Arc::clone(&router))
        .with_context(|| format!("control socket {}", socket.display()))?;
    let defaults = Options::default();
    let opts = Options {
        arch,
        busy_poll: cfg
            .router
            .busy_poll_us
            .map_or(defaults.busy_poll, Duration::from_micros),
        workers: cfg.router.workers.map(std::num::NonZeroUsize::get),
        ..defaults
    };
    let local_ports = (0..cfg.ports.len()).filter(|&i| local(i)).count();
    let workers = crate::dataplane::worker_count(
        opts.workers,
        local_ports,
        crate::dataplane::available_cpus(),
    );
    let dp = match plan {
        None => Dataplane::start(
            Arc::clone(&router),
            links.into_iter().flatten().collect(),
            opts,
        )?,
        Some(plan) => {
            let fabric = VerbsFabric::start(&plan, &pool).with_context(|| {
                format!(
                    "interconnect of node {} ({:?} at {:?})",
                    plan.me,
                    plan.interconnect,
                    plan.address(plan.me)
                )
            })?;
            eprintln!(
                "weft router: node {} of {}, interconnect {:?}, batch {}, balance {:?}",
                plan.me,
                plan.nodes.len(),
                plan.interconnect,
                plan.batch,
                plan.balance
            );
            let ic = Interconnect::new(Box::new(fabric), plan, pool.clone());
            Dataplane::start_cluster(Arc::clone(&router), links, ic, opts)?
        }
    };
    eprintln!(
        "weft router: {} ports, {n} configured routes, architecture {arch}, {} port workers, control socket {}",
        cfg.ports.len(),
        workers,
        socket.display()
    );
    let mut fast_error = false;
    // The maps are rebuilt from the FIB and the neighbours when either changed, and
    // at least every FAST_PATH_RESYNC (neighbour states also age with time); a
    // full-table FIB is not copied 20 times a second.
    let mut synced: Option<((u64, u64), std::time::Instant)> = None;
    while !stop.load(Ordering::SeqCst) && dp.is_running() {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(f) = fast.as_mut() {
            let now = std::time::Instant::now();
            let gens = (router.route_generation(), router.neighbor_generation());
            let due = synced
                .is_none_or(|(g, at)| g != gens || now.duration_since(at) >= FAST_PATH_RESYNC);
            let r = if due {
                f.sync(&router, now).map(|_| synced = Some((gens, now)))
            } else {
                Ok(())
            }
            .and_then(|_| f.counters());
            match r {
                Ok(rows) => router.publish_fast_path_counters(rows),
                Err(e) if !fast_error => {
                    fast_error = true;
                    eprintln!("weft router: XDP fast path maps: {e} (reported once)");
                }
                Err(_) => {}
            }
        }
    }
    let result = dp.stop();
    drop(ctl);
    eprintln!("weft router: stopped; counters:");
    for (c, v) in router.counters() {
        if v != 0 {
            eprintln!("  {} {v}", c.name());
        }
    }
    for (name, v) in fast
        .as_ref()
        .and_then(|f| f.counters().ok())
        .unwrap_or_default()
    {
        if v != 0 {
            eprintln!("  {name} {v}");
        }
    }
    result.context("data plane")
}

/// Whether a port whose open failed with `e` is opened again without the fast path:
/// only when it was given one (`with_fast`) that the config did not ask for
/// (`explicit`), and only when the failure is the fast path's own
/// ([`FastPathUnavailable`]: its program refused or not attachable). Anything else —
/// a missing interface, no rings, no socket — is the port's error either way.
fn falls_back(with_fast: bool, explicit: bool, e: &std::io::Error) -> bool {
    with_fast && !explicit && FastPathUnavailable::is(e)
}

#[cfg(test)]
mod fallback_tests {
    use super::falls_back;
    use std::io;
    use weft_link::xdp_fwd::FastPathUnavailable;

    #[test]
    fn only_a_defaulted_fast_path_that_failed_itself_falls_back() {
        let refused = || {
            FastPathUnavailable::wrap(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "bpf(BPF_PROG_LOAD, XDP): verifier said no",
            ))
        };
        let missing = || io::Error::new(io::ErrorKind::NotFound, "if_nametoindex: no such device");
        assert!(falls_back(true, false, &refused()));
        // Asked for in the config: the failure is an error.
        assert!(!falls_back(true, true, &refused()));
        // Any other open error is the port's, not the fast path's.
        assert!(!falls_back(true, false, &missing()));
        assert!(!falls_back(true, false, &io::Error::other("no rings")));
        // No fast path given: nothing to fall back from.
        assert!(!falls_back(false, false, &refused()));
        // The kind is kept for callers that look at it.
        assert_eq!(refused().kind(), io::ErrorKind::PermissionDenied);
    }
}

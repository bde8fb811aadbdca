//! `weft exec`: run a program on weft's libibverbs.

use crate::package;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

/// Run an unmodified RDMA program (one linked against libibverbs) on weft: its
/// `libibverbs.so.1` becomes weft's, whose one device `weft0` runs over a udp or shm
/// link. Example: `weft exec -- ibv_rc_pingpong -g 0` on one side,
/// `weft exec -- ibv_rc_pingpong -g 0 127.0.0.1` on the other.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The link the device runs on: `udp` (RoCEv2 over kernel UDP sockets) or `shm`
    /// (shared-memory rings; both ends on this host).
    #[arg(long, default_value = "udp", value_parser = ["udp", "shm"])]
    pub link: String,
    /// The IP address the device binds (UDP port 4791). Default: a loopback address of
    /// the process's own (127.a.b.c), so two programs on one host each own port 4791.
    #[arg(long)]
    pub addr: Option<std::net::IpAddr>,
    /// Accept a received ICRC computed for any IPv4 identification (udp link; off by
    /// default): needed to hear Linux's rdma_rxe, which numbers its IPv4 packets while
    /// a UDP socket cannot see that number. A corrupted packet then passes the ICRC
    /// check with probability 2^-16 instead of 2^-32. Sets
    /// `WEFT_IBVERBS_ICRC_ANY_IPV4_ID=1` for the library (without it, `weft exec`
    /// unsets that variable: the opt-in is this flag, never an inherited setting).
    #[arg(long)]
    pub icrc_any_ipv4_id: bool,
    /// Create `/dev/infiniband/uverbs-weft0` (a symbolic link to `/dev/null`) if it is
    /// missing; needs root. UCX uses a device only if that file is an accessible
    /// character device: with this, `UCX_TLS=rc_verbs,ud_verbs` runs over weft0.
    #[arg(long)]
    pub dev_node: bool,
    /// The directory holding weft's libibverbs.so.1 (default: linked beside this
    /// `weft` binary, from the libweft_ibverbs.a cargo built with it).
    #[arg(long)]
    pub lib_dir: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub program: Vec<OsString>,
}

/// Replace this process with the program (returns only on failure).
pub fn run(args: Args) -> std::io::Result<()> {
    if args.dev_node {
        crate::ensure_dev_node()?;
    }
    let dir = match args.lib_dir {
        Some(d) => d,
        None => {
            let exe = std::env::current_exe()?;
            let profile = package::profile_dir_of(&exe).ok_or_else(|| {
                std::io::Error::other(format!("no cargo profile directory for {}", exe.display()))
            })?;
            package::ensure_beside(&profile)?
        }
    };
    let mut path = OsString::from(&dir);
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|o| !o.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let (prog, rest) = args
        .program
        .split_first()
        .ok_or_else(|| std::io::Error::other("no program given"))?;
    let mut cmd = std::process::Command::new(prog);
    cmd.args(rest)
        .env("LD_LIBRARY_PATH", path)
        .env(crate::ENV_LINK, &args.link);
    match args.addr {
        Some(a) => cmd.env(crate::ENV_ADDR, a.to_string()),
        None => cmd.env_remove(crate::ENV_ADDR),
    };
    if args.icrc_any_ipv4_id {
        cmd.env(crate::ENV_ICRC_ANY_IPV4_ID, "1");
    } else {
        cmd.env_remove(crate::ENV_ICRC_ANY_IPV4_ID);
    }
    let e = cmd.exec();
    Err(std::io::Error::new(
        e.kind(),
        format!("cannot run {}: {e}", prog.to_string_lossy()),
    ))
}

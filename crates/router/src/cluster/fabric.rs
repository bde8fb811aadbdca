//! The interconnect's transport: a [`Fabric`] moves batch messages between nodes.
//! [`VerbsFabric`] is the real one — weft-verbs UC (or RC) queue pairs, one per pair
//! of nodes, SEND/RECV, the batch gathered with one SGE per packet.
//!
//! **Zero-copy gather.** The node's packet pool (weft-link's [`BufferPool`], every
//! buffer a slot of one arena) is registered once, when the fabric starts
//! ([`ProtectionDomain::register_pool`]: safe; the registration keeps the arena
//! alive and grants the engine no write access). The interconnect thread puts each
//! packet's 12-byte header in the buffer's headroom ([`prepend_header`]), so header
//! and frame are one run of the arena, and [`Fabric::send`] takes the buffers
//! themselves: one SGE per buffer, straight at its bytes, no copy. The fabric parks
//! the buffers of each message in flight (by work-request id) until the SEND's
//! completion — UC: the message left; RC: the peer acknowledged it — and then gives
//! them back to the pool in one burst. A peer that goes down with messages in flight
//! is removed: its queue pair is destroyed first (`QueuePair::drop` takes it out of
//! the engine under the engine lock, so no gather of it runs after), then its parked
//! buffers drop back to the pool — no leak, and no buffer back in the pool (where a
//! port thread would write it) while the engine may still read it.
//!
//! A buffer that is not from the registered pool (a test's, another pool's) is
//! copied into one that is — the only copy left on the send side, counted per
//! message ([`SendReport::copied`], `tx_copied` in `show interconnect`); with the
//! registered pool exhausted such a packet is a counted drop. The daemon's ports all
//! receive into the registered pool, so the copy does not happen on its path.
//!
//! Received messages are still copied out of the receive region, and each frame
//! into a packet buffer (docs/cluster.md, "Not done").
//!
//! Connections come and go while the router runs: a background thread accepts the
//! nodes with higher ids, another connects to the nodes with lower ids (and again
//! after such a connection dies); both hand finished peers to the interconnect
//! thread over a channel. A peer whose queue pair fails (its connection manager
//! link closed: the node stopped or died) is down until it is connected again;
//! packets for it are counted drops.
#![forbid(unsafe_code)]

pub use super::batch::prepend_header;
use super::config::{ClusterPlan, Interconnect, Transport};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;
use weft_link::{BufferPool, PacketBuf};
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, Completion, CompletionQueue, Context, DeviceConfig, LinkKind, MemoryRegion, Mtu,
    PoolRegion, ProtectionDomain, QpInitAttr, QpType, QueuePair, RecvWr, SendWr, SgList, WcStatus,
    WrOp,
};

/// Why a message was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FabricError {
    /// No connection to the peer.
    PeerDown,
    /// Every send slot to the peer is in flight.
    Full,
}

/// What became of the packets of one message [`Fabric::send`] accepted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SendReport {
    /// Packets in the message.
    pub sent: usize,
    /// Bytes in the message (headers included).
    pub bytes: usize,
    /// Of `sent`, packets copied first because their buffer was not registered memory.
    pub copied: usize,
    /// Packets left out: not registered and no registered buffer to copy them into,
    /// longer than a slot, empty, or past the batch.
    pub dropped: usize,
}

/// Moves batch messages between cluster nodes.
pub trait Fabric: Send {
    /// True while `peer` is connected.
    fn is_up(&self, peer: u8) -> bool;
    /// Messages sent to `peer` and not yet completed.
    fn in_flight(&self, peer: u8) -> usize;
    /// Most messages in flight per peer.
    fn depth(&self) -> usize;
    /// Most bytes of one packet in a message (header and frame).
    fn slot_size(&self) -> usize;
    /// Send one message to `peer`: the packets in order, each buffer holding the
    /// packet's header and frame ([`prepend_header`]). The fabric takes every buffer
    /// out of `packets` whatever the result (the vector is left empty, its capacity
    /// kept): it holds them until the message's send completed, then they go back to
    /// their pool; on an error they go back at once.
    fn send(&mut self, peer: u8, packets: &mut Vec<PacketBuf>) -> Result<SendReport, FabricError>;
    /// Append received messages (peer, bytes) to `out`; returns how many. Also
    /// retires completed sends (their buffers go back to the pool).
    fn poll(&mut self, out: &mut Vec<(u8, Vec<u8>)>) -> usize;
    /// Give a message's buffer back for reuse.
    fn recycle(&mut self, buf: Vec<u8>) {
        drop(buf);
    }
}

/// Most bytes of one packet in a message: a 12-byte header and frames up to 2036
/// bytes (what a receive slot holds per packet).
pub const SLOT: usize = 2048;
/// Messages in flight per peer.
pub const SEND_DEPTH: usize = 64;
/// Receives posted per peer.
pub const RECV_DEPTH: usize = 64;
/// RoCEv2's UDP port: each node's device listens there on its address.
pub const ROCE_PORT: u16 = 4791;

/// One connected peer. Field order is drop order: the queue pair goes (out of the
/// engine) before the buffers it may still gather from go back to the pool.
struct Peer {
    qp: QueuePair,
    /// The buffers of each message in flight, at `wr_id % SEND_DEPTH`.
    parked: Vec<Vec<PacketBuf>>,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    recv_mr: MemoryRegion,
    /// Work-request id of the next message.
    next: u64,
    in_flight: usize,
    _conn: cm::Connection,
}

/// What a peer is made of before it is connected.
struct Parts {
    qp: QueuePair,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    recv_mr: MemoryRegion,
}

/// Settings the background threads share.
#[derive(Clone)]
struct Setup {
    /// One protection domain for every peer: the pool's registration is in it.
    pd: ProtectionDomain,
    qp_type: QpType,
    batch: usize,
    param: ConnParam,
}

impl Setup {
    fn msg_size(&self) -> usize {
        self.batch * SLOT
    }

    fn parts(&self) -> Result<Parts, weft_verbs::Error> {
        let ctx = self.pd.context();
        let send_cq = CompletionQueue::new(ctx, SEND_DEPTH * 2, None);
        let recv_cq = CompletionQueue::new(ctx, RECV_DEPTH * 2, None);
        let attr = QpInitAttr {
            max_send_wr: SEND_DEPTH,
            max_recv_wr: RECV_DEPTH,
            ..QpInitAttr::new(self.qp_type)
        };
        let qp = self.pd.create_qp(&send_cq, &recv_cq, None, attr)?;
        let recv_mr = self
            .pd
            .alloc_mr(RECV_DEPTH * self.msg_size(), Access::LOCAL_WRITE);
        Ok(Parts {
            qp,
            send_cq,
            recv_cq,
            recv_mr,
        })
    }

    /// A connected peer: its receives posted.
    fn finish(&self, mut p: Parts, conn: cm::Connection) -> Result<Peer, weft_verbs::Error> {
        let m = self.msg_size();
        let wrs: Vec<RecvWr> = (0..RECV_DEPTH)
            .map(|i| RecvWr::new(i as u64, p.recv_mr.sge(i * m, m as u32)))
            .collect();
        p.qp.post_recv(wrs)?;
        Ok(Peer {
            qp: p.qp,
            parked: (0..SEND_DEPTH)
                .map(|_| Vec::with_capacity(self.batch))
                .collect(),
            send_cq: p.send_cq,
            recv_cq: p.recv_cq,
            recv_mr: p.recv_mr,
            next: 0,
            in_flight: 0,
            _conn: conn,
        })
    }
}

/// The weft-verbs interconnect of one node.
pub struct VerbsFabric {
    me: u8,
    // Before `region`: peers' queue pairs go before the pool's registration.
    peers: HashMap<u8, Peer>,
    /// The node's packet pool, registered: what SGEs point into.
    region: PoolRegion,
    incoming: Receiver<(u8, Peer)>,
    /// Lower-id peers the connector should (re)connect to.
    wanted: Arc<Mutex<HashSet<u8>>>,
    setup: Setup,
    spare: Vec<Vec<u8>>,
    completions: Vec<Completion>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for VerbsFabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsFabric")
            .field("me", &self.me)
            .field("peers", &self.peers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Drop for VerbsFabric {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl VerbsFabric {
    /// Open this node's device on its interconnect address (RoCEv2's port 4791),
    /// register `pool` (the node's packet buffers: what is sent without a copy),
    /// listen for the connection manager on `cm_port`, and start connecting to the
    /// other nodes in the background. Returns once the device and listener are up;
    /// peers become usable as they connect.
    pub fn start(plan: &ClusterPlan, pool: &BufferPool) -> Result<VerbsFabric, weft_verbs::Error> {
        let me = plan.me;
        let my_addr = plan.address(me).ok_or(weft_verbs::Error::Timeout)?;
        let link = match plan.interconnect {
            Interconnect::Udp => LinkKind::Udp,
            Interconnect::Shm => LinkKind::Shm,
        };
        let ctx = Context::open_with(DeviceConfig::new(link, SocketAddr::new(my_addr, ROCE_PORT)))?;
        let listener = Listener::bind(&ctx, SocketAddr::new(my_addr, plan.cm_port))?;
        let param = ConnParam {
            // Over udp a path MTU that fits an Ethernet MTU of 1500 with the IP, UDP,
            // BTH and ICRC headers: no IP fragmentation on the interconnect.
            path_mtu: match link {
                LinkKind::Udp => Mtu::M1024,
                _ => Mtu::M4096,
            },
            private_data: vec![me],
            handshake_timeout: Duration::from_secs(2),
            ..ConnParam::default()
        };
        let pd = ctx.alloc_pd();
        let region = pd.register_pool(pool);
        let setup = Setup {
            pd,
            qp_type: match plan.transport {
                Transport::Uc => QpType::Uc,
                Transport::Rc => QpType::Rc,
            },
            batch: plan.batch,
            param,
        };
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let higher: HashSet<u8> = plan.peers().filter(|&p| p > me).collect();
        let lower: HashSet<u8> = plan.peers().filter(|&p| p < me).collect();
        let wanted = Arc::new(Mutex::new(lower));
        let mut threads = Vec::new();
        {
            let (setup, tx, stop) = (setup.clone(), tx.clone(), Arc::clone(&stop));
            threads.push(
                std::thread::Builder::new()
                    .name("weft-cluster-accept".into())
                    .spawn(move || accept_loop(listener, &setup, &higher, &tx, &stop))
                    .map_err(weft_verbs::Error::Link)?,
            );
        }
        {
            let (setup, stop, wanted) = (setup.clone(), Arc::clone(&stop), Arc::clone(&wanted));
            let addrs: HashMap<u8, SocketAddr> = plan
                .nodes
                .iter()
                .map(|&(id, a)| (id, SocketAddr::new(a, plan.cm_port)))
                .collect();
            threads.push(
                std::thread::Builder::new()
                    .name("weft-cluster-connect".into())
                    .spawn(move || connect_loop(&setup, &addrs, &wanted, &tx, &stop))
                    .map_err(weft_verbs::Error::Link)?,
            );
        }
        Ok(VerbsFabric {
            me,
            peers: HashMap::new(),
            region,
            incoming: rx,
            wanted,
            setup,
            spare: Vec::new(),
            completions: Vec::with_capacity(64),
            stop,
            threads,
        })
    }

    /// Take peers the background threads connected (a new connection replaces an
    /// old one; dropping the old one releases its parked buffers).
    fn adopt(&mut self) {
        while let Ok((id, p)) = self.incoming.try_recv() {
            self.peers.insert(id, p);
        }
    }

    /// The peer is gone: destroy its queue pair, then give its parked buffers back
    /// (the field order of [`Peer`]); a lower-id peer is connected again.
    fn down(&mut self, id: u8) {
        if let Some(p) = self.peers.remove(&id) {
            drop(p);
            eprintln!("weft router: interconnect to node {id} is down");
            if id < self.me {
                lock(&self.wanted).insert(id);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn accept_loop(
    listener: Listener,
    setup: &Setup,
    higher: &HashSet<u8>,
    tx: &Sender<(u8, Peer)>,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Acquire) {
        let req = match listener.get_request(Duration::from_millis(200)) {
            Ok(r) => r,
            Err(weft_verbs::Error::Timeout) => continue,
            Err(e) => {
                eprintln!("weft router: interconnect: a connection request failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let id = match req.peer().private_data.as_slice() {
            [id] if higher.contains(id) => *id,
            _ => {
                req.reject("not a node of this cluster that connects to this one");
                continue;
            }
        };
        let r = setup.parts().and_then(|mut parts| {
            let conn = req.accept(&mut parts.qp, &setup.param)?;
            setup.finish(parts, conn)
        });
        match r {
            Ok(p) => {
                eprintln!("weft router: interconnect to node {id} is up");
                if tx.send((id, p)).is_err() {
                    return;
                }
            }
            Err(e) => eprintln!("weft router: interconnect: node {id} failed to connect: {e}"),
        }
    }
}

fn connect_loop(
    setup: &Setup,
    addrs: &HashMap<u8, SocketAddr>,
    wanted: &Mutex<HashSet<u8>>,
    tx: &Sender<(u8, Peer)>,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Acquire) {
        let todo: Vec<u8> = lock(wanted).iter().copied().collect();
        for id in todo {
            let Some(&at) = addrs.get(&id) else { continue };
            let r = setup.parts().and_then(|mut parts| {
                let conn = cm::connect(&mut parts.qp, at, &setup.param)?;
                setup.finish(parts, conn)
            });
            if let Ok(p) = r {
                eprintln!("weft router: interconnect to node {id} is up");
                lock(wanted).remove(&id);
                if tx.send((id, p)).is_err() {
                    return;
                }
            }
        }
        // Each attempt registers a peer's memory afresh: not too often.
        let pause = if lock(wanted).is_empty() { 100 } else { 500 };
        std::thread::sleep(Duration::from_millis(pause));
    }
}

impl Fabric for VerbsFabric {
    fn is_up(&self, peer: u8) -> bool {
        self.peers.contains_key(&peer)
    }

    fn in_flight(&self, peer: u8) -> usize {
        self.peers.get(&peer).map_or(0, |p| p.in_flight)
    }

    fn depth(&self) -> usize {
        SEND_DEPTH
    }

    fn slot_size(&self) -> usize {
        SLOT
    }

    fn send(&mut self, peer: u8, packets: &mut Vec<PacketBuf>) -> Result<SendReport, FabricError> {
        self.adopt();
        let Some(p) = self.peers.get_mut(&peer) else {
            packets.clear();
            return Err(FabricError::PeerDown);
        };
        let group = (p.next % SEND_DEPTH as u64) as usize;
        if p.in_flight >= SEND_DEPTH || !p.parked[group].is_empty() {
            if !reap_sends(p, &mut self.completions, &self.region) {
                packets.clear();
                self.down(peer);
                return Err(FabricError::PeerDown);
            }
            // Completions arrive in order, so the oldest group is free once fewer
            // than SEND_DEPTH are in flight; never reuse one still parked.
            if p.in_flight >= SEND_DEPTH || !p.parked[group].is_empty() {
                packets.clear();
                return Err(FabricError::Full);
            }
        }
        let parked = &mut p.parked[group];
        let mut sges = SgList::new();
        let mut r = SendReport::default();
        for buf in packets.drain(..) {
            if parked.len() >= self.setup.batch || buf.is_empty() || buf.len() > SLOT {
                r.dropped += 1;
                continue;
            }
            let buf = if self.region.covers(&buf) {
                buf
            } else {
                // Not registered memory: copy it into a buffer that is.
                let Some(mut c) = self.region.pool().alloc() else {
                    r.dropped += 1;
                    continue;
                };
                // From the buffer's first byte: its headroom is not needed any more.
                let front = c.headroom();
                if !(c.prepend(front) && c.copy_from(&buf)) {
                    r.dropped += 1;
                    continue;
                }
                r.copied += 1;
                c
            };
            let Some(sge) = self.region.sge(&buf) else {
                r.dropped += 1;
                continue;
            };
            sges.push(sge);
            r.bytes += buf.len();
            parked.push(buf);
        }
        r.sent = parked.len();
        if r.sent == 0 {
            return Ok(r);
        }
        let wr = SendWr::new(p.next, WrOp::Send { imm: None }, sges);
        match p.qp.post_send([wr]) {
            Ok(()) => {
                p.next = p.next.wrapping_add(1);
                p.in_flight += 1;
                Ok(r)
            }
            Err(_) => {
                // Not posted: the engine never saw these entries.
                parked.clear();
                self.down(peer);
                Err(FabricError::PeerDown)
            }
        }
    }

    fn poll(&mut self, out: &mut Vec<(u8, Vec<u8>)>) -> usize {
        self.adopt();
        let m = self.setup.msg_size();
        let mut got = 0;
        let mut failed = Vec::new();
        for (&id, p) in &mut self.peers {
            if !reap_sends(p, &mut self.completions, &self.region) {
                failed.push(id);
                continue;
            }
            self.completions.clear();
            p.recv_cq.poll(&mut self.completions, RECV_DEPTH);
            let mut repost = Vec::new();
            for c in self.completions.drain(..) {
                if c.status != WcStatus::Success {
                    failed.push(id);
                    break;
                }
                let i = (c.wr_id as usize) % RECV_DEPTH;
                let len = (c.byte_len as usize).min(m);
                let mut buf = self.spare.pop().unwrap_or_default();
                buf.resize(len, 0);
                if p.recv_mr.read(i * m, &mut buf).is_ok() {
                    out.push((id, buf));
                    got += 1;
                }
                repost.push(RecvWr::new(i as u64, p.recv_mr.sge(i * m, m as u32)));
            }
            if !repost.is_empty() && p.qp.post_recv(repost).is_err() {
                failed.push(id);
            }
        }
        for id in failed {
            self.down(id);
        }
        got
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        if self.spare.len() < 256 {
            self.spare.push(buf);
        }
    }
}

/// Retire completed sends: each one's parked buffers go back to the pool, under one
/// lock. False when one failed (the peer is gone; its other buffers are released
/// with the peer, after its queue pair).
fn reap_sends(p: &mut Peer, scratch: &mut Vec<Completion>, region: &PoolRegion) -> bool {
    scratch.clear();
    p.send_cq.poll(scratch, SEND_DEPTH);
    let mut ok = true;
    for c in scratch.drain(..) {
        if c.status != WcStatus::Success {
            // A failed send may be followed by flushed ones the engine no longer
            // gathers, but the peer is torn down anyway: leave its buffers parked
            // until its queue pair is destroyed.
            ok = false;
            continue;
        }
        p.in_flight = p.in_flight.saturating_sub(1);
        let group = (c.wr_id % SEND_DEPTH as u64) as usize;
        if let Some(bufs) = p.parked.get_mut(group) {
            region.pool().free_burst(bufs.drain(..));
        }
    }
    ok
}

/// An in-process fabric for tests: every node's messages go through channels, as
/// contiguous copies (the buffers go back to their pool at once), and a node can be
/// cut off.
#[cfg(test)]
pub(crate) mod mem {
    use super::*;

    /// One node's end.
    pub struct MemFabric {
        pub me: u8,
        pub rx: Receiver<(u8, Vec<u8>)>,
        pub tx: HashMap<u8, Sender<(u8, Vec<u8>)>>,
        pub dead: Arc<Mutex<HashSet<u8>>>,
        pub sent: Arc<Mutex<Vec<(u8, u8, usize)>>>,
    }

    /// A fabric joining `ids`; `dead` holds the nodes cut off; `sent` records
    /// (from, to, packets) per message.
    #[allow(clippy::type_complexity)]
    pub fn fabric(
        ids: &[u8],
    ) -> (
        Vec<MemFabric>,
        Arc<Mutex<HashSet<u8>>>,
        Arc<Mutex<Vec<(u8, u8, usize)>>>,
    ) {
        let dead = Arc::new(Mutex::new(HashSet::new()));
        let sent = Arc::new(Mutex::new(Vec::new()));
        let chans: Vec<_> = ids.iter().map(|_| mpsc::channel()).collect();
        let txs: HashMap<u8, Sender<(u8, Vec<u8>)>> = ids
            .iter()
            .zip(&chans)
            .map(|(&id, (t, _))| (id, t.clone()))
            .collect();
        let nodes = ids
            .iter()
            .zip(chans)
            .map(|(&id, (_, rx))| MemFabric {
                me: id,
                rx,
                tx: txs.clone(),
                dead: Arc::clone(&dead),
                sent: Arc::clone(&sent),
            })
            .collect();
        (nodes, dead, sent)
    }

    impl Fabric for MemFabric {
        fn is_up(&self, peer: u8) -> bool {
            !lock(&self.dead).contains(&peer)
        }
        fn in_flight(&self, _peer: u8) -> usize {
            0
        }
        fn depth(&self) -> usize {
            SEND_DEPTH
        }
        fn slot_size(&self) -> usize {
            SLOT
        }
        fn send(
            &mut self,
            peer: u8,
            packets: &mut Vec<PacketBuf>,
        ) -> Result<SendReport, FabricError> {
            if !self.is_up(peer) || lock(&self.dead).contains(&self.me) {
                packets.clear();
                return Err(FabricError::PeerDown);
            }
            let mut m = Vec::new();
            for b in packets.iter() {
                m.extend_from_slice(b);
            }
            let r = SendReport {
                sent: packets.len(),
                bytes: m.len(),
                ..SendReport::default()
            };
            packets.clear();
            lock(&self.sent).push((self.me, peer, r.sent));
            let tx = self.tx.get(&peer).ok_or(FabricError::PeerDown)?;
            tx.send((self.me, m)).map_err(|_| FabricError::PeerDown)?;
            Ok(r)
        }
        fn poll(&mut self, out: &mut Vec<(u8, Vec<u8>)>) -> usize {
            let mut n = 0;
            while let Ok(m) = self.rx.try_recv() {
                if lock(&self.dead).contains(&self.me) {
                    continue;
                }
                out.push(m);
                n += 1;
            }
            n
        }
    }
}

/// The real fabric, two nodes in this process on loopback addresses of their own.
#[cfg(test)]
mod tests {
    use super::super::batch::{split, PacketHeader};
    use super::super::config::Balance;
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::atomic::AtomicU8;
    use std::time::Instant;

    /// Node addresses 127.78.P.(2k+1), 127.78.P.(2k+2): P from the process id, k
    /// counted per pair, so pairs in tests running in parallel (and other processes'
    /// tests) do not share a device address.
    fn plan(
        me: u8,
        k: u8,
        cm_port: u16,
        interconnect: Interconnect,
        transport: Transport,
        batch: usize,
    ) -> ClusterPlan {
        let net = (std::process::id() % 250) as u8;
        ClusterPlan {
            me,
            nodes: (1..=2u8)
                .map(|i| (i, IpAddr::V4(Ipv4Addr::new(127, 78, net, 2 * k + i))))
                .collect(),
            owner: vec![1, 2],
            interconnect,
            batch,
            balance: Balance::Direct,
            transport,
            delay: Duration::from_micros(50),
            cm_port,
        }
    }

    /// Nodes 1 and 2, connected (each has adopted the other), or a panic after 10 s.
    fn pair(
        interconnect: Interconnect,
        transport: Transport,
        batch: usize,
        pools: [&BufferPool; 2],
    ) -> (VerbsFabric, VerbsFabric) {
        static NEXT: AtomicU8 = AtomicU8::new(0);
        let k = NEXT.fetch_add(1, Ordering::Relaxed) % 120;
        let cm_port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let p = |me| plan(me, k, cm_port, interconnect, transport, batch);
        let mut a = VerbsFabric::start(&p(1), pools[0]).expect("node 1 starts");
        let mut b = VerbsFabric::start(&p(2), pools[1]).expect("node 2 starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut sink = Vec::new();
        while !(a.is_up(2) && b.is_up(1)) {
            assert!(
                Instant::now() < deadline,
                "the two nodes did not connect in 10 s"
            );
            a.poll(&mut sink);
            b.poll(&mut sink);
            std::thread::sleep(Duration::from_millis(5));
        }
        (a, b)
    }

    /// A packet of `len` bytes whose bytes say which message and packet it is, in a
    /// buffer of `pool`, its header prepended; and the bytes expected on the wire.
    fn packet(pool: &BufferPool, msg: usize, k: usize, len: usize) -> (PacketBuf, Vec<u8>) {
        let frame: Vec<u8> = (0..len).map(|j| (msg * 31 + k * 7 + j) as u8).collect();
        let h = PacketHeader {
            hops: 0,
            len: len as u16,
            ingress_port: k as u16,
            origin: 1,
            bucket: msg as u16,
            seq: k as u16,
        };
        let mut b = pool.alloc().expect("a free buffer");
        assert!(b.copy_from(&frame));
        assert!(prepend_header(&mut b, &h));
        let mut wire = h.encode().to_vec();
        wire.extend_from_slice(&frame);
        (b, wire)
    }

    /// Poll `f` until a message arrives (10 s at most).
    fn receive_one(f: &mut VerbsFabric) -> (u8, Vec<u8>) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        while got.is_empty() {
            assert!(Instant::now() < deadline, "no message in 10 s");
            f.poll(&mut got);
        }
        assert_eq!(got.len(), 1, "one message at a time");
        got.remove(0)
    }

    /// Poll `f` until nothing is in flight to `peer` (10 s at most).
    fn drain(f: &mut VerbsFabric, peer: u8) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut sink = Vec::new();
        while f.in_flight(peer) > 0 {
            assert!(Instant::now() < deadline, "sends not completed in 10 s");
            f.poll(&mut sink);
        }
    }

    /// Every packet of every batch arrives as its header and frame, byte for byte,
    /// gathered from the pool in place (no copy); a buffer of another pool is copied
    /// and arrives the same; every buffer is back in its pool once the sends
    /// completed.
    #[test]
    fn a_batch_arrives_as_header_and_frame_per_packet_and_the_buffers_come_back() {
        for kind in [Interconnect::Shm, Interconnect::Udp] {
            let (pa, pb) = (BufferPool::new(512, 2048), BufferPool::new(512, 2048));
            let foreign = BufferPool::new(64, 2048);
            let (mut a, mut b) = pair(kind, Transport::Uc, 8, [&pa, &pb]);
            let (start, foreign_start) = (pa.available(), foreign.available());
            // A seeded stream of sizes: 14 bytes up to the most a pool buffer holds
            // behind its headroom, and the extremes.
            let most = 2048 - weft_link::pool::DEFAULT_HEADROOM;
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            let (mut copied, mut packets, mut reported) = (0, 0, 0);
            for msg in 0..24usize {
                let n = 1 + msg % 8;
                let mut bufs = Vec::new();
                let mut wire = Vec::new();
                for k in 0..n {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let len = match (msg + k) % 11 {
                        0 => 14,
                        1 => most,
                        _ => 14 + (x % (most - 14) as u64) as usize,
                    };
                    // Every fifth packet from a pool the fabric did not register.
                    let from = if (msg * 8 + k) % 5 == 0 {
                        &foreign
                    } else {
                        &pa
                    };
                    let (buf, w) = packet(from, msg, k, len);
                    bufs.push(buf);
                    wire.extend_from_slice(&w);
                    copied += usize::from((msg * 8 + k) % 5 == 0);
                }
                packets += n;
                let r = a.send(2, &mut bufs).expect("sent");
                assert!(bufs.is_empty(), "the fabric took the buffers");
                assert_eq!((r.sent, r.bytes, r.dropped), (n, wire.len(), 0), "{kind:?}");
                reported += r.copied;
                assert!(
                    pa.available() + n <= start,
                    "{kind:?}: the buffers stay out of the pool until the send completes"
                );
                let (from, got) = receive_one(&mut b);
                assert_eq!(from, 1);
                assert_eq!(got.len(), wire.len(), "{kind:?} message {msg}");
                assert!(got == wire, "{kind:?} message {msg}: bytes differ");
                let split: Vec<_> = split(&got).collect::<Result<_, _>>().expect("splits");
                assert_eq!(split.len(), n);
                b.recycle(got);
            }
            assert!(copied > 0 && copied < packets);
            assert_eq!(
                reported, copied,
                "{kind:?}: exactly the foreign buffers were copied"
            );
            drain(&mut a, 2);
            assert_eq!(pa.available(), start, "{kind:?}: every buffer came back");
            assert_eq!(
                foreign.available(),
                foreign_start,
                "{kind:?}: copied ones too"
            );
            // With the registered pool exhausted, a foreign buffer cannot be copied:
            // a counted drop, and nothing is posted.
            let mut all = Vec::new();
            pa.alloc_burst(pa.capacity(), &mut all);
            let (buf, _) = packet(&foreign, 99, 0, 100);
            let r = a.send(2, &mut vec![buf]).expect("accepted");
            assert_eq!((r.sent, r.dropped), (0, 1));
            assert_eq!(a.in_flight(2), 0);
            drop(all);
            drop((a, b));
            assert_eq!(pa.available(), start);
            assert_eq!(foreign.available(), foreign_start);
        }
    }

    /// The peer goes away with messages in flight (RC: never acknowledged; UC:
    /// completed but not yet retired): once the fabric sees it down, the parked
    /// buffers are back in the pool, and later sends are counted drops.
    #[test]
    fn a_peer_gone_with_sends_in_flight_gives_every_buffer_back() {
        for (kind, transport) in [
            (Interconnect::Shm, Transport::Rc),
            (Interconnect::Udp, Transport::Rc),
            (Interconnect::Shm, Transport::Uc),
        ] {
            let (pa, pb) = (BufferPool::new(512, 2048), BufferPool::new(512, 2048));
            let (mut a, b) = pair(kind, transport, 4, [&pa, &pb]);
            let start = pa.available();
            drop(b);
            let mut sent = 0;
            for msg in 0..16 {
                let mut bufs: Vec<PacketBuf> = (0..4).map(|k| packet(&pa, msg, k, 200).0).collect();
                match a.send(2, &mut bufs) {
                    Ok(r) => sent += r.sent,
                    Err(e) => assert_eq!(e, FabricError::PeerDown),
                }
                assert!(bufs.is_empty());
            }
            // Nothing retired them yet (the fabric reaps when it polls, or when a
            // send finds every slot taken): the buffers of every message posted are
            // parked when the peer is found gone.
            assert!(sent > 0, "{kind:?} {transport:?}: nothing was posted");
            assert_eq!(pa.available() + sent, start, "{kind:?} {transport:?}");
            let deadline = Instant::now() + Duration::from_secs(15);
            let mut sink = Vec::new();
            while a.is_up(2) {
                assert!(
                    Instant::now() < deadline,
                    "{kind:?} {transport:?}: the dead peer was not noticed in 15 s"
                );
                a.poll(&mut sink);
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_eq!(
                pa.available(),
                start,
                "{kind:?} {transport:?}: {sent} packets were posted; all came back"
            );
            let mut bufs = vec![packet(&pa, 0, 0, 100).0];
            assert_eq!(a.send(2, &mut bufs), Err(FabricError::PeerDown));
            assert_eq!(pa.available(), start);
        }
    }
}

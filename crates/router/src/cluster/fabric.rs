//! The interconnect's transport: a [`Fabric`] moves batch messages between nodes.
//! [`VerbsFabric`] is the real one — weft-verbs UC (or RC) queue pairs, one per pair
//! of nodes, SEND/RECV, the batch gathered with one SGE per packet.
//!
//! The packets are copied into registered send slots (header and frame together, one
//! slot and one SGE per packet): the router's packet buffers are not registered
//! memory. Registering them soundly needs a pool over one arena (weft-link) and a
//! safe registration of it that keeps the memory alive (weft-verbs; the raw one is
//! `unsafe`, which this module forbids), and the buffers held until the send
//! completes. So "no copy" in the paper's sense is not done; the copy costs 17 ns
//! per 64-byte packet, 87 ns per 1500-byte one (`weft router bench --cluster
//! --copy-cost`); see docs/cluster.md ("Not done").
//!
//! Connections come and go while the router runs: a background thread accepts the
//! nodes with higher ids, another connects to the nodes with lower ids (and again
//! after such a connection dies); both hand finished peers to the interconnect
//! thread over a channel. A peer whose queue pair fails (its connection manager
//! link closed: the node stopped or died) is down until it is connected again;
//! packets for it are counted drops.
#![forbid(unsafe_code)]

use super::batch::{PacketHeader, HEADER_LEN};
use super::config::{ClusterPlan, Interconnect, Transport};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, Completion, CompletionQueue, Context, DeviceConfig, LinkKind, MemoryRegion, Mtu,
    ProtectionDomain, QpInitAttr, QpType, QueuePair, RecvWr, SendWr, WcStatus, WrOp,
};

/// Why a message was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FabricError {
    /// No connection to the peer.
    PeerDown,
    /// Every send slot to the peer is in flight.
    Full,
}

/// Moves batch messages between cluster nodes.
pub trait Fabric: Send {
    /// True while `peer` is connected.
    fn is_up(&self, peer: u8) -> bool;
    /// Messages sent to `peer` and not yet completed.
    fn in_flight(&self, peer: u8) -> usize;
    /// Most messages in flight per peer.
    fn depth(&self) -> usize;
    /// Bytes of one packet's slot (header and frame).
    fn slot_size(&self) -> usize;
    /// Send one message: the packets gathered in order, each behind its header.
    fn send(&mut self, peer: u8, packets: &[(PacketHeader, &[u8])]) -> Result<(), FabricError>;
    /// Append received messages (peer, bytes) to `out`; returns how many.
    fn poll(&mut self, out: &mut Vec<(u8, Vec<u8>)>) -> usize;
    /// Give a message's buffer back for reuse.
    fn recycle(&mut self, buf: Vec<u8>) {
        drop(buf);
    }
}

/// Bytes per packet slot: a 12-byte header and frames up to 2036 bytes.
pub const SLOT: usize = 2048;
/// Messages in flight per peer (send slot groups).
pub const SEND_DEPTH: usize = 64;
/// Receives posted per peer.
pub const RECV_DEPTH: usize = 64;
/// RoCEv2's UDP port: each node's device listens there on its address.
pub const ROCE_PORT: u16 = 4791;

/// One connected peer.
struct Peer {
    qp: QueuePair,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    send_mr: MemoryRegion,
    recv_mr: MemoryRegion,
    next: usize,
    in_flight: usize,
    up: bool,
    _conn: cm::Connection,
    _pd: ProtectionDomain,
}

/// What a peer is made of before it is connected.
struct Parts {
    pd: ProtectionDomain,
    qp: QueuePair,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    send_mr: MemoryRegion,
    recv_mr: MemoryRegion,
}

/// Settings the background threads share.
#[derive(Clone)]
struct Setup {
    ctx: Context,
    qp_type: QpType,
    batch: usize,
    param: ConnParam,
}

impl Setup {
    fn msg_size(&self) -> usize {
        self.batch * SLOT
    }

    fn parts(&self) -> Result<Parts, weft_verbs::Error> {
        let pd = self.ctx.alloc_pd();
        let send_cq = CompletionQueue::new(&self.ctx, SEND_DEPTH * 2, None);
        let recv_cq = CompletionQueue::new(&self.ctx, RECV_DEPTH * 2, None);
        let attr = QpInitAttr {
            max_send_wr: SEND_DEPTH,
            max_recv_wr: RECV_DEPTH,
            ..QpInitAttr::new(self.qp_type)
        };
        let qp = pd.create_qp(&send_cq, &recv_cq, None, attr)?;
        let send_mr = pd.alloc_mr(SEND_DEPTH * self.msg_size(), Access::LOCAL_WRITE);
        let recv_mr = pd.alloc_mr(RECV_DEPTH * self.msg_size(), Access::LOCAL_WRITE);
        Ok(Parts {
            pd,
            qp,
            send_cq,
            recv_cq,
            send_mr,
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
            send_cq: p.send_cq,
            recv_cq: p.recv_cq,
            send_mr: p.send_mr,
            recv_mr: p.recv_mr,
            next: 0,
            in_flight: 0,
            up: true,
            _conn: conn,
            _pd: p.pd,
        })
    }
}

/// The weft-verbs interconnect of one node.
pub struct VerbsFabric {
    me: u8,
    peers: HashMap<u8, Peer>,
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
    /// listen for the connection manager on `cm_port`, and start connecting to the
    /// other nodes in the background. Returns once the device and listener are up;
    /// peers become usable as they connect.
    pub fn start(plan: &ClusterPlan) -> Result<VerbsFabric, weft_verbs::Error> {
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
        let setup = Setup {
            ctx,
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
    /// old one).
    fn adopt(&mut self) {
        while let Ok((id, p)) = self.incoming.try_recv() {
            self.peers.insert(id, p);
        }
    }

    fn down(&mut self, id: u8) {
        if let Some(p) = self.peers.get_mut(&id) {
            if p.up {
                p.up = false;
                eprintln!("weft router: interconnect to node {id} is down");
                if id < self.me {
                    lock(&self.wanted).insert(id);
                }
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
        self.peers.get(&peer).is_some_and(|p| p.up)
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

    fn send(&mut self, peer: u8, packets: &[(PacketHeader, &[u8])]) -> Result<(), FabricError> {
        self.adopt();
        let m = self.setup.msg_size();
        let Some(p) = self.peers.get_mut(&peer).filter(|p| p.up) else {
            return Err(FabricError::PeerDown);
        };
        if p.in_flight >= SEND_DEPTH {
            reap_sends(p, &mut self.completions);
            if p.in_flight >= SEND_DEPTH {
                return Err(FabricError::Full);
            }
        }
        let group = p.next % SEND_DEPTH;
        let mut sges = Vec::with_capacity(packets.len());
        for (i, (h, frame)) in packets.iter().enumerate().take(self.setup.batch) {
            let off = group * m + i * SLOT;
            let len = HEADER_LEN + frame.len();
            if len > SLOT {
                continue;
            }
            let ok = p.send_mr.write(off, &h.encode()).is_ok()
                && p.send_mr.write(off + HEADER_LEN, frame).is_ok();
            if ok {
                sges.push(p.send_mr.sge(off, len as u32));
            }
        }
        let wr = SendWr::new(group as u64, WrOp::Send { imm: None }, sges);
        match p.qp.post_send([wr]) {
            Ok(()) => {
                p.next = p.next.wrapping_add(1);
                p.in_flight += 1;
                Ok(())
            }
            Err(_) => {
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
            if !p.up {
                continue;
            }
            if !reap_sends(p, &mut self.completions) {
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

/// Retire completed sends; false when one failed (the peer is gone).
fn reap_sends(p: &mut Peer, scratch: &mut Vec<Completion>) -> bool {
    scratch.clear();
    p.send_cq.poll(scratch, SEND_DEPTH);
    let mut ok = true;
    for c in scratch.drain(..) {
        p.in_flight = p.in_flight.saturating_sub(1);
        ok &= c.status == WcStatus::Success;
    }
    ok
}

/// An in-process fabric for tests: every node's messages go through channels, as
/// contiguous copies, and a node can be cut off.
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
        fn send(&mut self, peer: u8, packets: &[(PacketHeader, &[u8])]) -> Result<(), FabricError> {
            if !self.is_up(peer) || lock(&self.dead).contains(&self.me) {
                return Err(FabricError::PeerDown);
            }
            let mut m = Vec::new();
            super::super::batch::encode_contiguous(packets.iter().copied(), &mut m);
            lock(&self.sent).push((self.me, peer, packets.len()));
            let tx = self.tx.get(&peer).ok_or(FabricError::PeerDown)?;
            tx.send((self.me, m)).map_err(|_| FabricError::PeerDown)
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

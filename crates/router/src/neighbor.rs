//! The neighbour table: IP next hop → MAC, per port, learned from ARP (RFC 826) and
//! IPv6 neighbour discovery (RFC 4861), with expiry, request retransmission and a
//! short queue of packets waiting for an answer (RFC 1122 §2.3.2.2: "SHOULD save at
//! least one (the latest) packet"; we keep a few).
//!
//! It is deterministic: every call takes `now`; nothing here reads a clock.

use crate::fib::PortId;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};
use weft_link::PacketBuf;
use weft_wire::EthernetAddress;

/// Timers and limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighborConfig {
    /// How long an answer is trusted (RFC 4861 REACHABLE_TIME is 30 s).
    pub reachable: Duration,
    /// After expiry the old MAC is still used for this long while a refresh request is
    /// outstanding (Linux's STALE/DELAY, simplified), so a flow does not stall.
    pub stale_grace: Duration,
    /// Gap between requests for an unresolved neighbour (RFC 4861 RETRANS_TIMER 1 s).
    pub retransmit: Duration,
    /// Requests before giving up (RFC 4861 MAX_MULTICAST_SOLICIT 3).
    pub max_requests: u32,
    /// Packets held per unresolved neighbour.
    pub queue_len: usize,
}

impl Default for NeighborConfig {
    fn default() -> Self {
        NeighborConfig {
            reachable: Duration::from_secs(30),
            stale_grace: Duration::from_secs(10),
            retransmit: Duration::from_secs(1),
            max_requests: 3,
            queue_len: 4,
        }
    }
}

/// A packet waiting for its next hop: already validated and routed, to be finished
/// (TTL, MACs) once the MAC is known.
#[derive(Debug)]
pub struct Waiting {
    /// The frame.
    pub buf: PacketBuf,
    /// True for a forwarded packet (TTL − 1 on release); false for one the router
    /// made (only the MACs are set).
    pub forwarded: bool,
}

#[derive(Debug)]
enum State {
    Incomplete {
        requests: u32,
        last_request: Instant,
        queue: VecDeque<Waiting>,
    },
    Reachable {
        mac: EthernetAddress,
        expires: Instant,
        refresh_sent: Option<Instant>,
    },
}

/// What [`NeighborTable::lookup`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Use this MAC until `valid_until`.
    Known {
        /// The neighbour's MAC.
        mac: EthernetAddress,
        /// Past this instant, ask again.
        valid_until: Instant,
        /// True when the caller should send a refresh request now.
        refresh: bool,
    },
    /// Not known: queue the packet with [`NeighborTable::enqueue`].
    Unknown,
}

/// What [`NeighborTable::enqueue`] did.
#[derive(Debug)]
pub enum Enqueued {
    /// Held; send a request when `send_request`.
    Queued {
        /// True for the first packet (the caller sends the first request).
        send_request: bool,
    },
    /// The queue is full: the packet comes back to be dropped.
    Full(Waiting),
}

/// One row of `show neighbours`.
#[derive(Debug, Clone, PartialEq)]
pub struct NeighborView {
    /// Port.
    pub port: PortId,
    /// Address.
    pub ip: IpAddr,
    /// MAC when resolved.
    pub mac: Option<EthernetAddress>,
    /// `reachable`, `stale` or `incomplete`.
    pub state: &'static str,
    /// Seconds until expiry (negative when stale).
    pub expires_in: f64,
    /// Packets waiting.
    pub queued: usize,
}

/// Work for the caller after [`NeighborTable::tick`].
#[derive(Debug, Default)]
pub struct TickOutput {
    /// Send a request for these.
    pub requests: Vec<(PortId, IpAddr)>,
    /// Packets dropped because their neighbour never answered.
    pub failed: Vec<Waiting>,
}

/// All ports' neighbours.
#[derive(Debug)]
pub struct NeighborTable {
    cfg: NeighborConfig,
    entries: HashMap<(PortId, IpAddr), State>,
    /// Bumped whenever a MAC is learned, changed or removed, so per-worker caches
    /// know to drop their copies.
    generation: u64,
    /// Neighbours whose traffic this table never sees (the XDP fast path forwards
    /// it): refreshed by [`NeighborTable::tick`] once they expire, instead of by a
    /// lookup that never comes.
    kept_fresh: std::collections::HashSet<(PortId, IpAddr)>,
}

impl NeighborTable {
    /// An empty table.
    pub fn new(cfg: NeighborConfig) -> NeighborTable {
        NeighborTable {
            cfg,
            entries: HashMap::new(),
            generation: 0,
            kept_fresh: std::collections::HashSet::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &NeighborConfig {
        &self.cfg
    }

    /// Replace the set of neighbours to keep fresh without lookups: once one
    /// expires, [`NeighborTable::tick`] asks for it again every `retransmit` during
    /// its stale grace (its MAC stays in use meanwhile), as a lookup would.
    pub fn keep_fresh(&mut self, set: impl IntoIterator<Item = (PortId, IpAddr)>) {
        self.kept_fresh = set.into_iter().collect();
    }

    /// Changes so far (see the field).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The MAC for `ip` on `port`, if usable at `now`.
    pub fn lookup(&mut self, port: PortId, ip: IpAddr, now: Instant) -> Lookup {
        let cfg = self.cfg;
        match self.entries.get_mut(&(port, ip)) {
            Some(State::Reachable {
                mac,
                expires,
                refresh_sent,
            }) => {
                if now < *expires {
                    return Lookup::Known {
                        mac: *mac,
                        valid_until: *expires,
                        refresh: false,
                    };
                }
                if now >= *expires + cfg.stale_grace {
                    return Lookup::Unknown;
                }
                let refresh = refresh_sent.is_none_or(|t| now >= t + cfg.retransmit);
                if refresh {
                    *refresh_sent = Some(now);
                }
                Lookup::Known {
                    mac: *mac,
                    valid_until: now,
                    refresh,
                }
            }
            _ => Lookup::Unknown,
        }
    }

    /// Hold `pkt` until `ip` on `port` is resolved.
    pub fn enqueue(&mut self, port: PortId, ip: IpAddr, pkt: Waiting, now: Instant) -> Enqueued {
        let cap = self.cfg.queue_len;
        let e = self.entries.entry((port, ip));
        let st = e.or_insert_with(|| State::Incomplete {
            requests: 0,
            last_request: now,
            queue: VecDeque::new(),
        });
        if let State::Reachable { expires, .. } = st {
            // Past its grace: start over.
            if now >= *expires {
                *st = State::Incomplete {
                    requests: 0,
                    last_request: now,
                    queue: VecDeque::new(),
                };
                self.generation += 1;
            }
        }
        match st {
            State::Incomplete {
                requests,
                last_request,
                queue,
            } => {
                if queue.len() >= cap {
                    return Enqueued::Full(pkt);
                }
                queue.push_back(pkt);
                let first = *requests == 0;
                if first {
                    *requests = 1;
                    *last_request = now;
                }
                Enqueued::Queued {
                    send_request: first,
                }
            }
            // Resolved between the caller's lookup and now: nothing to hold.
            State::Reachable { .. } => Enqueued::Full(pkt),
        }
    }

    /// An answer (or a request naming its sender) says `ip` on `port` is at `mac`.
    /// RFC 826: an existing entry is always updated; a new one is created only when
    /// `create` (the packet was for us, or we asked). Returns the packets that were
    /// waiting, now ready to finish and send.
    pub fn learn(
        &mut self,
        port: PortId,
        ip: IpAddr,
        mac: EthernetAddress,
        create: bool,
        now: Instant,
    ) -> Vec<Waiting> {
        if !mac.is_unicast() {
            return Vec::new();
        }
        let expires = now + self.cfg.reachable;
        let new = State::Reachable {
            mac,
            expires,
            refresh_sent: None,
        };
        match self.entries.get_mut(&(port, ip)) {
            Some(st) => {
                let released = match st {
                    State::Incomplete { queue, .. } => std::mem::take(queue).into(),
                    State::Reachable { mac: old, .. } => {
                        if *old != mac {
                            self.generation += 1;
                        }
                        Vec::new()
                    }
                };
                if matches!(st, State::Incomplete { .. }) {
                    self.generation += 1;
                }
                *st = new;
                released
            }
            None if create => {
                self.entries.insert((port, ip), new);
                self.generation += 1;
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// Retransmit requests that are due, give up on neighbours that never answered,
    /// and forget entries long past expiry.
    pub fn tick(&mut self, now: Instant) -> TickOutput {
        let cfg = self.cfg;
        let mut out = TickOutput::default();
        let mut removed = false;
        let kept_fresh = &self.kept_fresh;
        self.entries.retain(|&(port, ip), st| match st {
            State::Incomplete {
                requests,
                last_request,
                queue,
            } => {
                if now < *last_request + cfg.retransmit {
                    return true;
                }
                if *requests >= cfg.max_requests {
                    out.failed.extend(queue.drain(..));
                    removed = true;
                    return false;
                }
                *requests += 1;
                *last_request = now;
                out.requests.push((port, ip));
                true
            }
            State::Reachable {
                expires,
                refresh_sent,
                ..
            } => {
                let keep = now < *expires + cfg.stale_grace;
                removed |= !keep;
                if keep
                    && now >= *expires
                    && kept_fresh.contains(&(port, ip))
                    && refresh_sent.is_none_or(|t| now >= t + cfg.retransmit)
                {
                    *refresh_sent = Some(now);
                    out.requests.push((port, ip));
                }
                keep
            }
        });
        if removed {
            self.generation += 1;
        }
        out
    }

    /// Remove every entry (for `ctl flush neighbours`).
    pub fn flush(&mut self) {
        self.entries.clear();
        self.generation += 1;
    }

    /// Every entry, sorted.
    pub fn view(&self, now: Instant) -> Vec<NeighborView> {
        let mut v: Vec<_> = self
            .entries
            .iter()
            .map(|(&(port, ip), st)| match st {
                State::Incomplete { queue, .. } => NeighborView {
                    port,
                    ip,
                    mac: None,
                    state: "incomplete",
                    expires_in: 0.0,
                    queued: queue.len(),
                },
                State::Reachable { mac, expires, .. } => {
                    let secs = if *expires >= now {
                        (*expires - now).as_secs_f64()
                    } else {
                        -(now - *expires).as_secs_f64()
                    };
                    NeighborView {
                        port,
                        ip,
                        mac: Some(*mac),
                        state: if secs >= 0.0 { "reachable" } else { "stale" },
                        expires_in: secs,
                        queued: 0,
                    }
                }
            })
            .collect();
        v.sort_by_key(|a| (a.port, a.ip));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_link::BufferPool;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }
    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 9]);

    #[test]
    fn a_neighbour_kept_fresh_is_asked_for_again_once_it_expires() {
        let t0 = Instant::now();
        let cfg = NeighborConfig::default();
        let mut n = NeighborTable::new(cfg);
        let (a, b) = (ip("198.18.2.2"), ip("198.18.2.3"));
        n.learn(1, a, MAC, true, t0);
        n.learn(1, b, MAC, true, t0);
        n.keep_fresh([(1, a)]);
        assert!(n.tick(t0 + cfg.reachable / 2).requests.is_empty());
        let t1 = t0 + cfg.reachable + Duration::from_millis(1);
        assert_eq!(n.tick(t1).requests, vec![(1, a)], "only the kept one");
        assert!(
            n.tick(t1 + cfg.retransmit / 2).requests.is_empty(),
            "not again before retransmit"
        );
        assert_eq!(n.tick(t1 + cfg.retransmit).requests, vec![(1, a)]);
        // The answer comes: reachable again, no more requests.
        let t2 = t1 + cfg.retransmit + Duration::from_millis(5);
        n.learn(1, a, MAC, false, t2);
        assert!(n.tick(t2 + cfg.retransmit).requests.is_empty());
        assert!(matches!(n.lookup(1, a, t2), Lookup::Known { .. }));
    }

    #[test]
    fn queue_then_learn_releases_in_order_and_caps_the_queue() {
        let pool = BufferPool::new(8, 128);
        let t0 = Instant::now();
        let mut n = NeighborTable::new(NeighborConfig::default());
        assert_eq!(n.lookup(1, ip("198.18.2.2"), t0), Lookup::Unknown);
        let mut firsts = 0;
        for i in 0..5u8 {
            let mut b = pool.alloc().expect("buf");
            assert!(b.copy_from(&[i]));
            match n.enqueue(
                1,
                ip("198.18.2.2"),
                Waiting {
                    buf: b,
                    forwarded: true,
                },
                t0,
            ) {
                Enqueued::Queued { send_request } => firsts += u32::from(send_request),
                Enqueued::Full(w) => assert_eq!(w.buf[0], 4, "the fifth does not fit"),
            }
        }
        assert_eq!(firsts, 1, "one request for the first packet only");
        let out = n.learn(1, ip("198.18.2.2"), MAC, false, t0);
        assert_eq!(
            out.iter().map(|w| w.buf[0]).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
        assert!(matches!(
            n.lookup(1, ip("198.18.2.2"), t0),
            Lookup::Known { mac: MAC, .. }
        ));
    }

    #[test]
    fn unsolicited_answers_update_but_do_not_create() {
        let t0 = Instant::now();
        let mut n = NeighborTable::new(NeighborConfig::default());
        n.learn(0, ip("198.18.1.2"), MAC, false, t0);
        assert_eq!(n.lookup(0, ip("198.18.1.2"), t0), Lookup::Unknown);
        n.learn(0, ip("198.18.1.2"), MAC, true, t0);
        let g = n.generation();
        let other = EthernetAddress([2, 0, 0, 0, 0, 7]);
        n.learn(0, ip("198.18.1.2"), other, false, t0);
        assert!(n.generation() > g, "a changed MAC invalidates caches");
        assert!(
            matches!(n.lookup(0, ip("198.18.1.2"), t0), Lookup::Known { mac, .. } if mac == other)
        );
        n.learn(0, ip("198.18.1.3"), EthernetAddress::BROADCAST, true, t0);
        assert_eq!(
            n.lookup(0, ip("198.18.1.3"), t0),
            Lookup::Unknown,
            "broadcast MAC refused"
        );
    }

    #[test]
    fn entries_expire_go_stale_then_vanish() {
        let cfg = NeighborConfig::default();
        let t0 = Instant::now();
        let mut n = NeighborTable::new(cfg);
        n.learn(0, ip("198.18.1.2"), MAC, true, t0);
        let t1 = t0 + cfg.reachable + Duration::from_millis(1);
        assert!(matches!(
            n.lookup(0, ip("198.18.1.2"), t1),
            Lookup::Known { refresh: true, .. }
        ));
        assert!(matches!(
            n.lookup(0, ip("198.18.1.2"), t1),
            Lookup::Known { refresh: false, .. }
        ));
        assert_eq!(n.view(t1)[0].state, "stale");
        let t2 = t1 + cfg.stale_grace;
        assert_eq!(n.lookup(0, ip("198.18.1.2"), t2), Lookup::Unknown);
        n.tick(t2);
        assert!(n.view(t2).is_empty());
    }

    #[test]
    fn unanswered_requests_are_retried_then_the_queue_is_dropped() {
        let pool = BufferPool::new(4, 128);
        let cfg = NeighborConfig::default();
        let t0 = Instant::now();
        let mut n = NeighborTable::new(cfg);
        let b = pool.alloc().expect("buf");
        assert!(matches!(
            n.enqueue(
                0,
                ip("198.18.1.9"),
                Waiting {
                    buf: b,
                    forwarded: true
                },
                t0
            ),
            Enqueued::Queued { send_request: true }
        ));
        let mut t = t0;
        let mut retries = 0;
        let mut failed = 0;
        for _ in 0..10 {
            t += cfg.retransmit;
            let o = n.tick(t);
            retries += o.requests.len();
            failed += o.failed.len();
        }
        assert_eq!(retries as u32, cfg.max_requests - 1);
        assert_eq!(failed, 1);
        assert_eq!(pool.available(), 4);
    }
}

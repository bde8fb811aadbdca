//! How a connection sends, chosen from costs measured on it (issue 16): inline or
//! from a send slot, eager (a SEND into the peer's receive buffer) or rendezvous
//! (the peer READs a registered region). Pure: fed with samples, so the choice is
//! tested without a clock.
//!
//! Each path's cost is a line, `ns = a + b·bytes`, fitted by exponentially weighted
//! least squares over its recent samples ([`CostLine`]), so it follows the load:
//!
//! - inline `I(n)`: copy into the staging slot and post (the engine copies the
//!   payload into the work request);
//! - from a slot `S(n)`: copy into a send slot and post, plus handling the send's
//!   completion (`C`, per completion, measured by the poller);
//! - eager `E(n) = S(n) + F(n) + V(n)`: the slot send, its flight (post to
//!   completion, i.e. to the peer's ACK, `F`), and the receiver's copy out of its
//!   ring (`V`, measured on this side's own receives: the peer runs the same code);
//! - rendezvous `R(n) = G(n) + E(40) + D(n)`: registering the message (`G`), the
//!   40-byte announcement, and the READ (`D`: registering the landing region and the
//!   READ's round trip, measured on this side's own READs of the peer's rendezvous
//!   messages).
//!
//! A path is kept up to the largest size where it costs at most
//! [`MARGIN`] more than the other (a margin, so near-equal costs do not flap):
//! `inline_max` within `[0, min(MAX_INLINE, buffer)]`, `eager_max` within
//! `[MIN_BUFFER, peer's buffer]` — a message larger than the peer's buffer must go by
//! rendezvous, as it always did, and the wire protocol is unchanged (a peer takes a
//! rendezvous of any size up to its `max_message`). Until both sides of a choice have
//! samples the protocol's limits stand: in particular, a side that has never READ a
//! rendezvous message keeps `eager_max` at the peer's buffer.

/// Weight of the newest sample (the fit remembers about the last 16).
const ALPHA: f64 = 1.0 / 16.0;
/// Samples before a line is used.
const MIN_SAMPLES: u32 = 8;
/// The cheaper path must undercut the current one by this fraction.
pub(crate) const MARGIN: f64 = 0.125;
/// Samples are clipped at this many times the line's prediction ([`CostLine::add`]).
const OUTLIER: f64 = 4.0;
/// ... plus this, so tiny predictions do not clip ordinary jitter.
const OUTLIER_SLACK_NS: f64 = 1000.0;
/// A threshold moves only by more than this fraction of itself (or to a limit), so
/// near-equal costs do not make it wander.
const MOVE: usize = 8;
/// Samples between two choices of the thresholds ([`SendPolicy::sampled`]).
const CHOOSE_EVERY: u32 = 8;
/// The announcement of a rendezvous: a header and a descriptor.
const RNDV_MSG: usize = crate::frame::HEADER_LEN + crate::frame::Rendezvous::LEN;

/// A cost line `ns = a + b·bytes`, fitted by exponentially weighted least squares.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct CostLine {
    w: f64,
    sx: f64,
    sy: f64,
    sxx: f64,
    sxy: f64,
    samples: u32,
}

impl CostLine {
    /// A sample: `bytes` cost `ns`. Once the line is known, a sample above
    /// [`OUTLIER`] times its prediction counts as that much: one preemption (a
    /// millisecond in a sub-microsecond copy) must not move the line far, while a
    /// lasting rise still lifts it, by that factor per few samples.
    pub(crate) fn add(&mut self, bytes: usize, ns: f64) {
        if !ns.is_finite() || ns < 0.0 {
            return;
        }
        let x = bytes as f64;
        let ns = match self.line() {
            Some(l) => ns.min(OUTLIER * at(l, bytes) + OUTLIER_SLACK_NS),
            None => ns,
        };
        let k = 1.0 - ALPHA;
        self.w = self.w * k + 1.0;
        self.sx = self.sx * k + x;
        self.sy = self.sy * k + ns;
        self.sxx = self.sxx * k + x * x;
        self.sxy = self.sxy * k + x * ns;
        self.samples = self.samples.saturating_add(1);
    }

    /// `(a, b)` once it has [`MIN_SAMPLES`]: never negative (a cost does not fall
    /// with size; samples of one size give a flat line).
    pub(crate) fn line(&self) -> Option<(f64, f64)> {
        if self.samples < MIN_SAMPLES || self.w <= 0.0 {
            return None;
        }
        let mx = self.sx / self.w;
        let my = self.sy / self.w;
        let var = self.sxx / self.w - mx * mx;
        let cov = self.sxy / self.w - mx * my;
        // Sizes that vary by less than a few bytes say nothing about the slope.
        let b = if var > 4.0 { (cov / var).max(0.0) } else { 0.0 };
        let a = (my - b * mx).max(0.0);
        (a.is_finite() && b.is_finite()).then_some((a, b))
    }
}

fn add((a1, b1): (f64, f64), (a2, b2): (f64, f64)) -> (f64, f64) {
    (a1 + a2, b1 + b2)
}

fn at((a, b): (f64, f64), n: usize) -> f64 {
    a + b * n as f64
}

/// The largest size in `[0, hard]` up to which `keep` costs at most `1 + MARGIN`
/// times `alt`, for costs where `keep` is the path of small messages (`keep` below,
/// `alt` above the crossing).
fn keep_up_to(keep: (f64, f64), alt: (f64, f64), hard: usize) -> usize {
    let alt = (alt.0 * (1.0 + MARGIN), alt.1 * (1.0 + MARGIN));
    if at(keep, hard) <= at(alt, hard) {
        return hard;
    }
    if keep.1 <= alt.1 {
        // Dearer at the largest size and not growing faster: dearer everywhere.
        return 0;
    }
    let cross = (alt.0 - keep.0) / (keep.1 - alt.1);
    if cross.is_finite() && cross > 0.0 {
        (cross as usize).min(hard)
    } else {
        0
    }
}

/// `new` if it differs from `old` by more than `old / MOVE` or is one of `limits`
/// (or `old` is outside them); else `old`.
fn settle(old: usize, new: usize, limits: &[usize]) -> usize {
    let (lo, hi) = (limits[0], limits[limits.len() - 1]);
    if limits.contains(&new) || old < lo || old > hi || old.abs_diff(new) > old / MOVE {
        new
    } else {
        old
    }
}

/// The costs of one connection's sends and the thresholds they choose.
#[derive(Debug, Clone)]
pub(crate) struct SendPolicy {
    adaptive: bool,
    /// The hard limits: `min(MAX_INLINE, own slot size)` and the peer's buffer.
    inline_hard: usize,
    peer_buf: usize,
    /// The floor of `eager_max`.
    eager_floor: usize,
    pub inline_post: CostLine,
    pub slot_post: CostLine,
    /// Per completion (bytes 0).
    pub completion: CostLine,
    pub flight: CostLine,
    pub recv_copy: CostLine,
    pub register: CostLine,
    pub read: CostLine,
    inline_max: usize,
    eager_max: usize,
    /// Times a threshold moved.
    pub changes: u64,
    /// Samples since the thresholds were last chosen.
    since_choice: u32,
}

impl SendPolicy {
    /// `adaptive == false`: the protocol's limits, always.
    pub(crate) fn new(adaptive: bool, inline_hard: usize, peer_buf: usize) -> SendPolicy {
        SendPolicy {
            adaptive,
            inline_hard,
            peer_buf,
            eager_floor: crate::conn::MIN_BUFFER.min(peer_buf),
            inline_post: CostLine::default(),
            slot_post: CostLine::default(),
            completion: CostLine::default(),
            flight: CostLine::default(),
            recv_copy: CostLine::default(),
            register: CostLine::default(),
            read: CostLine::default(),
            inline_max: inline_hard,
            eager_max: peer_buf,
            changes: 0,
            since_choice: 0,
        }
    }

    /// Whether it measures and chooses (else the protocol's limits stand).
    pub(crate) fn adaptive(&self) -> bool {
        self.adaptive
    }

    /// The peer's buffer, known after the handshake.
    pub(crate) fn set_peer_buf(&mut self, peer_buf: usize) {
        self.peer_buf = peer_buf;
        self.eager_floor = crate::conn::MIN_BUFFER.min(peer_buf);
        let changes = self.changes;
        self.update();
        // The starting point, not a move.
        self.changes = changes;
    }

    /// Messages up to this many bytes go inline.
    pub(crate) fn inline_max(&self) -> usize {
        self.inline_max
    }

    /// Messages up to this many bytes go eager; larger ones by rendezvous.
    pub(crate) fn eager_max(&self) -> usize {
        self.eager_max
    }

    /// A sample was added: choose again every [`CHOOSE_EVERY`]th. Between choices
    /// the estimates average over more samples: on udp, with 60 KB–1.5 MB messages
    /// whose eager and rendezvous costs were near-equal, choosing after every sample
    /// moved the threshold every ten calls or so.
    pub(crate) fn sampled(&mut self) {
        self.since_choice += 1;
        if self.since_choice >= CHOOSE_EVERY {
            self.since_choice = 0;
            self.update();
        }
    }

    /// Choose again from the current estimates.
    pub(crate) fn update(&mut self) {
        let (inline, eager) = if self.adaptive {
            (
                settle(
                    self.inline_max,
                    self.choose_inline(),
                    &[0, self.inline_hard],
                ),
                settle(
                    self.eager_max,
                    self.choose_eager(),
                    &[self.eager_floor, self.peer_buf],
                ),
            )
        } else {
            (self.inline_hard, self.peer_buf)
        };
        if (inline, eager) != (self.inline_max, self.eager_max) {
            self.changes += 1;
        }
        self.inline_max = inline;
        self.eager_max = eager;
    }

    fn slot(&self) -> Option<(f64, f64)> {
        Some(add(self.slot_post.line()?, self.completion.line()?))
    }

    fn choose_inline(&self) -> usize {
        match (self.inline_post.line(), self.slot()) {
            (Some(i), Some(s)) => keep_up_to(i, s, self.inline_hard),
            _ => self.inline_hard,
        }
    }

    fn choose_eager(&self) -> usize {
        let costs = || {
            let slot = self.slot()?;
            let eager = add(add(slot, self.flight.line()?), self.recv_copy.line()?);
            let announce = at(eager, RNDV_MSG);
            let rndv = add(
                add(self.register.line()?, self.read.line()?),
                (announce, 0.0),
            );
            Some((eager, rndv))
        };
        match costs() {
            Some((e, r)) => keep_up_to(e, r, self.peer_buf).max(self.eager_floor),
            None => self.peer_buf,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(l: &mut CostLine, f: impl Fn(usize) -> f64, sizes: &[usize]) {
        for _ in 0..MIN_SAMPLES {
            for &n in sizes {
                l.add(n, f(n));
            }
        }
    }

    #[test]
    fn a_line_fits_its_samples_and_forgets_old_ones() {
        let mut l = CostLine::default();
        assert_eq!(l.line(), None);
        feed(&mut l, |n| 100.0 + 2.0 * n as f64, &[100, 1000, 4000]);
        let (a, b) = l.line().unwrap();
        assert!(
            (a - 100.0).abs() < 1e-6 && (b - 2.0).abs() < 1e-9,
            "{a} {b}"
        );
        // One size only: flat at its mean.
        let mut f = CostLine::default();
        feed(&mut f, |_| 500.0, &[64, 64]);
        let (a, b) = f.line().unwrap();
        assert!((a - 500.0).abs() < 1e-6 && b == 0.0, "{a} {b}");
        // New costs replace old ones within a few dozen samples.
        for _ in 0..30 {
            for n in [100usize, 1000, 4000] {
                l.add(n, 300.0 + 1.0 * n as f64);
            }
        }
        let (a, b) = l.line().unwrap();
        assert!(
            (a - 300.0).abs() < 20.0 && (b - 1.0).abs() < 0.02,
            "{a} {b}"
        );
        // One preemption (a millisecond) barely moves it.
        let before = at(l.line().unwrap(), 1000);
        l.add(1000, 1e6);
        let after = at(l.line().unwrap(), 1000);
        assert!(after < before * 1.3, "{before} -> {after}");
        // Hostile numbers are ignored, and a falling cost is not believed.
        l.add(10, f64::NAN);
        l.add(10, -5.0);
        let mut d = CostLine::default();
        feed(&mut d, |n| 10_000.0 - n as f64, &[100, 5000]);
        assert_eq!(d.line().unwrap().1, 0.0);
    }

    /// A policy with inline/slot costs that favour inline everywhere, eager costs
    /// `e0 + e1·n` (split between its parts) and rendezvous costs `r0 + r1·n`.
    fn policy(peer_buf: usize, (e0, e1): (f64, f64), (r0, r1): (f64, f64)) -> SendPolicy {
        let mut p = SendPolicy::new(true, 256, peer_buf);
        let sizes = [512, peer_buf / 2, peer_buf];
        feed(
            &mut p.inline_post,
            |n| 100.0 + n as f64 * 0.1,
            &[16, 128, 256],
        );
        feed(&mut p.slot_post, |n| e0 / 4.0 + e1 / 2.0 * n as f64, &sizes);
        feed(&mut p.completion, |_| 100.0, &[0]);
        feed(&mut p.flight, |_| e0 / 2.0, &sizes);
        feed(
            &mut p.recv_copy,
            |n| e0 / 4.0 - 100.0 + e1 / 2.0 * n as f64,
            &sizes,
        );
        let announce = e0 + e1 * RNDV_MSG as f64;
        feed(
            &mut p.register,
            |n| (r0 - announce) / 2.0 + r1 / 2.0 * n as f64,
            &sizes,
        );
        feed(
            &mut p.read,
            |n| (r0 - announce) / 2.0 + r1 / 2.0 * n as f64,
            &sizes,
        );
        p.update();
        p
    }

    #[test]
    fn samples_choose_again_every_eighth() {
        let mut p = policy(1 << 20, (1000.0, 1.0), (30_000.0, 0.1));
        let before = p.eager_max();
        // Rendezvous now far dearer: seven samples change nothing, the eighth does.
        for i in 0..CHOOSE_EVERY {
            for n in [512, 1 << 19, 1 << 20] {
                p.read.add(n, 1e7);
            }
            if i + 1 < CHOOSE_EVERY {
                p.sampled();
                assert_eq!(p.eager_max(), before);
            }
        }
        p.sampled();
        assert_eq!(p.eager_max(), 1 << 20);
    }

    #[test]
    fn a_threshold_moves_by_an_eighth_or_to_a_limit() {
        assert_eq!(settle(1000, 1100, &[128, 4096]), 1000);
        assert_eq!(settle(1000, 1200, &[128, 4096]), 1200);
        assert_eq!(settle(1000, 4096, &[128, 4096]), 4096);
        assert_eq!(settle(130, 128, &[128, 4096]), 128);
        // From outside the limits (a peer's buffer just learned): at once.
        assert_eq!(settle(4096, 4000, &[128, 1024]), 4000);
    }

    #[test]
    fn without_samples_the_protocol_limits_stand() {
        let mut p = SendPolicy::new(true, 256, 4096);
        p.update();
        assert_eq!((p.inline_max(), p.eager_max()), (256, 4096));
        // Eager costs known, rendezvous never seen: still the peer's buffer.
        feed(&mut p.slot_post, |n| 100.0 + n as f64, &[300, 4000]);
        feed(&mut p.completion, |_| 50.0, &[0]);
        feed(&mut p.flight, |n| 100.0 + n as f64, &[300, 4000]);
        feed(&mut p.recv_copy, |n| 100.0 + n as f64, &[300, 4000]);
        p.update();
        assert_eq!(p.eager_max(), 4096);
        // A fixed policy ignores every sample.
        let mut f = policy(1 << 20, (1000.0, 1.0), (30_000.0, 0.1));
        assert!(f.eager_max() < 1 << 20);
        f.adaptive = false;
        f.update();
        assert_eq!((f.inline_max(), f.eager_max()), (256, 1 << 20));
    }

    #[test]
    fn costs_that_favour_rendezvous_above_n_move_the_threshold_to_about_n() {
        // Eager 1 µs + 1 ns/B, rendezvous 30 µs + 0.1 ns/B: they cross at
        // 29 µs / 0.9 ns/B ≈ 32 KiB; the margin keeps eager a little longer.
        let peer_buf = 1 << 20;
        let p = policy(peer_buf, (1000.0, 1.0), (30_000.0, 0.1));
        let cross = 29_000.0 / 0.9;
        let with_margin = (30_000.0 * 1.125 - 1000.0) / (1.0 - 0.1125);
        let got = p.eager_max() as f64;
        assert!(got >= cross && got <= with_margin + 1.0, "{got}");
        // Never above the peer's buffer: rendezvous dearer everywhere.
        let p = policy(4096, (1000.0, 1.0), (30_000.0, 0.1));
        assert_eq!(p.eager_max(), 4096);
        // Never below the floor: eager copies so dear that rendezvous (its cost
        // no less than the 40-byte announcement) wins from a few dozen bytes up.
        let p = policy(peer_buf, (1000.0, 100.0), (1000.0 + 100.0 * 40.0, 0.1));
        assert_eq!(p.eager_max(), crate::conn::MIN_BUFFER);
        // Inline stays (it is the cheaper here).
        assert_eq!(p.inline_max(), 256);
    }

    #[test]
    fn a_change_in_costs_moves_the_threshold_again() {
        let peer_buf = 1 << 20;
        let mut p = policy(peer_buf, (1000.0, 1.0), (30_000.0, 0.1));
        let before = p.eager_max();
        assert!(before < 64 << 10, "{before}");
        // The READ's round trip grows tenfold (a loaded peer): eager keeps larger
        // messages.
        let announce = 1000.0 + RNDV_MSG as f64;
        for _ in 0..40 {
            for n in [512, peer_buf / 2, peer_buf] {
                p.read.add(n, 300_000.0 - announce / 2.0 + 0.05 * n as f64);
                p.update();
            }
        }
        let after = p.eager_max();
        assert!(after > 4 * before, "{before} -> {after}");
        let changes = p.changes;
        assert!(changes > 0);
        // Back to the first costs: back to the first threshold, within the eighth
        // a threshold must move by.
        for _ in 0..40 {
            for n in [512, peer_buf / 2, peer_buf] {
                p.read.add(n, (30_000.0 - announce) / 2.0 + 0.05 * n as f64);
                p.update();
            }
        }
        let again = p.eager_max() as f64;
        assert!(
            (again - before as f64).abs() <= before as f64 / MOVE as f64,
            "{before} {again}"
        );
    }

    #[test]
    fn inline_gives_way_to_slots_where_its_copy_costs_more() {
        let mut p = SendPolicy::new(true, 256, 4096);
        // Inline: 100 ns + 4 ns/B; slot: 150 ns + 0.5 ns/B, completion 50 ns:
        // equal at 100/3.5 ≈ 28 B, with the margin 100 + 4n = 1.125 (200 + 0.5n).
        feed(
            &mut p.inline_post,
            |n| 100.0 + 4.0 * n as f64,
            &[16, 64, 256],
        );
        feed(
            &mut p.slot_post,
            |n| 150.0 + 0.5 * n as f64,
            &[300, 1000, 4000],
        );
        feed(&mut p.completion, |_| 50.0, &[0]);
        p.update();
        let want = (1.125 * 200.0 - 100.0) / (4.0 - 1.125 * 0.5);
        assert_eq!(p.inline_max(), want as usize);
        // Cheap inline copies again: inline up to the QP's limit.
        for _ in 0..40 {
            for n in [16usize, 64, 256] {
                p.inline_post.add(n, 100.0 + 0.1 * n as f64);
            }
        }
        p.update();
        assert_eq!(p.inline_max(), 256);
    }
}

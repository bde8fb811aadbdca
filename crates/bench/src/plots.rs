//! The plots `weft report` draws besides the perf/baseline/peers ones (report.rs):
//! - `lpm-bench --sweep --json` rows: table memory against route count, one panel per
//!   family, one line per implementation, with the 4 MiB line (the NIC's IMEM in
//!   P2PNIC Fig. 14, where DPDK's librte_lpm stops at 60 000 routes) and for IPv6 the
//!   8 MiB target;
//! - `rpc-bench --json` rows: calls per second and p50 latency of weft-rpc (udp, shm;
//!   batching off and on) beside gRPC for each concurrency, one figure per workload;
//! - the RFC 2544 tables `scripts/router-e2e.sh` writes (markdown, 8 columns): zero-loss
//!   rate, sustained rate (flat-out sent × delivered) and p50 latency per frame size,
//!   one line per forwarder; with several rounds in a file, the median with a band
//!   from the lowest to the highest.
//!
//! These were three matplotlib scripts; one plotting path (plotters) now draws them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{anyhow, bail};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use serde::Deserialize;

use crate::report::color;

/// One row of `weft lpm-bench --sweep --json`.
#[derive(Debug, Clone, Deserialize)]
pub struct LpmRow {
    pub family: String,
    #[serde(rename = "impl")]
    pub implementation: String,
    pub routes: u64,
    pub bytes: u64,
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub sweep: bool,
}

/// One row of `weft rpc-bench --json` (the fields the plot needs).
#[derive(Debug, Clone, Deserialize)]
pub struct RpcRow {
    pub system: String,
    pub link: String,
    pub mix: String,
    pub clients: usize,
    pub outstanding: usize,
    pub size: usize,
    pub clusters: usize,
    pub batching: bool,
    /// The batching policy (off, adaptive, on); older rows carry only `batching`.
    #[serde(default)]
    pub batch: Option<String>,
    pub ops_per_s: f64,
    pub p50_us: f64,
}

impl RpcRow {
    /// The row's batching policy: its `batch`, or for older rows `on`/`off`.
    pub fn batch(&self) -> &str {
        match &self.batch {
            Some(b) => b,
            None if self.batching => "on",
            None => "off",
        }
    }
}

/// One row of an RFC 2544 table (`weft router rfc2544`, `scripts/router-e2e.sh`).
#[derive(Debug, Clone, PartialEq)]
pub struct RouterRow {
    pub forwarder: String,
    pub frame: u64,
    pub zero_loss_kpps: f64,
    /// Flat-out sent rate times the delivered share.
    pub sustained_kpps: f64,
    pub p50_us: f64,
    /// Not in every markdown table's reading (NaN when nothing crossed).
    pub p99_us: Option<f64>,
    /// Latency at a given rate (`--latency-at-kpps`, JSON rows only): the rate and the
    /// p50 and p99 at it.
    pub at_kpps: Option<f64>,
    pub at_p50_us: Option<f64>,
    pub at_p99_us: Option<f64>,
    /// Frames lost in the trial at `at_kpps`.
    pub at_lost: Option<u64>,
    /// CPU time per delivered frame at the zero-loss rate, ns: all cores (the
    /// generator's included) and the forwarder's core alone (JSON rows only; see
    /// [`crate::router::Rfc2544Row::cpu_ns_per_pkt_all`]).
    pub cpu_ns_per_pkt_all: Option<f64>,
    pub cpu_ns_per_pkt_router_core: Option<f64>,
    /// The same in the trial at `at_kpps`.
    pub at_cpu_ns_per_pkt_all: Option<f64>,
    pub at_cpu_ns_per_pkt_router_core: Option<f64>,
}

impl From<crate::router::Rfc2544Row> for RouterRow {
    fn from(r: crate::router::Rfc2544Row) -> Self {
        RouterRow {
            forwarder: r.forwarder,
            frame: r.frame,
            zero_loss_kpps: r.zero_loss_kpps,
            sustained_kpps: r.flat_out_kpps * r.flat_out_delivered_pct / 100.0,
            p50_us: r.p50_us.unwrap_or(f64::NAN),
            p99_us: r.p99_us,
            at_kpps: r.at_kpps,
            at_p50_us: r.at_p50_us,
            at_p99_us: r.at_p99_us,
            at_lost: r.at_lost,
            cpu_ns_per_pkt_all: r.cpu_ns_per_pkt_all,
            cpu_ns_per_pkt_router_core: r.cpu_ns_per_pkt_router_core,
            at_cpu_ns_per_pkt_all: r.at_cpu_ns_per_pkt_all,
            at_cpu_ns_per_pkt_router_core: r.at_cpu_ns_per_pkt_router_core,
        }
    }
}

/// The rows of RFC 2544 tables in markdown: `| forwarder | frame (B) | zero-loss rate
/// (kpps) | Mbit/s | flat-out sent (kpps) | flat-out delivered | latency p50 (us) |
/// p99 (us) |`; other lines (headers, prose, other tables) are skipped.
pub fn parse_router_tables(text: &str) -> Vec<RouterRow> {
    text.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line
                .trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect();
            let [who, size, kpps, _mbps, flat, delivered, p50, p99] = cells[..] else {
                return None;
            };
            let frame = size.parse().ok()?;
            let delivered: f64 = delivered.trim_end_matches('%').parse().ok()?;
            Some(RouterRow {
                forwarder: who.to_owned(),
                frame,
                zero_loss_kpps: kpps.parse().ok()?,
                sustained_kpps: flat.parse::<f64>().ok()? * delivered / 100.0,
                p50_us: p50.parse().ok()?,
                p99_us: p99.parse().ok().filter(|x: &f64| x.is_finite()),
                at_kpps: None,
                at_p50_us: None,
                at_p99_us: None,
                at_lost: None,
                cpu_ns_per_pkt_all: None,
                cpu_ns_per_pkt_router_core: None,
                at_cpu_ns_per_pkt_all: None,
                at_cpu_ns_per_pkt_router_core: None,
            })
        })
        .collect()
}

const MIB: f64 = 1024.0 * 1024.0;

/// Which number of a row a panel shows.
type Of<R> = fn(&R) -> f64;

/// A line on a log-log panel: its points (x ascending) and optionally a band.
struct Line {
    label: String,
    color: RGBColor,
    width: u32,
    points: Vec<(f64, f64)>,
    /// (x, low, high) per point: drawn as a translucent band.
    band: Option<Vec<(f64, f64, f64)>>,
}

/// A horizontal reference line.
struct Level {
    label: String,
    y: f64,
    color: RGBColor,
}

struct Panel<'a> {
    title: String,
    x_desc: &'a str,
    y_desc: &'a str,
    lines: Vec<Line>,
    levels: Vec<Level>,
}

fn draw_err(path: &Path) -> impl Fn(&dyn std::fmt::Display) -> anyhow::Error + '_ {
    move |e| anyhow!("drawing {}: {e}", path.display())
}

/// The range of `values` (positive ones; a log axis has no zero), widened by `pad`.
fn log_range(values: impl Iterator<Item = f64>, pad: f64) -> Option<(f64, f64)> {
    let (lo, hi) = values
        .filter(|v| *v > 0.0 && v.is_finite())
        .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    (lo <= hi).then(|| (lo / pad, hi * pad))
}

/// Draws one log-log panel into `area`.
fn draw_panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    p: &Panel<'_>,
    text: bool,
    path: &Path,
) -> anyhow::Result<()> {
    let err = draw_err(path);
    let xs = p.lines.iter().flat_map(|l| l.points.iter().map(|q| q.0));
    let ys = p
        .lines
        .iter()
        .flat_map(|l| {
            l.points.iter().map(|q| q.1).chain(
                l.band
                    .iter()
                    .flat_map(|b| b.iter().flat_map(|q| [q.1, q.2])),
            )
        })
        .chain(p.levels.iter().map(|l| l.y));
    let (Some((x0, x1)), Some((y0, y1))) = (log_range(xs, 1.3), log_range(ys, 1.6)) else {
        return Ok(());
    };
    let mut builder = ChartBuilder::on(area);
    builder.margin(15);
    if text {
        builder
            .caption(&p.title, ("sans-serif", 20))
            .x_label_area_size(45)
            .y_label_area_size(70);
    } else {
        builder.x_label_area_size(5).y_label_area_size(5);
    }
    // Ticks at the measured x values (route counts, frame sizes): plotters' own log
    // ticks crowd into unreadable runs of digits over a decade or less.
    let mut ticks: Vec<f64> = p
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|q| q.0))
        .collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    let step = ticks.len().div_ceil(8).max(1);
    let ticks: Vec<f64> = ticks.into_iter().step_by(step).filter(|_| text).collect();
    let mut chart = builder
        .build_cartesian_2d(
            (x0..x1).log_scale().with_key_points(ticks),
            (y0..y1).log_scale(),
        )
        .map_err(|e| err(&e))?;
    if text {
        chart
            .configure_mesh()
            .x_desc(p.x_desc)
            .y_desc(p.y_desc)
            .x_label_formatter(&|x| {
                if x.fract() == 0.0 {
                    format!("{x:.0}")
                } else {
                    crate::report::human_value(*x)
                }
            })
            .y_label_formatter(&|y| crate::report::human_value(*y))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .draw()
            .map_err(|e| err(&e))?;
    } else {
        frame(&mut chart, (x0, x1), (y0, y1), &err)?;
    }
    for l in &p.lines {
        if let Some(band) = &l.band {
            let mut poly: Vec<(f64, f64)> = band.iter().map(|&(x, lo, _)| (x, lo)).collect();
            poly.extend(band.iter().rev().map(|&(x, _, hi)| (x, hi)));
            chart
                .draw_series(std::iter::once(Polygon::new(poly, l.color.mix(0.15))))
                .map_err(|e| err(&e))?;
        }
        let c = l.color;
        let drawn = chart
            .draw_series(LineSeries::new(
                l.points.clone(),
                ShapeStyle::from(&c).stroke_width(l.width),
            ))
            .map_err(|e| err(&e))?;
        if text {
            drawn.label(l.label.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3))
            });
        }
        chart
            .draw_series(l.points.iter().map(|&q| Circle::new(q, 3, c.filled())))
            .map_err(|e| err(&e))?;
    }
    for lv in &p.levels {
        let c = lv.color;
        let drawn = chart
            .draw_series(DashedLineSeries::new(
                [(x0, lv.y), (x1, lv.y)],
                8,
                5,
                ShapeStyle::from(&c).stroke_width(2),
            ))
            .map_err(|e| err(&e))?;
        if text {
            drawn.label(lv.label.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
            });
        }
    }
    if text {
        legend(&mut chart, &err)?;
    }
    Ok(())
}

type Chart<'a, X, Y> = ChartContext<'a, BitMapBackend<'a>, Cartesian2d<X, Y>>;

/// Without a font plotters cannot lay out a mesh (tick labels need one): a frame only.
fn frame<X, Y>(
    chart: &mut Chart<'_, X, Y>,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
    err: &dyn Fn(&dyn std::fmt::Display) -> anyhow::Error,
) -> anyhow::Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart
        .plotting_area()
        .draw(&Rectangle::new(
            [(x0, y0), (x1, y1)],
            ShapeStyle::from(&BLACK).stroke_width(1),
        ))
        .map_err(|e| err(&e))
}

fn legend<X, Y>(
    chart: &mut Chart<'_, X, Y>,
    err: &dyn Fn(&dyn std::fmt::Display) -> anyhow::Error,
) -> anyhow::Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))
}

/// A figure of `panels` side by side with an optional overall caption.
fn figure(path: &Path, caption: &str, panels: &[Panel<'_>], text: bool) -> anyhow::Result<()> {
    let err = draw_err(path);
    let w = 650 * panels.len() as u32;
    let root = BitMapBackend::new(path, (w, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let body = if text && !caption.is_empty() {
        root.titled(caption, ("sans-serif", 18))
            .map_err(|e| err(&e))?
    } else {
        root.clone()
    };
    for (area, p) in body.split_evenly((1, panels.len())).iter().zip(panels) {
        draw_panel(area, p, text, path)?;
    }
    root.present().map_err(|e| err(&e))
}

/// LPM memory against route count (`NAME.png`).
pub fn lpm_memory(path: &Path, rows: &[LpmRow], text: bool) -> anyhow::Result<()> {
    let rows: Vec<&LpmRow> = rows.iter().filter(|r| r.sweep).collect();
    if rows.is_empty() {
        bail!("no sweep rows in the lpm-bench results (run: weft lpm-bench --sweep --json)");
    }
    // weft first, then the peers by name; the same colour for an implementation in
    // both panels.
    let mut impls: Vec<&str> = rows
        .iter()
        .map(|r| r.implementation.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    impls.sort_by_key(|i| (*i != "weft", *i));
    let sources: BTreeSet<&str> = rows.iter().map(|r| r.source.as_str()).collect();
    let mut panels = Vec::new();
    for fam in ["ipv4", "ipv6"] {
        let mut lines = Vec::new();
        for (k, imp) in impls.iter().enumerate() {
            let mut points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.family == fam && r.implementation == *imp)
                .map(|r| (r.routes as f64, r.bytes as f64 / MIB))
                .collect();
            if points.is_empty() {
                continue;
            }
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let weft = *imp == "weft";
            lines.push(Line {
                label: (*imp).to_owned(),
                color: if weft { BLACK } else { color(k) },
                width: if weft { 3 } else { 2 },
                points,
                band: None,
            });
        }
        if lines.is_empty() {
            continue;
        }
        let mut levels = vec![Level {
            label: "4 MiB (NIC IMEM)".into(),
            y: 4.0,
            color: RED,
        }];
        if fam == "ipv6" {
            levels.push(Level {
                label: "8 MiB (IPv6 target)".into(),
                y: 8.0,
                color: RGBColor(255, 165, 0),
            });
        }
        panels.push(Panel {
            title: format!("{fam}: memory vs routes"),
            x_desc: "routes (log)",
            y_desc: "table memory [MiB, heap held after build] (log)",
            lines,
            levels,
        });
    }
    let caption = format!(
        "LPM table size vs number of routes (random subsets of {}), cf. P2PNIC Fig. 14",
        sources.into_iter().collect::<Vec<_>>().join(", ")
    );
    figure(path, &caption, &panels, text)
}

/// RFC 2544 results per forwarder (`NAME.png`).
pub fn router_e2e(path: &Path, rows: &[RouterRow], text: bool) -> anyhow::Result<()> {
    if rows.is_empty() {
        bail!("no RFC 2544 table rows (| forwarder | frame (B) | … | p99 (us) |)");
    }
    let mut forwarders: Vec<&str> = Vec::new();
    for r in rows {
        if !forwarders.contains(&r.forwarder.as_str()) {
            forwarders.push(&r.forwarder);
        }
    }
    let mut metrics: Vec<(&str, &str, Of<RouterRow>)> = vec![
        (
            "RFC 2544 throughput over veth",
            "zero-loss rate [kpps] (log)",
            |r| r.zero_loss_kpps,
        ),
        (
            "sustained rate",
            "flat-out sent × delivered [kpps] (log)",
            |r| r.sustained_kpps,
        ),
        (
            "latency at the zero-loss rate",
            "one-way latency p50 [µs] (log)",
            |r| r.p50_us,
        ),
    ];
    // The last panel compares at one offered load: rows measured at the reference's
    // rate, and the reference's (the forwarder with no such rows) at its own.
    let with_at: Vec<RouterRow>;
    let rows = if rows.iter().any(|r| r.at_p99_us.is_some()) {
        with_at = rows
            .iter()
            .map(|r| {
                let mut r = r.clone();
                let measured_at = rows
                    .iter()
                    .any(|o| o.forwarder == r.forwarder && o.at_p99_us.is_some());
                if !measured_at {
                    r.at_p99_us = r.p99_us;
                }
                r
            })
            .collect();
        &with_at[..]
    } else {
        rows
    };
    if rows.iter().any(|r| r.at_p99_us.is_some()) {
        metrics.push((
            "latency at the reference's zero-loss rate",
            "one-way latency p99 [µs] (log)",
            |r| r.at_p99_us.unwrap_or(f64::NAN),
        ));
    }
    let panels: Vec<Panel<'_>> = metrics
        .iter()
        .map(|(title, y_desc, value)| {
            let lines = forwarders
                .iter()
                .enumerate()
                .map(|(k, who)| {
                    let mut by_size: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
                    // A latency is NaN where nothing crossed: no point there.
                    for r in rows.iter().filter(|r| r.forwarder == *who) {
                        let v = value(r);
                        if v.is_finite() {
                            by_size.entry(r.frame).or_default().push(v);
                        }
                    }
                    let rounds = by_size.values().any(|v| v.len() > 1);
                    let stats: Vec<(f64, f64, f64, f64)> = by_size
                        .into_iter()
                        .map(|(s, mut v)| {
                            v.sort_by(f64::total_cmp);
                            let (lo, hi) = (v[0], v[v.len() - 1]);
                            (s as f64, median(&v), lo, hi)
                        })
                        .collect();
                    Line {
                        label: (*who).to_owned(),
                        color: color(k),
                        width: 2,
                        points: stats.iter().map(|&(s, m, _, _)| (s, m)).collect(),
                        band: rounds
                            .then(|| stats.iter().map(|&(s, _, lo, hi)| (s, lo, hi)).collect()),
                    }
                })
                .collect();
            Panel {
                title: (*title).to_owned(),
                x_desc: "frame size [bytes] (log)",
                y_desc,
                lines,
                levels: Vec::new(),
            }
        })
        .collect();
    figure(path, "", &panels, text)
}

/// The median of sorted, non-empty `v`.
pub(crate) fn median(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// weft-rpc beside gRPC for one workload (`NAME-MIX.png`): bars per concurrency, for
/// null RPCs of `size` bytes (metadata: any size), weft with `clusters` clusters.
pub fn rpc(
    path: &Path,
    rows: &[RpcRow],
    mix: &str,
    size: usize,
    clusters: usize,
    text: bool,
) -> anyhow::Result<()> {
    let rows: Vec<&RpcRow> = rows
        .iter()
        .filter(|r| r.mix == mix && (mix != "null" || r.size == size))
        .collect();
    let conc: Vec<(usize, usize)> = rows
        .iter()
        .map(|r| (r.clients, r.outstanding))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    type Pick = Box<dyn Fn(&RpcRow) -> bool>;
    let mut series: Vec<(String, Pick)> = vec![
        (
            "gRPC (tonic) tcp".into(),
            Box::new(|r| r.system == "grpc" && r.link == "tcp"),
        ),
        (
            "gRPC (tonic) unix socket".into(),
            Box::new(|r| r.system == "grpc" && r.link == "unix"),
        ),
    ];
    for link in ["udp", "shm"] {
        for (batch, label) in [
            ("off", ""),
            ("adaptive", " adaptive batching"),
            ("on", " batched"),
        ] {
            series.push((
                format!("weft {link}{label}"),
                Box::new(move |r| {
                    r.system == "weft"
                        && r.link == link
                        && r.batch() == batch
                        && r.clusters == clusters
                }),
            ));
        }
    }
    // The median of a series' rows at a concurrency (one row per `--rounds` round).
    let value = |pick: &Pick, c: (usize, usize), f: fn(&RpcRow) -> f64| {
        let mut v: Vec<f64> = rows
            .iter()
            .filter(|r| pick(r) && (r.clients, r.outstanding) == c)
            .map(|r| f(r))
            .collect();
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| median(&v))
    };
    let series: Vec<(String, Pick)> = series
        .into_iter()
        .filter(|(_, pick)| {
            conc.iter()
                .any(|&c| value(pick, c, |r| r.ops_per_s).is_some())
        })
        .collect();
    if series.is_empty() {
        bail!("no rpc-bench rows for the {mix} workload (size {size}, {clusters} clusters)");
    }
    let err = draw_err(path);
    let root = BitMapBackend::new(path, (1300, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let what = if mix == "null" {
        format!("null RPC {size} B")
    } else {
        format!("{mix} mix")
    };
    let body = if text {
        root.titled(
            &format!("weft-rpc vs gRPC (tonic), {what}, {clusters} cluster(s), same run"),
            ("sans-serif", 18),
        )
        .map_err(|e| err(&e))?
    } else {
        root.clone()
    };
    let panels: [(&str, Of<RpcRow>); 2] = [
        ("calls per second (higher is better)", |r| r.ops_per_s),
        ("p50 latency [µs] (lower is better)", |r| r.p50_us),
    ];
    let labels: Vec<String> = conc
        .iter()
        .map(|(c, o)| format!("{c} cl × {o} out"))
        .collect();
    for (area, (title, f)) in body.split_evenly((1, 2)).iter().zip(panels) {
        let vals = series
            .iter()
            .flat_map(|(_, pick)| conc.iter().filter_map(|&c| value(pick, c, f)));
        let Some((y0, y1)) = log_range(vals, 1.8) else {
            continue;
        };
        let mut builder = ChartBuilder::on(area);
        builder.margin(15);
        if text {
            builder
                .caption(title, ("sans-serif", 18))
                .x_label_area_size(40)
                .y_label_area_size(70);
        } else {
            builder.x_label_area_size(5).y_label_area_size(5);
        }
        let x_range = -0.5..conc.len() as f64 - 0.5;
        let mut chart: Chart<'_, RangedCoordf64, _> = builder
            .build_cartesian_2d(x_range.clone(), (y0..y1).log_scale())
            .map_err(|e| err(&e))?;
        if text {
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(conc.len().max(1))
                .x_label_formatter(&|x| {
                    let i = x.round();
                    if (x - i).abs() < 0.01 && i >= 0.0 {
                        labels.get(i as usize).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .y_label_formatter(&|y| crate::report::human_value(*y))
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(|e| err(&e))?;
        } else {
            frame(&mut chart, (x_range.start, x_range.end), (y0, y1), &err)?;
        }
        let width = 0.8 / series.len() as f64;
        for (k, (name, pick)) in series.iter().enumerate() {
            let c = color(k);
            let bars: Vec<Rectangle<(f64, f64)>> = conc
                .iter()
                .enumerate()
                .filter_map(|(j, &cc)| {
                    let v = value(pick, cc, f)?;
                    let x = j as f64 + (k as f64 - series.len() as f64 / 2.0) * width;
                    Some(Rectangle::new([(x, y0), (x + width, v)], c.filled()))
                })
                .collect();
            let drawn = chart.draw_series(bars).map_err(|e| err(&e))?;
            if text {
                drawn.label(name.clone()).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled())
                });
            }
        }
        if text {
            legend(&mut chart, &err)?;
        }
    }
    root.present().map_err(|e| err(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_tables_parse_rows_and_skip_everything_else() {
        let md = "# run\n\n| forwarder | frame (B) | zero-loss rate (kpps) | Mbit/s | flat-out sent (kpps) | flat-out delivered | latency p50 (us) | p99 (us) |\n|---|---|---|---|---|---|---|---|\n| linux kernel | 64 | 123.6 | 83.1 | 200.0 | 50.0% | 407 | 1052 |\n| weft push | 1518 | 80 | 971.5 | 81.0 | 100.0% | 55 | 90 |\n| a | b |\n";
        let rows = parse_router_tables(md);
        assert_eq!(
            rows,
            vec![
                RouterRow {
                    forwarder: "linux kernel".into(),
                    frame: 64,
                    zero_loss_kpps: 123.6,
                    sustained_kpps: 100.0,
                    p50_us: 407.0,
                    p99_us: Some(1052.0),
                    at_kpps: None,
                    at_p50_us: None,
                    at_p99_us: None,
                    at_lost: None,
                    cpu_ns_per_pkt_all: None,
                    cpu_ns_per_pkt_router_core: None,
                    at_cpu_ns_per_pkt_all: None,
                    at_cpu_ns_per_pkt_router_core: None,
                },
                RouterRow {
                    forwarder: "weft push".into(),
                    frame: 1518,
                    zero_loss_kpps: 80.0,
                    sustained_kpps: 81.0,
                    p50_us: 55.0,
                    p99_us: Some(90.0),
                    at_kpps: None,
                    at_p50_us: None,
                    at_p99_us: None,
                    at_lost: None,
                    cpu_ns_per_pkt_all: None,
                    cpu_ns_per_pkt_router_core: None,
                    at_cpu_ns_per_pkt_all: None,
                    at_cpu_ns_per_pkt_router_core: None,
                },
            ]
        );
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[1.0, 2.0, 10.0]), 2.0);
        assert_eq!(median(&[1.0, 3.0]), 2.0);
    }
}

/// One throughput row of `weft router bench --cluster --json`.
#[derive(Debug, Clone, Deserialize)]
pub struct ClusterRow {
    pub interconnect: String,
    pub size: u64,
    pub batch: u64,
    pub mode: String,
    pub mpps: f64,
    #[serde(default)]
    pub round: u64,
}

/// One row of `weft router bench --cluster --latency --json`.
#[derive(Debug, Clone, Deserialize)]
pub struct ClusterLatencyRow {
    pub path: String,
    pub interconnect: String,
    pub size: u64,
    pub batch: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    #[serde(default)]
    pub round: u64,
}

/// Median, lowest and highest of `v` (unsorted, non-empty).
fn spread(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (median(&v), v[0], v[v.len() - 1])
}

/// A line of medians over rounds with a band from the lowest to the highest.
fn median_line(label: String, color: RGBColor, by_x: BTreeMap<u64, Vec<f64>>) -> Option<Line> {
    let stats: Vec<(f64, f64, f64, f64)> = by_x
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(x, v)| {
            let (m, lo, hi) = spread(v);
            (x as f64, m, lo, hi)
        })
        .collect();
    if stats.is_empty() {
        return None;
    }
    let rounds = stats.iter().any(|s| s.2 != s.3);
    Some(Line {
        label,
        color,
        width: 2,
        points: stats.iter().map(|&(x, m, _, _)| (x, m)).collect(),
        band: rounds.then(|| stats.iter().map(|&(x, _, lo, hi)| (x, lo, hi)).collect()),
    })
}

/// The cluster interconnect's plots (docs/results/cluster.md): `NAME-rate.png`
/// (packet rate against size per mode, at the largest batch, one panel per
/// interconnect), `NAME-ratio.png` (`sge` ÷ `unbatched` per size, the ratio taken
/// within each round, with the paper's 3.7×), `NAME-latency.png` (one-way p50
/// against batch, one panel per path). Medians over rounds, bands from the lowest to
/// the highest. Returns the files written.
pub fn cluster(
    out: &Path,
    name: &str,
    rows: &[ClusterRow],
    lat: &[ClusterLatencyRow],
    text: bool,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut written = Vec::new();
    let links: Vec<&str> = ["udp", "shm"]
        .into_iter()
        .filter(|l| rows.iter().any(|r| r.interconnect == *l))
        .collect();
    if !rows.is_empty() {
        let top = rows
            .iter()
            .filter(|r| r.mode != "unbatched")
            .map(|r| r.batch)
            .max()
            .unwrap_or(1);
        let mut panels = Vec::new();
        for link in &links {
            let mut lines = Vec::new();
            for (k, (mode, batch)) in [("sge", top), ("memcpy", top), ("unbatched", 1)]
                .into_iter()
                .enumerate()
            {
                let mut by: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
                for r in rows
                    .iter()
                    .filter(|r| r.interconnect == *link && r.mode == mode && r.batch == batch)
                {
                    by.entry(r.size).or_default().push(r.mpps);
                }
                let label = if mode == "unbatched" {
                    "unbatched (1 packet per SEND)".to_owned()
                } else {
                    format!("{mode}, {batch} packets per SEND")
                };
                lines.extend(median_line(label, color(k), by));
            }
            panels.push(Panel {
                title: format!("{link}: packet rate vs size"),
                x_desc: "packet size [bytes] (log)",
                y_desc: "Mpps arrived (log)",
                lines,
                levels: Vec::new(),
            });
        }
        let path = out.join(format!("{name}-rate.png"));
        figure(
            &path,
            "cluster interconnect (weft-verbs UC SEND/RECV): median of rounds",
            &panels,
            text,
        )?;
        written.push(path);
        // The ratio within each round (sge and unbatched ran next to each other).
        let mut panels = Vec::new();
        let mut lines = Vec::new();
        for (k, link) in links.iter().enumerate() {
            let mut by: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
            for s in rows
                .iter()
                .filter(|r| r.interconnect == *link && r.mode == "sge" && r.batch == top)
            {
                let u = rows.iter().find(|u| {
                    u.interconnect == *link
                        && u.mode == "unbatched"
                        && u.size == s.size
                        && u.round == s.round
                });
                if let Some(u) = u.filter(|u| u.mpps > 0.0) {
                    by.entry(s.size).or_default().push(s.mpps / u.mpps);
                }
            }
            lines.extend(median_line(
                format!("{link}: sge@{top} ÷ unbatched"),
                color(k),
                by,
            ));
        }
        panels.push(Panel {
            title: "hardware-assisted batching: speed-up over one SEND per packet".into(),
            x_desc: "packet size [bytes] (log)",
            y_desc: "ratio of packet rates (log)",
            lines,
            levels: vec![Level {
                label: "3.7× (the paper's lowest, ≤ 256 B)".into(),
                y: 3.7,
                color: RED,
            }],
        });
        let path = out.join(format!("{name}-ratio.png"));
        figure(&path, "", &panels, text)?;
        written.push(path);
    }
    if !lat.is_empty() {
        let mut panels = Vec::new();
        for path_kind in ["interconnect", "router"] {
            let mine: Vec<&ClusterLatencyRow> =
                lat.iter().filter(|r| r.path == path_kind).collect();
            if mine.is_empty() {
                continue;
            }
            let series: BTreeSet<(String, u64)> = mine
                .iter()
                .map(|r| (r.interconnect.clone(), r.size))
                .collect();
            let mut lines = Vec::new();
            for (k, (link, size)) in series.into_iter().enumerate() {
                for (q, of) in [("p50", 0usize), ("p99", 1)] {
                    let mut by: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
                    for r in mine
                        .iter()
                        .filter(|r| r.interconnect == link && r.size == size)
                    {
                        let v = if of == 0 { r.p50_us } else { r.p99_us };
                        if v.is_finite() {
                            by.entry(r.batch).or_default().push(v);
                        }
                    }
                    if let Some(mut l) = median_line(format!("{link} {size} B {q}"), color(k), by) {
                        if of == 1 {
                            l.width = 1;
                            l.band = None;
                        }
                        lines.push(l);
                    }
                }
            }
            panels.push(Panel {
                title: if path_kind == "router" {
                    "through two cluster nodes (batch = the plan's)".into()
                } else {
                    "one SEND of a full batch (the paper's Fig. 10)".into()
                },
                x_desc: "packets per SEND (log)",
                y_desc: "one-way latency, ((t4−t1)−(t3−t2))/2 [µs] (log)",
                lines,
                levels: Vec::new(),
            });
        }
        let path = out.join(format!("{name}-latency.png"));
        figure(
            &path,
            "one-way latency at low load: median of rounds",
            &panels,
            text,
        )?;
        written.push(path);
    }
    Ok(written)
}

/// A Fig. 5 panel: its title, y axis, the number it shows of a row, and a reference
/// level with its label.
type Fig5Metric = (
    &'static str,
    &'static str,
    Of<crate::study::Row>,
    Option<(f64, &'static str)>,
);

/// `weft study` rows' plots (docs/results/study.md), one PNG per figure:
/// `NAME-fig1.png` … `NAME-fig4.png` (p50, p90 and MB/s against the size, a line per
/// verb), `NAME-fig5.png` (the small operations' rate and p99 beside the 4 MB flow,
/// each ÷ its value alone, and Jain's index, a line per verb and scheduler, against
/// the small operations' size) and `NAME-mtu.png` (p50 and p99 against the path MTU,
/// alone and beside the flow). Rows that failed are left out. Returns the files
/// written.
pub fn study(
    out: &Path,
    name: &str,
    rows: &[crate::study::Row],
    text: bool,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    use crate::study::Row;
    let ok: Vec<&Row> = rows.iter().filter(|r| r.error.is_none()).collect();
    let mut verbs: Vec<&str> = Vec::new();
    for r in &ok {
        if !verbs.contains(&r.verb.as_str()) {
            verbs.push(&r.verb);
        }
    }
    let line_of = |label: String, k: usize, pts: Vec<(f64, f64)>| Line {
        label,
        color: color(k),
        width: 2,
        points: pts,
        band: None,
    };
    let mut written = Vec::new();
    for fig in ["fig1", "fig2", "fig3", "fig4"] {
        let mine: Vec<&&Row> = ok.iter().filter(|r| r.figure == fig).collect();
        if mine.is_empty() {
            continue;
        }
        let metrics: [(&str, &str, Of<Row>); 3] = [
            ("p50", "p50 latency, post to data here [µs] (log)", |r| {
                r.p50_us.unwrap_or(f64::NAN)
            }),
            ("p90", "p90 latency [µs] (log)", |r| {
                r.p90_us.unwrap_or(f64::NAN)
            }),
            ("MB/s", "fetched MB/s (log)", |r| {
                r.mb_per_s.unwrap_or(f64::NAN)
            }),
        ];
        let mut panels = Vec::new();
        for (what, y_desc, of) in metrics {
            let mut lines = Vec::new();
            // One point per size: the median of the rounds (`--fig-rounds`), with a
            // band from the lowest to the highest.
            for (k, v) in verbs.iter().enumerate() {
                let mut by_size: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
                for r in mine.iter().filter(|r| r.verb == *v) {
                    let y = of(r);
                    if y.is_finite() && y > 0.0 {
                        by_size.entry(r.size).or_default().push(y);
                    }
                }
                lines.extend(median_line((*v).to_owned(), color(k), by_size));
            }
            panels.push(Panel {
                title: what.to_owned(),
                x_desc: "bytes fetched (log)",
                y_desc,
                lines,
                levels: Vec::new(),
            });
        }
        let r0 = mine[0];
        let caption = format!(
            "{fig}: {} in flight, {} CPU hogs, {} link",
            r0.outstanding, r0.hogs, r0.link
        );
        let path = out.join(format!("{name}-{fig}.png"));
        figure(&path, &caption, &panels, text)?;
        written.push(path);
    }
    let fig5: Vec<&&Row> = ok.iter().filter(|r| r.figure == "fig5").collect();
    if !fig5.is_empty() {
        let mut series: Vec<(String, String)> = Vec::new();
        for r in &fig5 {
            let s = (r.verb.clone(), r.scheduler.clone());
            if !series.contains(&s) {
                series.push(s);
            }
        }
        let metrics: [Fig5Metric; 3] = [
            (
                "small operations' rate beside the flow ÷ alone",
                "ratio (log)",
                |r| match (r.ops_per_s, r.isolated_ops_per_s) {
                    (Some(x), Some(y)) if y > 0.0 => x / y,
                    _ => f64::NAN,
                },
                None,
            ),
            (
                "small operations' p99 beside the flow ÷ alone",
                "ratio (log)",
                |r| r.p99_ratio.unwrap_or(f64::NAN),
                Some((2.0, "2× (the issue's bound)")),
            ),
            (
                "Jain's index of the two flows' shares",
                "index (log)",
                |r| r.jain.unwrap_or(f64::NAN),
                Some((0.95, "0.95 (the issue's bound)")),
            ),
        ];
        let mut panels = Vec::new();
        for (title, y_desc, of, level) in metrics {
            let mut lines = Vec::new();
            for (k, (v, sched)) in series.iter().enumerate() {
                let mut pts: Vec<(f64, f64)> = fig5
                    .iter()
                    .filter(|r| &r.verb == v && &r.scheduler == sched)
                    .map(|r| (r.size as f64, of(r)))
                    .filter(|p| p.1.is_finite() && p.1 > 0.0)
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                if !pts.is_empty() {
                    let mut l = line_of(format!("{v} {sched}"), k, pts);
                    if sched == "fifo" {
                        l.width = 1;
                    }
                    lines.push(l);
                }
            }
            panels.push(Panel {
                title: title.to_owned(),
                x_desc: "small operation's size [bytes] (log)",
                y_desc,
                lines,
                levels: level
                    .map(|(y, label)| Level {
                        label: label.to_owned(),
                        y,
                        color: RED,
                    })
                    .into_iter()
                    .collect(),
            });
        }
        let r0 = fig5[0];
        let caption = format!(
            "fig5: {} in flight beside {} B WRITEs, DRR against FIFO, {} link",
            r0.outstanding,
            r0.bulk_size.unwrap_or(0),
            r0.link
        );
        let path = out.join(format!("{name}-fig5.png"));
        figure(&path, &caption, &panels, text)?;
        written.push(path);
    }
    let mtu: Vec<&&Row> = ok.iter().filter(|r| r.figure == "mtu").collect();
    if !mtu.is_empty() {
        let sets: [(&str, Of<Row>); 4] = [
            ("p99 beside the flow", |r| r.p99_us.unwrap_or(f64::NAN)),
            ("p99 alone", |r| r.isolated_p99_us.unwrap_or(f64::NAN)),
            ("p50 beside the flow", |r| r.p50_us.unwrap_or(f64::NAN)),
            ("bulk MB/s beside", |r| r.bulk_mb_per_s.unwrap_or(f64::NAN)),
        ];
        let mut lat = Vec::new();
        let mut rate = Vec::new();
        for (k, (label, of)) in sets.into_iter().enumerate() {
            let mut pts: Vec<(f64, f64)> = mtu
                .iter()
                .map(|r| (r.mtu as f64, of(r)))
                .filter(|p| p.1.is_finite() && p.1 > 0.0)
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            if !pts.is_empty() {
                let l = line_of(label.to_owned(), k, pts);
                if k == 3 {
                    rate.push(l);
                } else {
                    lat.push(l);
                }
            }
        }
        let r0 = mtu[0];
        let panels = [
            Panel {
                title: format!("{} of {} B, one at a time", r0.verb, r0.size),
                x_desc: "path MTU [bytes] (log)",
                y_desc: "latency, post to data here [µs] (log)",
                lines: lat,
                levels: Vec::new(),
            },
            Panel {
                title: format!("the {} B WRITE flow", r0.bulk_size.unwrap_or(0)),
                x_desc: "path MTU [bytes] (log)",
                y_desc: "MB/s (log)",
                lines: rate,
                levels: Vec::new(),
            },
        ];
        let path = out.join(format!("{name}-mtu.png"));
        figure(
            &path,
            &format!(
                "small-operation latency against the path MTU, {} link",
                r0.link
            ),
            &panels,
            text,
        )?;
        written.push(path);
    }
    let phased: Vec<&&Row> = ok.iter().filter(|r| r.figure == "phased").collect();
    if !phased.is_empty() {
        let phases: [(&str, &str, &str, Of<Row>); 4] = [
            (
                "idle",
                "idle: 10 ms pauses",
                "cores both processes used (log)",
                |r| r.cpu_cores.unwrap_or(f64::NAN),
            ),
            (
                "saturated",
                "saturated: 16 in flight",
                "operations/s (log)",
                |r| r.ops_per_s.unwrap_or(f64::NAN),
            ),
            (
                "hogs",
                "one at a time beside CPU hogs",
                "mean round trip [µs] (log; one point per window)",
                |r| r.rtt_mean_us().unwrap_or(f64::NAN),
            ),
            (
                "background",
                "16 in flight beside 4 MB WRITEs",
                "p99 [µs] (log)",
                |r| r.p99_us.unwrap_or(f64::NAN),
            ),
        ];
        let mut configs: Vec<&str> = Vec::new();
        for r in &phased {
            if !configs.contains(&r.verb.as_str()) {
                configs.push(&r.verb);
            }
        }
        let mut panels = Vec::new();
        for (phase, title, y_desc, of) in phases {
            let mut lines = Vec::new();
            for (k, c) in configs.iter().enumerate() {
                let mut pts: Vec<(f64, f64)> = phased
                    .iter()
                    .filter(|r| r.verb == *c && r.phase.as_deref() == Some(phase))
                    .filter_map(|r| Some((f64::from(r.round?), of(r))))
                    .filter(|p| p.1.is_finite() && p.1 > 0.0)
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                if !pts.is_empty() {
                    let mut l = line_of((*c).to_owned(), k, pts);
                    if *c == "adaptive" {
                        l.width = 4;
                    }
                    lines.push(l);
                }
            }
            panels.push(Panel {
                title: title.to_owned(),
                x_desc: "round (configurations in alternating order)",
                y_desc,
                lines,
                levels: Vec::new(),
            });
        }
        let caption = format!(
            "the adaptive run: each phase, every configuration, {} link",
            phased[0].link
        );
        let path = out.join(format!("{name}-phased.png"));
        figure(&path, &caption, &panels, text)?;
        written.push(path);
    }
    Ok(written)
}

//! `weft report`: benchmark results → PNG plots (and for perf records a markdown
//! table). The one plotting path of the project: each input file is recognised by
//! what it holds —
//! - perf records (`weft perf --json`, `weft baseline --json`, scripts/peers.sh):
//!   `NAME-latency.png`, `NAME-latency-p99.png`, `NAME-bandwidth.png`, `NAME.md`, below;
//! - `weft lpm-bench --sweep --json` rows: `NAME.png`, memory against route count;
//! - `weft rpc-bench --json` rows: `NAME-null.png`, `NAME-metadata.png`, weft-rpc beside
//!   gRPC;
//! - RFC 2544 results, markdown tables or `weft router rfc2544 --json` rows
//!   (scripts/router-e2e.sh): `NAME.png`, and on stdout the medians of the rounds with
//!   their ratios to the kernel ([`router_summary`]);
//! - `weft study --json` rows (marked by `study` and `figure`): `NAME-fig1.png` …
//!   `NAME-fig5.png`, `NAME-mtu.png` and `NAME-phased.png` ([`plots::study`]; the
//!   phased summary lines are skipped);
//!
//! the last three in `plots.rs`.
//!
//! Perf records: one series per system/link and test (plus the QP type for weft, and
//! "(symmetric)" or "(full rtt)" for a method other than half the round trip; see
//! [`Record::series`]), so that two tests of one system never share a column,
//! log-log against message size:
//! - `<name>-latency.png`: one-way latency, the median where a tool gives it, else the
//!   mean (the legend says "(mean)");
//! - `<name>-latency-p99.png`: the 99th percentile, for the series that have one;
//! - `<name>-bandwidth.png`: MB/s, MB = 10^6 bytes;
//! - `<name>.md`: the same numbers as tables, each cell with its ratio to the
//!   reference series (`--reference`, default ucx-posix/shm when present), and the
//!   runs that failed with their error.
//!
//! Plots are drawn in pure Rust (plotters' bitmap backend). Text needs a TrueType
//! font, loaded at run time from /usr/share/fonts (Debian's fonts-dejavu-core,
//! installed by scripts/setup.sh); without one the plots are drawn without text and
//! a warning says so.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::perf::record::{parse_lines, Record};
use crate::plots;
use anyhow::{anyhow, Context};
use plotters::prelude::*;

/// Arguments of `weft report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Result files: JSON lines of `weft perf --json`, `weft baseline --json`,
    /// scripts/peers.sh, `weft lpm-bench --sweep --json`, `weft rpc-bench --json` or
    /// `weft router rfc2544 --json`, or markdown RFC 2544 tables.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Directory for the plots and the markdown.
    #[arg(long, default_value = "docs/results")]
    pub out: PathBuf,
    /// File name (prefix) of the outputs: NAME-latency.png … for perf records, NAME.png
    /// for an LPM sweep or RFC 2544 tables, NAME-MIX.png for rpc-bench rows.
    #[arg(long, default_value = "perf")]
    pub name: String,
    /// rpc-bench rows: the null RPC's payload size to plot (default: the largest).
    #[arg(long)]
    pub rpc_size: Option<usize>,
    /// rpc-bench rows: weft's server clusters to plot.
    #[arg(long, default_value_t = 1)]
    pub rpc_clusters: usize,
    /// The series the tables' ratios are against: a whole series name
    /// ("ucx-posix/shm tag_lat") or its system/link ("ucx-posix/shm", then in each
    /// table the first series of that system/link). Default: ucx-posix/shm if
    /// present, else the first series. For RFC 2544 rows: the forwarder the others
    /// are compared with (default "linux kernel").
    #[arg(long)]
    pub reference: Option<String>,
    /// Draw the plots without any text (what happens anyway when no font is found).
    #[arg(long)]
    pub no_text: bool,
    /// Do not list the files written on stdout.
    #[arg(short, long)]
    pub quiet: bool,
}

/// TrueType fonts tried in order.
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
];

/// Registers the first font found as plotters' "sans-serif". Leaks the font bytes
/// (plotters keeps a `'static` reference), once per process.
fn load_font() -> Option<&'static str> {
    static LOADED: std::sync::OnceLock<Option<&'static str>> = std::sync::OnceLock::new();
    *LOADED.get_or_init(|| {
        for path in FONTS {
            let Ok(bytes) = std::fs::read(path) else {
                continue;
            };
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return Some(*path);
            }
        }
        None
    })
}

/// Which number of a record a plot or table shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metric {
    /// Median one-way latency; the mean where the tool gives no median.
    LatencyTypical,
    LatencyMean,
    LatencyP99,
    Bandwidth,
}

impl Metric {
    /// The value, and whether it is a stand-in (the mean for a missing median).
    fn of(self, r: &Record) -> Option<(f64, bool)> {
        match self {
            Metric::LatencyTypical => {
                let l = r.latency.as_ref()?;
                Some(l.p50_us.map_or((l.mean_us, true), |p| (p, false)))
            }
            Metric::LatencyMean => Some((r.latency.as_ref()?.mean_us, false)),
            Metric::LatencyP99 => Some((r.latency.as_ref()?.p99_us?, false)),
            Metric::Bandwidth => Some((r.bandwidth.as_ref()?.mb_per_s, false)),
        }
    }
    fn axis(self) -> &'static str {
        match self {
            Metric::LatencyTypical => "one-way latency, median [µs] (log)",
            Metric::LatencyMean => "one-way latency, mean [µs] (log)",
            Metric::LatencyP99 => "one-way latency, p99 [µs] (log)",
            Metric::Bandwidth => "bandwidth [MB/s, MB = 10^6 B] (log)",
        }
    }
}

/// Series name → size → record (the last record wins when a size repeats).
type Table = BTreeMap<String, BTreeMap<u64, Record>>;

/// Series names in order of first appearance.
fn order(records: &[Record]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in records {
        let s = r.series();
        if !v.contains(&s) {
            v.push(s);
        }
    }
    v
}

fn table(records: &[Record], metric: Metric) -> Table {
    let mut t = Table::new();
    for r in records {
        if metric.of(r).is_some() {
            t.entry(r.series()).or_default().insert(r.size, r.clone());
        }
    }
    t
}

/// Fixed colours (Tableau 10), assigned in series order.
const COLORS: &[(u8, u8, u8)] = &[
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

fn color_of(series: &str, all: &[String]) -> RGBColor {
    color(all.iter().position(|s| s == series).unwrap_or(0))
}

/// The `i`-th colour of the palette every plot uses.
pub(crate) fn color(i: usize) -> RGBColor {
    let (r, g, b) = COLORS[i % COLORS.len()];
    RGBColor(r, g, b)
}

fn human_size(x: f64) -> String {
    let x = x.round() as u64;
    if x >= 1 << 20 && x % (1 << 20) == 0 {
        format!("{}M", x >> 20)
    } else if x >= 1 << 10 && x % (1 << 10) == 0 {
        format!("{}K", x >> 10)
    } else {
        x.to_string()
    }
}

pub(crate) fn human_value(y: f64) -> String {
    if y >= 100.0 {
        format!("{y:.0}")
    } else if y >= 1.0 {
        format!("{y:.1}")
    } else {
        format!("{y:.2}")
    }
}

/// Draws one log-log plot of `metric` for every series that has it. Returns false
/// when there was nothing to draw.
fn plot(
    path: &Path,
    title: &str,
    records: &[Record],
    metric: Metric,
    all_series: &[String],
    text: bool,
) -> anyhow::Result<bool> {
    let t = table(records, metric);
    if t.is_empty() {
        return Ok(false);
    }
    let points = t.values().flat_map(|m| {
        m.values()
            .filter_map(move |r| metric.of(r).map(|(y, _)| (r.size as f64, y)))
    });
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in points {
        x0 = x0.min(x);
        x1 = x1.max(x);
        if y > 0.0 {
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
    }
    if y0 > y1 {
        return Ok(false);
    }
    let (x0, x1) = (x0 / 1.5, x1 * 1.5);
    let (y0, y1) = (y0 / 2.0, y1 * 2.0);
    let err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());

    let root = BitMapBackend::new(path, (1100, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(20);
    if text {
        builder
            .caption(title, ("sans-serif", 26))
            .x_label_area_size(50)
            .y_label_area_size(80);
    } else {
        builder.x_label_area_size(5).y_label_area_size(5);
    }
    // Message sizes are powers of two: tick them at every third power (2, 16, 128,
    // 1K, …) instead of at powers of ten. Without text no tick at all: a tick label
    // needs a font even when it is empty.
    let x_ticks: Vec<f64> = (1..=30)
        .step_by(3)
        .map(|p| f64::from(1u32 << p))
        .filter(|&x| x >= x0 && x <= x1 && text)
        .collect();
    let mut chart = builder
        .build_cartesian_2d(
            (x0..x1).log_scale().with_key_points(x_ticks),
            (y0..y1).log_scale(),
        )
        .map_err(|e| err(&e))?;
    if text {
        chart
            .configure_mesh()
            .x_desc("message size [bytes] (log)")
            .y_desc(metric.axis())
            .x_label_formatter(&|x| human_size(*x))
            .y_label_formatter(&|y| human_value(*y))
            .label_style(("sans-serif", 16))
            .axis_desc_style(("sans-serif", 18))
            .draw()
            .map_err(|e| err(&e))?;
    } else {
        // plotters' mesh always lays out tick labels, which needs a font: without
        // one, only a frame around the lines.
        chart
            .plotting_area()
            .draw(&Rectangle::new(
                [(x0, y0), (x1, y1)],
                ShapeStyle::from(&BLACK).stroke_width(1),
            ))
            .map_err(|e| err(&e))?;
    }
    for (series, by_size) in all_series.iter().filter_map(|s| t.get(s).map(|m| (s, m))) {
        let c = color_of(series, all_series);
        let pts: Vec<(f64, f64)> = by_size
            .values()
            .filter_map(|r| metric.of(r).map(|(y, _)| (r.size as f64, y)))
            .filter(|&(_, y)| y > 0.0)
            .collect();
        let stand_in = by_size
            .values()
            .any(|r| metric.of(r).is_some_and(|(_, m)| m));
        let label = if stand_in {
            format!("{series} (mean)")
        } else {
            series.clone()
        };
        let style =
            ShapeStyle::from(&c).stroke_width(if series.starts_with("weft/") { 3 } else { 2 });
        let line = chart
            .draw_series(LineSeries::new(pts.clone(), style))
            .map_err(|e| err(&e))?;
        if text {
            line.label(label).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3))
            });
        }
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(|e| err(&e))?;
    }
    if text {
        chart
            .configure_series_labels()
            // Latency grows with size and bandwidth too: the empty corner is the
            // lower right for latency and the upper left for bandwidth.
            .position(if metric == Metric::Bandwidth {
                SeriesLabelPosition::UpperLeft
            } else {
                SeriesLabelPosition::LowerRight
            })
            .label_font(("sans-serif", 15))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(true)
}

/// A markdown table of `metric`: one row per size, one column per series, each cell
/// the value and its ratio to the reference series at that size.
fn md_table(
    md: &mut String,
    records: &[Record],
    metric: Metric,
    order: &[String],
    reference: &str,
) {
    let t = table(records, metric);
    let cols: Vec<&String> = order.iter().filter(|s| t.contains_key(*s)).collect();
    if cols.is_empty() {
        return;
    }
    let sizes: BTreeSet<u64> = t.values().flat_map(|m| m.keys().copied()).collect();
    let reference = reference_column(&cols, reference).unwrap_or(reference);
    let _ = write!(md, "| size |");
    for c in &cols {
        let _ = write!(md, " {c} |");
    }
    let _ = write!(md, "\n| ---: |");
    for _ in &cols {
        let _ = write!(md, " ---: |");
    }
    md.push('\n');
    for size in sizes {
        let refv = t
            .get(reference)
            .and_then(|m| m.get(&size))
            .and_then(|r| metric.of(r));
        let _ = write!(md, "| {} |", human_size(size as f64));
        for c in &cols {
            match t[*c].get(&size).and_then(|r| metric.of(r)) {
                Some((v, stand_in)) => {
                    let mark = if stand_in { "†" } else { "" };
                    match refv {
                        Some((rv, _)) if rv > 0.0 && c.as_str() != reference => {
                            let _ = write!(md, " {}{mark} ({:.2}x) |", fmt_num(v), v / rv);
                        }
                        _ => {
                            let _ = write!(md, " {}{mark} |", fmt_num(v));
                        }
                    }
                }
                None => md.push_str(" – |"),
            }
        }
        md.push('\n');
    }
    md.push('\n');
}

/// The column a table's ratios are against: the series named `reference`, else the
/// first whose system/link is `reference`.
fn reference_column<'a>(cols: &[&'a String], reference: &str) -> Option<&'a str> {
    cols.iter()
        .find(|c| c.as_str() == reference)
        .or_else(|| cols.iter().find(|c| Record::series_prefix(c) == reference))
        .map(|c| c.as_str())
}

fn fmt_num(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// What the input files held, by kind.
#[derive(Debug, Default)]
struct Inputs {
    perf: Vec<Record>,
    lpm: Vec<plots::LpmRow>,
    rpc: Vec<plots::RpcRow>,
    router: Vec<plots::RouterRow>,
    cluster: Vec<plots::ClusterRow>,
    cluster_latency: Vec<plots::ClusterLatencyRow>,
    study: Vec<crate::study::Row>,
}

/// Reads every file, recognising each by its content: markdown tables (`.md`) are
/// RFC 2544 results; in JSON lines, a row with `study` and `figure` is `weft
/// study`'s, one with `impl` and `routes` lpm-bench's,
/// one with `ops_per_s` and `mix` rpc-bench's, one with `forwarder` and
/// `zero_loss_kpps` `weft router rfc2544 --json`'s; anything else must be a perf
/// record.
fn read_inputs(files: &[PathBuf]) -> anyhow::Result<Inputs> {
    let mut inputs = Inputs::default();
    for f in files {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        if f.extension().is_some_and(|e| e == "md") {
            inputs.router.extend(plots::parse_router_tables(&text));
            continue;
        }
        let mut perf = String::new();
        for (n, line) in text.lines().enumerate() {
            let v: serde_json::Value = match serde_json::from_str(line) {
                Ok(v) => v,
                // Blank and non-JSON lines are the perf parser's to judge.
                Err(_) => {
                    perf.push_str(line);
                    perf.push('\n');
                    continue;
                }
            };
            let at = || format!("{}:{}", f.display(), n + 1);
            if v.get("study").and_then(|s| s.as_str()) == Some("weft-phased-summary") {
                // `weft study`'s phased summary: derived from the rows beside it.
                continue;
            }
            if v.get("study").is_some() && v.get("figure").is_some() {
                inputs
                    .study
                    .push(serde_json::from_value(v).with_context(at)?);
            } else if v.get("impl").is_some() && v.get("routes").is_some() {
                inputs.lpm.push(serde_json::from_value(v).with_context(at)?);
            } else if v.get("ops_per_s").is_some() && v.get("mix").is_some() {
                inputs.rpc.push(serde_json::from_value(v).with_context(at)?);
            } else if v.get("kind").and_then(|k| k.as_str()) == Some("latency") {
                inputs
                    .cluster_latency
                    .push(serde_json::from_value(v).with_context(at)?);
            } else if v.get("kind").and_then(|k| k.as_str()) == Some("balance") {
                // `--balance` rows are tables (docs/results/cluster.md), not plots.
            } else if v.get("interconnect").is_some() && v.get("mode").is_some() {
                inputs
                    .cluster
                    .push(serde_json::from_value(v).with_context(at)?);
            } else if v.get("forwarder").is_some() && v.get("zero_loss_kpps").is_some() {
                let row: crate::router::Rfc2544Row = serde_json::from_value(v).with_context(at)?;
                inputs.router.push(row.into());
            } else {
                perf.push_str(line);
                perf.push('\n');
            }
        }
        let rs = parse_lines(&perf).map_err(|e| anyhow!("{}: {e}", f.display()))?;
        inputs.perf.extend(rs);
    }
    Ok(inputs)
}

/// Run `weft report`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let inputs = read_inputs(&args.files)?;
    if inputs.perf.is_empty()
        && inputs.lpm.is_empty()
        && inputs.rpc.is_empty()
        && inputs.router.is_empty()
        && inputs.cluster.is_empty()
        && inputs.cluster_latency.is_empty()
        && inputs.study.is_empty()
    {
        anyhow::bail!("no records in the given files");
    }
    if !inputs.lpm.is_empty() && !inputs.router.is_empty() {
        anyhow::bail!(
            "an LPM sweep and RFC 2544 tables would both be NAME.png: report them in two runs"
        );
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let text = !args.no_text
        && match load_font() {
            Some(_) => true,
            None => {
                eprintln!(
                    "weft report: no TrueType font in {FONTS:?} (Debian: fonts-dejavu-core); plots without text"
                );
                false
            }
        };
    let mut written = Vec::new();
    let single = args.out.join(format!("{}.png", args.name));
    if !inputs.lpm.is_empty() {
        plots::lpm_memory(&single, &inputs.lpm, text)?;
        written.push(single.clone());
    }
    if !inputs.router.is_empty() {
        plots::router_e2e(&single, &inputs.router, text)?;
        written.push(single.clone());
        // On stdout, not in a file: NAME.md beside the plot is a hand-written results
        // document for RFC 2544 runs (docs/results/router-e2e.md …).
        let reference = args.reference.as_deref().unwrap_or(KERNEL_FORWARDER);
        print!("{}", router_summary(&inputs.router, reference));
    }
    if !inputs.cluster.is_empty() || !inputs.cluster_latency.is_empty() {
        written.extend(plots::cluster(
            &args.out,
            &args.name,
            &inputs.cluster,
            &inputs.cluster_latency,
            text,
        )?);
    }
    if !inputs.study.is_empty() {
        written.extend(plots::study(&args.out, &args.name, &inputs.study, text)?);
        print!("{}", study_figs_summary(&inputs.study));
    }
    let mixes: BTreeSet<&str> = inputs.rpc.iter().map(|r| r.mix.as_str()).collect();
    for mix in mixes {
        let size = args.rpc_size.unwrap_or_else(|| {
            inputs
                .rpc
                .iter()
                .filter(|r| r.mix == "null")
                .map(|r| r.size)
                .max()
                .unwrap_or(0)
        });
        let path = args.out.join(format!("{}-{mix}.png", args.name));
        plots::rpc(&path, &inputs.rpc, mix, size, args.rpc_clusters, text)?;
        written.push(path);
    }
    if !inputs.perf.is_empty() {
        written.extend(perf_report(&args, &inputs.perf, text)?);
    }
    if !args.quiet {
        for p in &written {
            println!("{}", p.display());
        }
    }
    Ok(())
}

/// The perf records' plots and markdown; returns the files written.
fn perf_report(args: &Args, records: &[Record], text: bool) -> anyhow::Result<Vec<PathBuf>> {
    let order = order(records);
    let reference = args.reference.clone().unwrap_or_else(|| {
        if order
            .iter()
            .any(|s| Record::series_prefix(s) == "ucx-posix/shm")
        {
            "ucx-posix/shm".to_string()
        } else {
            order[0].clone()
        }
    });
    let mut written = Vec::new();
    let plots = [
        (
            "latency",
            "one-way latency vs message size (median; lower is better)",
            Metric::LatencyTypical,
        ),
        (
            "latency-p99",
            "one-way latency p99 vs message size (lower is better)",
            Metric::LatencyP99,
        ),
        (
            "bandwidth",
            "bandwidth vs message size (higher is better)",
            Metric::Bandwidth,
        ),
    ];
    for (suffix, title, metric) in plots {
        let path = args.out.join(format!("{}-{suffix}.png", args.name));
        if plot(&path, title, records, metric, &order, text)? {
            written.push(path);
        }
    }

    let mut md = String::new();
    let _ = writeln!(md, "# Latency and bandwidth\n");
    let _ = writeln!(
        md,
        "Written by `weft report` from {}. Each cell: the value, and in brackets its ratio to `{reference}` at the same size (value / reference; for latency below 1 is faster, for bandwidth above 1 is faster). † marks a mean standing in for a median the tool does not report. Latency is one-way in µs (a series marked \"(full rtt)\" is the whole round trip, as perftest reports READ and atomics); bandwidth in MB/s with MB = 10^6 bytes. Each column is one system, link and test.\n",
        args.files.iter().map(|f| format!("`{}`", f.display())).collect::<Vec<_>>().join(", ")
    );
    for (title, metric, img) in [
        (
            "One-way latency, median (µs)",
            Metric::LatencyTypical,
            "latency",
        ),
        ("One-way latency, mean (µs)", Metric::LatencyMean, ""),
        (
            "One-way latency, p99 (µs)",
            Metric::LatencyP99,
            "latency-p99",
        ),
        ("Bandwidth (MB/s)", Metric::Bandwidth, "bandwidth"),
    ] {
        if table(records, metric).is_empty() {
            continue;
        }
        let _ = writeln!(md, "## {title}\n");
        let png = format!("{}-{img}.png", args.name);
        if !img.is_empty() && written.iter().any(|p| p.ends_with(&png)) {
            let _ = writeln!(md, "![{title}]({png})\n");
        }
        md_table(&mut md, records, metric, &order, &reference);
    }
    let lossy: Vec<&Record> = records
        .iter()
        .filter(|r| r.lost.is_some_and(|l| l > 0))
        .collect();
    if !lossy.is_empty() {
        let _ = writeln!(
            md,
            "## Losses\n\n| series | test | size | lost | of |\n| --- | --- | ---: | ---: | ---: |"
        );
        for r in lossy {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                r.series(),
                r.meta.test,
                r.size,
                r.lost.unwrap_or(0),
                r.iters
            );
        }
        md.push('\n');
    }
    let failed: Vec<&Record> = records.iter().filter(|r| r.error.is_some()).collect();
    if !failed.is_empty() {
        let _ = writeln!(md, "## Runs that produced no numbers\n\n| series | test | size | error |\n| --- | --- | ---: | --- |");
        for r in failed {
            let e = r
                .error
                .as_deref()
                .unwrap_or("")
                .replace('|', "\\|")
                .replace('\n', " ");
            let _ = writeln!(
                md,
                "| {} | {} | {} | {e} |",
                r.series(),
                r.meta.test,
                r.size
            );
        }
        md.push('\n');
    }
    let notes: Vec<&Record> = records.iter().filter(|r| r.note.is_some()).collect();
    if !notes.is_empty() {
        let _ = writeln!(md, "## Notes on individual runs\n");
        for r in notes {
            let _ = writeln!(
                md,
                "- {} {} {} B: {}",
                r.series(),
                r.meta.test,
                r.size,
                r.note.as_deref().unwrap_or("")
            );
        }
        md.push('\n');
    }
    let md_path = args.out.join(format!("{}.md", args.name));
    std::fs::write(&md_path, md).with_context(|| format!("writing {}", md_path.display()))?;
    written.push(md_path);
    Ok(written)
}

/// The forwarder RFC 2544 results are compared with unless `--reference` names another
/// (scripts/router-e2e.sh's label for Linux kernel forwarding).
pub const KERNEL_FORWARDER: &str = "linux kernel";

/// Median, min and max of the finite values; `None` when there are none.
fn spread(values: impl Iterator<Item = f64>) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some((plots::median(&v), v[0], v[v.len() - 1]))
}

fn spread_cell(s: Option<(f64, f64, f64)>) -> String {
    match s {
        None => "–".to_owned(),
        Some((m, lo, hi)) if lo == hi => fmt_num(m),
        Some((m, lo, hi)) => format!("{} [{}–{}]", fmt_num(m), fmt_num(lo), fmt_num(hi)),
    }
}

/// `weft study` rows of Figs. 1–4 as markdown, printed by `weft report`: per figure,
/// verb and size the median of the rounds (`--fig-rounds`) [min–max] of p50, p90,
/// MB/s and CPU µs per operation, and how many rounds gave a value. Failed points
/// are left out; empty when there are no such rows.
pub fn study_figs_summary(rows: &[crate::study::Row]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for fig in ["fig1", "fig2", "fig3", "fig4"] {
        let mine: Vec<&crate::study::Row> = rows
            .iter()
            .filter(|r| r.figure == fig && r.error.is_none())
            .collect();
        let Some(r0) = mine.first() else { continue };
        let _ = writeln!(
            out,
            "\n{fig}: {} in flight, {} CPU hogs, {} link. Each cell: the median of the rounds [min–max].\n\n\
             | verb | size (B) | rounds | p50 µs | p90 µs | MB/s | CPU µs/op |\n\
             |---|---:|---:|---:|---:|---:|---:|",
            r0.outstanding, r0.hogs, r0.link
        );
        let mut verbs: Vec<&str> = Vec::new();
        for r in &mine {
            if !verbs.contains(&r.verb.as_str()) {
                verbs.push(&r.verb);
            }
        }
        for v in verbs {
            let sizes: BTreeSet<u64> = mine
                .iter()
                .filter(|r| r.verb == v)
                .map(|r| r.size)
                .collect();
            for size in sizes {
                let pts: Vec<&&crate::study::Row> = mine
                    .iter()
                    .filter(|r| r.verb == v && r.size == size)
                    .collect();
                let cell = |of: fn(&crate::study::Row) -> Option<f64>| {
                    spread_cell(spread(pts.iter().filter_map(|r| of(r))))
                };
                let _ = writeln!(
                    out,
                    "| {v} | {size} | {} | {} | {} | {} | {} |",
                    pts.len(),
                    cell(|r| r.p50_us),
                    cell(|r| r.p90_us),
                    cell(|r| r.mb_per_s),
                    cell(|r| r.cpu_us_per_op),
                );
            }
        }
    }
    out
}

/// RFC 2544 rows (any number of rounds) as markdown, printed by `weft report`: per
/// frame size and forwarder the
/// median of the rounds with its min–max, and issue 18's comparisons against
/// `reference`'s medians: zero-loss rate ratio (target ≥ 1.0), and latency at the
/// reference's zero-loss rate (`--latency-at-kpps` rows) as ratios of p50 (target
/// ≤ 2) and p99 (target ≤ 5).
pub fn router_summary(rows: &[plots::RouterRow], reference: &str) -> String {
    let mut forwarders: Vec<&str> = Vec::new();
    for r in rows {
        if !forwarders.contains(&r.forwarder.as_str()) {
            forwarders.push(&r.forwarder);
        }
    }
    let frames: BTreeSet<u64> = rows.iter().map(|r| r.frame).collect();
    let rounds = |who: &str, frame: u64| -> Vec<&plots::RouterRow> {
        rows.iter()
            .filter(|r| r.forwarder == who && r.frame == frame)
            .collect()
    };
    let med = |v: &[&plots::RouterRow], f: fn(&plots::RouterRow) -> Option<f64>| {
        spread(v.iter().filter_map(|r| f(r)))
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Written by `weft report` from RFC 2544 rows. Each cell: the median of the rounds \
         [min–max]. Ratios are of medians, against `{reference}` at the same frame size. \
         Latency is one-way, µs: at each forwarder's own zero-loss rate, and at \
         `{reference}`'s zero-loss rate of the same round (where the rows carry it; lost \
         frames at that rate are counted in the lost column). CPU: ns of busy time per \
         delivered frame, medians, of all cores (the generator's included) / of the \
         forwarder's core alone, in the latency trial at the forwarder's zero-loss rate \
         and in the one at the reference's rate.\n"
    );
    let _ = writeln!(
        out,
        "| frame (B) | forwarder | n | zero-loss kpps | vs ref (≥ 1.0) | p50 µs | p99 µs | p50 at ref rate | vs ref (≤ 2) | p99 at ref rate | vs ref (≤ 5) | lost at ref rate | CPU ns/pkt all / router core | at ref rate |"
    );
    let _ = writeln!(
        out,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for &frame in &frames {
        let base = rounds(reference, frame);
        let base_rate = med(&base, |r| Some(r.zero_loss_kpps)).map(|s| s.0);
        // The reference at its own rate is its latency "at the reference's rate".
        let base_p50 = med(&base, |r| r.at_p50_us.or(Some(r.p50_us))).map(|s| s.0);
        let base_p99 = med(&base, |r| r.at_p99_us.or(r.p99_us)).map(|s| s.0);
        for &who in &forwarders {
            let v = rounds(who, frame);
            if v.is_empty() {
                continue;
            }
            let rate = med(&v, |r| Some(r.zero_loss_kpps));
            let at50 = med(&v, |r| r.at_p50_us);
            let at99 = med(&v, |r| r.at_p99_us);
            let ratio = |a: Option<(f64, f64, f64)>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) if b > 0.0 && who != reference => fmt_num(a.0 / b),
                _ => "–".to_owned(),
            };
            let lost: u64 = v.iter().filter_map(|r| r.at_lost).sum();
            let lost = if v.iter().any(|r| r.at_lost.is_some()) {
                lost.to_string()
            } else {
                "–".to_owned()
            };
            // "all / router core", medians; "–" for a figure no row has.
            let cpu = |all: fn(&plots::RouterRow) -> Option<f64>,
                       core: fn(&plots::RouterRow) -> Option<f64>| {
                let m = |f| med(&v, f).map_or("–".to_owned(), |s| format!("{:.0}", s.0));
                if med(&v, all).is_none() && med(&v, core).is_none() {
                    "–".to_owned()
                } else {
                    format!("{} / {}", m(all), m(core))
                }
            };
            let cpu_own = cpu(|r| r.cpu_ns_per_pkt_all, |r| r.cpu_ns_per_pkt_router_core);
            let cpu_at = cpu(
                |r| r.at_cpu_ns_per_pkt_all,
                |r| r.at_cpu_ns_per_pkt_router_core,
            );
            let _ = writeln!(
                out,
                "| {frame} | {who} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {lost} | {cpu_own} | {cpu_at} |",
                v.len(),
                spread_cell(rate),
                ratio(rate, base_rate),
                spread_cell(med(&v, |r| Some(r.p50_us))),
                spread_cell(med(&v, |r| r.p99_us)),
                spread_cell(at50),
                ratio(at50, base_p50),
                spread_cell(at99),
                ratio(at99, base_p99),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rfc(
        who: &str,
        frame: u64,
        round: u32,
        kpps: f64,
        p50: f64,
        at: Option<(f64, f64)>,
    ) -> String {
        let row = crate::router::Rfc2544Row {
            forwarder: who.into(),
            frame,
            zero_loss_kpps: kpps,
            zero_loss_mbit_s: 0.0,
            flat_out_kpps: kpps * 2.0,
            flat_out_delivered_pct: 50.0,
            p50_us: Some(p50),
            p99_us: Some(p50 * 3.0),
            at_kpps: at.map(|_| 100.0),
            at_p50_us: at.map(|a| a.0),
            at_p99_us: at.map(|a| a.1),
            at_lost: at.map(|_| 1),
            at_within_100us_pct: None,
            trial_secs: 1.0,
            round: Some(round),
            // CPU figures: 10 ns per kpps of rate (all cores), 4 at the forwarder's,
            // at the reference's rate only where the row has one.
            cpu_ns_per_pkt_all: Some(kpps * 10.0),
            cpu_ns_per_pkt_router_core: Some(kpps * 4.0),
            at_cpu_ns_per_pkt_all: at.map(|a| a.0 * 10.0),
            ..Default::default()
        };
        serde_json::to_string(&row).unwrap()
    }

    #[test]
    fn study_figure_rows_give_medians_of_the_rounds() {
        let row = |round: u32, size: u64, p50: f64| crate::study::Row {
            study: "weft".into(),
            figure: "fig1".into(),
            link: "udp".into(),
            verb: "SEND/SEND-Poll".into(),
            size,
            outstanding: 1,
            round: Some(round),
            p50_us: Some(p50),
            ..Default::default()
        };
        let mut failed = row(4, 64, 1.0);
        failed.error = Some("timed out".into());
        let rows = vec![
            row(1, 64, 5.0),
            row(2, 64, 9.0),
            row(3, 64, 6.0),
            row(1, 4096, 7.0),
            failed,
        ];
        let md = study_figs_summary(&rows);
        let line = |size: &str| {
            md.lines()
                .find(|l| l.starts_with(&format!("| SEND/SEND-Poll | {size} |")))
                .unwrap_or_else(|| panic!("no row for {size} in {md}"))
                .to_owned()
        };
        let cells: Vec<String> = line("64").split('|').map(|c| c.trim().to_owned()).collect();
        assert_eq!(cells[3], "3", "the failed round is left out");
        assert!(
            cells[4].starts_with('6') && cells[4].contains('5') && cells[4].contains('9'),
            "{}",
            cells[4]
        );
        assert_eq!(line("4096").split('|').nth(3).map(str::trim), Some("1"));
        assert!(!md.contains("fig2"), "no fig2 rows, no fig2 table");
    }

    #[test]
    fn rfc2544_json_rows_give_medians_of_rounds_and_ratios_against_the_kernel() {
        let dir = std::env::temp_dir().join(format!("weft-report-rfc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("rows.jsonl");
        // Three rounds, alternating: the kernel, then weft at the kernel's rate.
        let lines = [
            rfc(KERNEL_FORWARDER, 64, 1, 100.0, 10.0, None),
            rfc("weft push", 64, 1, 80.0, 500.0, Some((30.0, 90.0))),
            rfc(KERNEL_FORWARDER, 64, 2, 120.0, 20.0, None),
            rfc("weft push", 64, 2, 60.0, 700.0, Some((40.0, 100.0))),
            rfc(KERNEL_FORWARDER, 64, 3, 110.0, 30.0, None),
            rfc("weft push", 64, 3, 99.0, f64::NAN, Some((50.0, 300.0))),
        ];
        std::fs::write(&file, lines.join("\n")).unwrap();
        let inputs = read_inputs(std::slice::from_ref(&file)).unwrap();
        assert_eq!(inputs.router.len(), 6);
        assert!(inputs.perf.is_empty());
        let md = router_summary(&inputs.router, KERNEL_FORWARDER);
        let weft = md.lines().find(|l| l.contains("| weft push |")).expect(&md);
        let cells: Vec<&str> = weft.trim_matches('|').split('|').map(str::trim).collect();
        // frame, forwarder, n, rate [spread], rate ratio, p50 (NaN skipped), p99, at p50,
        // ratio, at p99, ratio, lost.
        assert_eq!(cells[0], "64");
        assert_eq!(cells[2], "3");
        assert_eq!(cells[3], "80.0 [60.0–99.0]");
        assert_eq!(cells[4], "0.73", "80 / 110");
        assert_eq!(cells[5], "600.0 [500.0–700.0]");
        assert_eq!(cells[7], "40.0 [30.0–50.0]");
        assert_eq!(cells[8], "2.00", "40 / the kernel's own p50 median 20");
        // CPU per packet: medians of 800/600/990 and 320/240/396; at the kernel's
        // rate only the all-cores figure (400 of 300/400/500), none for its core.
        assert_eq!(cells[12], "800 / 320");
        assert_eq!(cells[13], "400 / –");
        assert_eq!(cells[10], "1.67", "100 / the kernel's p99 median 60");
        assert_eq!(cells[11], "3");
        let kernel = md
            .lines()
            .find(|l| l.contains("| linux kernel |"))
            .expect(&md);
        assert!(kernel.contains("| 110.0 [100.0–120.0] | – |"), "{kernel}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
    #[test]
    fn cluster_rows_are_recognised_and_plotted() {
        let dir = std::env::temp_dir().join(format!("weft-report-cluster-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("rows.jsonl");
        let mut lines = Vec::new();
        for round in 0..2 {
            for (mode, batch, mpps) in
                [("sge", 32, 4.0), ("memcpy", 32, 3.0), ("unbatched", 1, 0.5)]
            {
                for size in [64, 1500] {
                    lines.push(format!(
                        r#"{{"interconnect":"udp","size":{size},"batch":{batch},"mode":"{mode}","mpps":{},"gbps":1.0,"p50_us":5.0,"p99_us":9.0,"sent":10,"received":9,"malformed":0,"round":{round}}}"#,
                        mpps * (1.0 + round as f64)
                    ));
                }
            }
            for batch in [1, 32] {
                lines.push(format!(
                    r#"{{"kind":"latency","path":"router","interconnect":"shm","size":128,"batch":{batch},"p50_us":12.0,"p99_us":40.0,"probes":100,"lost":0,"round":{round},"packets_per_message":1.0}}"#
                ));
            }
        }
        lines.push(r#"{"kind":"balance","nodes":8,"traffic":"uniform","hot":0.0,"balance":"vlb","batch":16,"load":0.6,"link_capacity":0.25,"round_us":20,"external":10,"delivered":10,"dropped":0,"messages_per_packet":1.0,"crossings_per_packet":2.0,"packets_per_message":2.0,"reordered_per_packet":0.0}"#.into());
        std::fs::write(&file, lines.join("\n")).unwrap();
        let inputs = read_inputs(std::slice::from_ref(&file)).unwrap();
        assert_eq!(inputs.cluster.len(), 12);
        assert_eq!(inputs.cluster_latency.len(), 4);
        assert!(inputs.perf.is_empty(), "balance rows are not perf records");
        let written =
            plots::cluster(&dir, "c", &inputs.cluster, &inputs.cluster_latency, false).unwrap();
        assert_eq!(written.len(), 3);
        for p in &written {
            assert!(
                std::fs::metadata(p).unwrap().len() > 1000,
                "{}",
                p.display()
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    use crate::perf::record::Meta;
    use crate::perf::stats::{LatencyStats, Method};

    fn lat(test: &str, p50: f64) -> Record {
        let meta = Meta {
            system: "weft".into(),
            test: test.into(),
            link: "shm".into(),
            qp: "rc".into(),
        };
        let mut ns = vec![p50 * 1e3; 10];
        let s = LatencyStats::from_ns(&mut ns).unwrap();
        Record::latency(&meta, 64, Method::HalfRtt, &s)
    }

    #[test]
    fn a_write_lat_cell_never_fills_a_send_lat_column() {
        // Same system, link, QP and size; only the test differs. Before series
        // carried the test, the later record replaced the earlier in one column.
        let records = vec![lat("send-lat", 1.5), lat("write-lat", 0.9)];
        let t = table(&records, Metric::LatencyTypical);
        assert_eq!(t.len(), 2, "{:?}", t.keys().collect::<Vec<_>>());
        let send = &t["weft/shm/rc send-lat"][&64];
        let write = &t["weft/shm/rc write-lat"][&64];
        assert_eq!(send.meta.test, "send-lat");
        assert_eq!(write.meta.test, "write-lat");
        let mut md = String::new();
        md_table(
            &mut md,
            &records,
            Metric::LatencyTypical,
            &order(&records),
            "weft/shm/rc send-lat",
        );
        assert!(
            md.contains("| weft/shm/rc send-lat | weft/shm/rc write-lat |"),
            "{md}"
        );
        // The row: send-lat's 1.50 in its column, write-lat's 0.90 (0.60x) in its own.
        assert!(md.contains("| 64 | 1.50 | 0.90 (0.60x) |"), "{md}");
    }

    #[test]
    fn a_reference_by_system_and_link_picks_that_tables_series() {
        let a = "ucx-posix/shm tag_lat".to_string();
        let b = "weft/shm/rc send-lat".to_string();
        let cols = vec![&b, &a];
        assert_eq!(reference_column(&cols, "ucx-posix/shm"), Some(a.as_str()));
        assert_eq!(
            reference_column(&cols, "weft/shm/rc send-lat"),
            Some(b.as_str())
        );
        assert_eq!(reference_column(&cols, "kernel-tcp/loopback"), None);
    }
}

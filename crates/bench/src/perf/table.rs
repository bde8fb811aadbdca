//! Printing records: a perftest-like table, or JSON lines (`--json`, one object per
//! line), written as each message size finishes so a long sweep shows its rows as
//! they come.

use std::io::Write;

use super::record::{Meta, Record};

/// Where results go: a table or JSON lines, on any writer (stdout for the commands).
#[derive(Debug)]
pub struct Output<W: Write> {
    out: W,
    json: bool,
    /// The test whose header was printed last (a new header when it changes).
    header_for: Option<(Meta, bool)>,
}

impl Output<std::io::Stdout> {
    /// Records on stdout, as JSON lines when `json`.
    pub fn stdout(json: bool) -> Self {
        Output::new(std::io::stdout(), json)
    }
}

impl<W: Write> Output<W> {
    pub fn new(out: W, json: bool) -> Self {
        Output {
            out,
            json,
            header_for: None,
        }
    }

    /// Writes one record (a table row, with a header before the first row of a test).
    pub fn emit(&mut self, r: &Record) -> std::io::Result<()> {
        if self.json {
            writeln!(self.out, "{}", r.to_json_line())?;
            return self.out.flush();
        }
        let is_lat =
            r.latency.is_some() || (r.error.is_some() && Record::is_latency_test(&r.meta.test));
        let key = (r.meta.clone(), is_lat);
        if self.header_for.as_ref() != Some(&key) {
            self.header(r, is_lat)?;
            self.header_for = Some(key);
        }
        let f = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
        // CPU per operation (both processes) and operations per CPU-second.
        let cpu = r.cpu.map_or_else(
            || format!("{:>12} {:>12}", "-", "-"),
            |c| format!("{:>12.2} {:>12.0}", c.us_per_op(), c.ops_per_cpu_s),
        );
        if let Some(e) = &r.error {
            writeln!(self.out, " {:<10} failed: {e}", r.size)?;
        } else if let Some(l) = &r.latency {
            writeln!(
                self.out,
                " {:<10} {:<11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>10} {cpu}",
                r.size,
                r.iters,
                f(l.min_us),
                f(l.p50_us),
                f(Some(l.mean_us)),
                f(l.stdev_us),
                f(l.p90_us),
                f(l.p99_us),
                f(l.p999_us),
                f(l.max_us),
                l.rtt_per_s
                    .map_or_else(|| "-".to_string(), |v| format!("{v:.0}")),
            )?;
        } else if let Some(b) = &r.bandwidth {
            writeln!(
                self.out,
                " {:<10} {:<11} {:>18.2} {:>14.4} {:>18} {cpu}",
                r.size,
                r.iters,
                b.mb_per_s,
                b.mmsg_per_s,
                b.sender_mb_per_s
                    .map_or_else(|| "-".into(), |s| format!("{s:.2}")),
            )?;
        }
        if let Some(lost) = r.lost.filter(|&l| l > 0) {
            writeln!(self.out, "            ({lost} lost)")?;
        }
        if let Some(n) = &r.note {
            writeln!(self.out, "            note: {n}")?;
        }
        self.out.flush()
    }

    fn header(&mut self, r: &Record, is_lat: bool) -> std::io::Result<()> {
        let rule = "-".repeat(155);
        let m = &r.meta;
        writeln!(self.out, "{rule}")?;
        if is_lat {
            let method = r.latency.as_ref().map_or("rtt/2", |l| l.method.as_str());
            let what = match method {
                "rtt" => "full round-trip latency (method rtt, as perftest reports READ and atomics)",
                "symmetric" => "one-way latency (method symmetric: round trip minus the server's turnaround, halved)",
                _ => "one-way latency (method rtt/2: half the round trip)",
            };
            writeln!(
                self.out,
                " {}   system {}   link {}   qp {}   {what}",
                m.test, m.system, m.link, m.qp
            )?;
            writeln!(self.out, "{rule}")?;
            writeln!(
                self.out,
                " {:<10} {:<11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>10} {:>12} {:>12}",
                "#bytes",
                "#iterations",
                "t_min[us]",
                "t_p50[us]",
                "t_avg[us]",
                "t_stdev[us]",
                "t_p90[us]",
                "t_p99[us]",
                "t_p99.9[us]",
                "t_max[us]",
                "rtt/s",
                "CPU[us/rtt]",
                "rtt/CPU-s"
            )?;
            writeln!(
                self.out,
                " CPU: both processes' CPU time over the measured rounds, per round trip (client's alone when the server is remote)"
            )?;
        } else {
            writeln!(
                self.out,
                " {}   system {}   link {}   qp {}   bandwidth, MB = 10^6 bytes",
                m.test, m.system, m.link, m.qp
            )?;
            writeln!(self.out, "{rule}")?;
            writeln!(
                self.out,
                " {:<10} {:<11} {:>18} {:>14} {:>18} {:>12} {:>12}",
                "#bytes",
                "#iterations",
                "BW average[MB/s]",
                "MsgRate[Mpps]",
                "sender BW[MB/s]",
                "CPU[us/msg]",
                "msg/CPU-s"
            )?;
            writeln!(
                self.out,
                " CPU: both processes' CPU time over the measured phase, per message (client's alone when the server is remote)"
            )?;
        }
        Ok(())
    }
}

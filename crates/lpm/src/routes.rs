//! Route files: one `prefix value` per line (`1.0.4.0/22 38803`), IPv4 and IPv6
//! mixed, as in `benches/bgpas.lpm` of the `iptrie` crate (origin AS numbers of a
//! real BGP full table). Also finds that file in the local cargo registry.

use std::collections::HashMap;
use std::io::{self, BufRead};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::{NextHop, Prefix4, Prefix6};

/// Routes read from a file, values as written (not yet next-hop indexes).
#[derive(Debug, Clone, Default)]
pub struct RouteFile {
    /// IPv4 routes in file order.
    pub v4: Vec<(Prefix4, u32)>,
    /// IPv6 routes in file order.
    pub v6: Vec<(Prefix6, u32)>,
    /// Lines that were neither blank, a comment, nor a valid route.
    pub bad_lines: usize,
}

/// Parses one `prefix value` line. `None` for anything malformed.
pub fn parse_line(line: &str) -> Option<Result<(Prefix4, u32), (Prefix6, u32)>> {
    let mut it = line.split_whitespace();
    let (net, value) = (it.next()?, it.next()?);
    let value: u32 = value.parse().ok()?;
    let (addr, len) = net.split_once('/')?;
    let len: u8 = len.parse().ok()?;
    match addr.parse::<IpAddr>().ok()? {
        IpAddr::V4(a) => Some(Ok((Prefix4::new(u32::from(a), len).ok()?, value))),
        IpAddr::V6(a) => Some(Err((Prefix6::new(u128::from(a), len).ok()?, value))),
    }
}

/// Reads a route file.
pub fn read(path: &Path) -> io::Result<RouteFile> {
    let f = io::BufReader::new(std::fs::File::open(path)?);
    let mut out = RouteFile::default();
    for line in f.lines() {
        let line = line?;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        match parse_line(t) {
            Some(Ok(r)) => out.v4.push(r),
            Some(Err(r)) => out.v6.push(r),
            None => out.bad_lines += 1,
        }
    }
    Ok(out)
}

/// Turns raw values (AS numbers) into dense next-hop indexes in order of first
/// appearance, as a router's next-hop table would: the same value always gets the
/// same index. Returns the routes and the table (index -> raw value).
pub fn intern<P: Copy>(routes: &[(P, u32)]) -> (Vec<(P, NextHop)>, Vec<u32>) {
    let mut index: HashMap<u32, u32> = HashMap::new();
    let mut table = Vec::new();
    let out = routes
        .iter()
        .map(|&(p, v)| {
            let i = *index.entry(v).or_insert_with(|| {
                table.push(v);
                (table.len() - 1) as u32
            });
            (p, NextHop(i))
        })
        .collect();
    (out, table)
}

/// Finds `benches/bgpas.lpm` of the `iptrie` 0.11 package: `$WEFT_BGPAS` if set,
/// else the newest `iptrie-0.11.*` in `$CARGO_HOME/registry/src/*/` (default
/// `~/.cargo`), else the package directory `cargo metadata` reports.
pub fn locate_bgpas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("WEFT_BGPAS") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let mut found: Vec<PathBuf> = Vec::new();
    if let Ok(indexes) = std::fs::read_dir(cargo_home.join("registry").join("src")) {
        for idx in indexes.flatten() {
            if let Ok(pkgs) = std::fs::read_dir(idx.path()) {
                for pkg in pkgs.flatten() {
                    let name = pkg.file_name().to_string_lossy().into_owned();
                    let file = pkg.path().join("benches").join("bgpas.lpm");
                    if name.starts_with("iptrie-0.11") && file.is_file() {
                        found.push(file);
                    }
                }
            }
        }
    }
    found.sort();
    found.pop().or_else(locate_with_cargo_metadata)
}

fn locate_with_cargo_metadata() -> Option<PathBuf> {
    let out =
        std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["metadata", "--format-version", "1"])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // Avoid a JSON dependency: find the iptrie package's manifest path.
    let at = text.find("\"name\":\"iptrie\"")?;
    let rest = &text[at..];
    let key = "\"manifest_path\":\"";
    let start = rest.find(key)? + key.len();
    let end = start + rest[start..].find('"')?;
    let manifest = PathBuf::from(&rest[start..end]);
    let file = manifest.parent()?.join("benches").join("bgpas.lpm");
    file.is_file().then_some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_families_and_rejects_junk() {
        let (p, v) = parse_line("1.0.4.0/22 38803").unwrap().unwrap();
        assert_eq!((p.addr(), p.len(), v), (0x0100_0400, 22, 38803));
        let (p, v) = parse_line("2001:db8::/32 64500").unwrap().unwrap_err();
        assert_eq!((p.addr() >> 96, p.len(), v), (0x2001_0db8, 32, 64500));
        assert!(parse_line("1.0.4.0/33 1").is_none());
        assert!(parse_line("1.0.4.0 1").is_none());
        assert!(parse_line("1.0.4.0/8 x").is_none());
        // host bits are cleared
        let (p, _) = parse_line("10.1.2.3/8 1").unwrap().unwrap();
        assert_eq!(p.addr(), 0x0a00_0000);
    }

    #[test]
    fn intern_is_dense_and_stable() {
        let (r, t) = intern(&[(1, 500), (2, 7), (3, 500)]);
        assert_eq!(t, vec![500, 7]);
        assert_eq!(
            r.iter().map(|x| x.1.get()).collect::<Vec<_>>(),
            vec![0, 1, 0]
        );
    }
}

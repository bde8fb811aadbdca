//! Route files: one `prefix value` per line (`1.0.4.0/22 38803`), IPv4 and IPv6
//! mixed, as in `benches/bgpas.lpm` of the `iptrie` crate (origin AS numbers of a
//! real BGP full table), or as the router's route files (`prefix next-hop`).
//! [`lines`] is the one reader of that format: it yields the prefix and leaves the
//! value's text to the caller (an AS number here, a next-hop address in the
//! router). Also finds the bgpas file in the local cargo registry.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::{IpPrefix, NextHop, Prefix4, Prefix6, PrefixParseError};

/// One route line: its number (from 1), prefix, and the value's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteLine<'a> {
    /// Line number, counting from 1.
    pub line: usize,
    /// The prefix (host bits cleared).
    pub prefix: IpPrefix,
    /// The second field, for the caller to interpret.
    pub value: &'a str,
}

/// Why a route line was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteLineError {
    /// Not exactly two fields.
    Fields {
        /// Line number, counting from 1.
        line: usize,
        /// How many fields it had.
        found: usize,
    },
    /// The first field is not `address/length` (a route file names its length).
    NoLength {
        /// Line number, counting from 1.
        line: usize,
    },
    /// The first field is not a prefix.
    Prefix {
        /// Line number, counting from 1.
        line: usize,
        /// What is wrong with it.
        error: PrefixParseError,
    },
}

impl RouteLineError {
    /// The line the error is on, counting from 1.
    pub fn line(&self) -> usize {
        match self {
            RouteLineError::Fields { line, .. }
            | RouteLineError::NoLength { line }
            | RouteLineError::Prefix { line, .. } => *line,
        }
    }
}

impl fmt::Display for RouteLineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteLineError::Fields { line, found } => {
                write!(f, "line {line}: expected two fields, found {found}")
            }
            RouteLineError::NoLength { line } => {
                write!(f, "line {line}: the prefix needs a /length")
            }
            RouteLineError::Prefix { line, error } => write!(f, "line {line}: {error}"),
        }
    }
}

impl std::error::Error for RouteLineError {}

/// Parses one line (`number` counts from 1). `None` for a blank line or a comment
/// (`#` to the end of the line).
pub fn parse_line(line: &str, number: usize) -> Option<Result<RouteLine<'_>, RouteLineError>> {
    let text = line.split('#').next().unwrap_or("").trim();
    if text.is_empty() {
        return None;
    }
    let fields: Vec<&str> = text.split_whitespace().collect();
    let &[net, value] = fields.as_slice() else {
        return Some(Err(RouteLineError::Fields {
            line: number,
            found: fields.len(),
        }));
    };
    if !net.contains('/') {
        return Some(Err(RouteLineError::NoLength { line: number }));
    }
    Some(
        net.parse()
            .map(|prefix| RouteLine {
                line: number,
                prefix,
                value,
            })
            .map_err(|error| RouteLineError::Prefix {
                line: number,
                error,
            }),
    )
}

/// The routes of a route file's text, in order, blank lines and comments skipped.
pub fn lines(text: &str) -> impl Iterator<Item = Result<RouteLine<'_>, RouteLineError>> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| parse_line(l, i + 1))
}

/// Routes read from a file, values as written (not yet next-hop indexes).
#[derive(Debug, Clone, Default)]
pub struct RouteFile {
    /// IPv4 routes in file order.
    pub v4: Vec<(Prefix4, u32)>,
    /// IPv6 routes in file order.
    pub v6: Vec<(Prefix6, u32)>,
    /// Lines that were neither blank, a comment, nor a valid route with a `u32` value.
    pub bad_lines: usize,
}

/// Reads a `prefix value` file with `u32` values (AS numbers), counting bad lines.
pub fn read(path: &Path) -> io::Result<RouteFile> {
    let text = std::fs::read_to_string(path)?;
    let mut out = RouteFile::default();
    for r in lines(&text) {
        match r.map(|l| (l.prefix, l.value.parse::<u32>())) {
            Ok((IpPrefix::V4(p), Ok(v))) => out.v4.push((p, v)),
            Ok((IpPrefix::V6(p), Ok(v))) => out.v6.push((p, v)),
            Ok((_, Err(_))) | Err(_) => out.bad_lines += 1,
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

    /// A line as (prefix, u32 value), `None` for anything malformed (as `read` does).
    fn route(line: &str) -> Option<(IpPrefix, u32)> {
        let l = parse_line(line, 1)?.ok()?;
        Some((l.prefix, l.value.parse().ok()?))
    }

    #[test]
    fn parses_both_families_and_rejects_junk() {
        let (IpPrefix::V4(p), v) = route("1.0.4.0/22 38803").unwrap() else {
            panic!("not ipv4")
        };
        assert_eq!((p.addr(), p.len(), v), (0x0100_0400, 22, 38803));
        let (IpPrefix::V6(p), v) = route("2001:db8::/32 64500").unwrap() else {
            panic!("not ipv6")
        };
        assert_eq!((p.addr() >> 96, p.len(), v), (0x2001_0db8, 32, 64500));
        assert!(route("1.0.4.0/33 1").is_none());
        assert!(route("1.0.4.0 1").is_none());
        assert!(route("1.0.4.0/8 x").is_none());
        // host bits are cleared
        let (IpPrefix::V4(p), _) = route("10.1.2.3/8 1").unwrap() else {
            panic!("not ipv4")
        };
        assert_eq!(p.addr(), 0x0a00_0000);
    }

    #[test]
    fn lines_skip_comments_and_name_the_bad_line() {
        let text = "# header\n\n1.0.0.0/24 13335 # trailing comment\n10.0.0.0/8\n10.0.0.0/8 1 2\n1.2.3.4 5\nnonsense/8 1\n";
        let got: Vec<_> = lines(text).collect();
        assert_eq!(got.len(), 5);
        let first = got[0].as_ref().unwrap();
        assert_eq!((first.line, first.value), (3, "13335"));
        assert_eq!(first.prefix.to_string(), "1.0.0.0/24");
        assert_eq!(got[1], Err(RouteLineError::Fields { line: 4, found: 1 }));
        assert_eq!(got[2], Err(RouteLineError::Fields { line: 5, found: 3 }));
        assert_eq!(got[3], Err(RouteLineError::NoLength { line: 6 }));
        assert!(
            matches!(&got[4], Err(RouteLineError::Prefix { line: 7, error: PrefixParseError::Address(a) }) if a == "nonsense"),
            "{:?}",
            got[4]
        );
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

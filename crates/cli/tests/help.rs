//! `weft --help` is where a newcomer starts: it lists every subcommand with a one-line,
//! one-sentence description, and no subcommand's help refers to a flag it does not
//! list (`rpc-bench --help` once pointed at a hidden `--serve`).

use std::collections::BTreeSet;
use std::process::Command;

/// The subcommands this build has, `help` included.
fn expected() -> BTreeSet<&'static str> {
    let mut c = BTreeSet::from(["router", "decode", "exec", "help"]);
    if cfg!(feature = "bench") {
        c.extend([
            "demo",
            "perf",
            "incast",
            "baseline",
            "rpc-bench",
            "lpm-bench",
            "report",
            "study",
            "probe",
        ]);
    }
    c
}

fn help(args: &[&str]) -> String {
    let out = Command::new("timeout")
        .arg("30")
        .arg(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .arg("--help")
        .output()
        .expect("run weft");
    assert!(out.status.success(), "weft {args:?} --help: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8 help")
}

/// The `Commands:` section: (name, description) per line. A description that wraps
/// onto a second line shows up as a line without a name and fails the caller.
fn commands(text: &str) -> Vec<(String, String)> {
    let Some((_, rest)) = text.split_once("\nCommands:\n") else {
        return Vec::new();
    };
    rest.lines()
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let l = l.trim_start();
            let (name, desc) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            (name.to_owned(), desc.trim().to_owned())
        })
        .collect()
}

fn assert_one_sentence(what: &str, desc: &str) {
    assert!(!desc.is_empty(), "{what} has no description");
    assert!(
        !desc.contains(". ") && !desc.ends_with('.'),
        "{what}: one sentence, as clap shows summaries: {desc:?}"
    );
}

#[test]
fn weft_help_lists_every_subcommand_with_a_one_line_description() {
    let text = help(&[]);
    let listed = commands(&text);
    let names: BTreeSet<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, expected(), "{text}");
    assert_eq!(names.len(), listed.len(), "a description wrapped: {text}");
    for (name, desc) in &listed {
        assert_one_sentence(name, desc);
    }
    // The summary above names what the tool does, router first.
    let summary = text.lines().next().unwrap_or("");
    assert!(summary.contains("router"), "{summary}");
    if cfg!(feature = "bench") {
        for what in ["RPC", "LPM", "demo", "benchmarks"] {
            assert!(summary.contains(what), "summary omits {what}: {summary}");
        }
    }
}

/// Flags a help text mentions, each with the command it belongs to: a flag in a
/// backquoted command line (`weft rpc-bench --serve weft`) is that command's, any
/// other `--flag` is the help's own command's.
fn mentioned_flags(own: &[String], text: &str) -> BTreeSet<(Vec<String>, String)> {
    let mut out = BTreeSet::new();
    for (i, piece) in text.split('`').enumerate() {
        let words: Vec<&str> = piece.split_whitespace().collect();
        if i % 2 == 1 && words.first() == Some(&"weft") {
            let path: Vec<String> = words[1..]
                .iter()
                .take_while(|w| !w.starts_with('-'))
                .filter(|w| {
                    w.chars()
                        .all(|c| c.is_ascii_lowercase() || c == '-' || c.is_ascii_digit())
                })
                .map(|w| (*w).to_owned())
                .collect();
            for w in &words {
                if let Some(f) = flag_name(w) {
                    out.insert((path.clone(), f));
                }
            }
            continue;
        }
        for w in piece.split(|c: char| c.is_whitespace() || c == '(' || c == '/') {
            if let Some(f) = flag_name(w) {
                out.insert((own.to_vec(), f));
            }
        }
    }
    out
}

/// `--name` in a word (`--name`, `--name=3`, `--name,`), or None.
fn flag_name(word: &str) -> Option<String> {
    let name: String = word
        .strip_prefix("--")?
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Flags an `Options:` section defines.
fn defined_flags(text: &str) -> BTreeSet<String> {
    let Some((_, rest)) = text.split_once("\nOptions:\n") else {
        return BTreeSet::new();
    };
    rest.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix('-')
                .and_then(|l| match l.split_once(", --") {
                    Some((_, long)) => Some(long),
                    None => l.strip_prefix('-'),
                })?;
            Some(
                l.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn every_subcommand_help_lists_the_flags_it_mentions() {
    let mut paths: Vec<Vec<String>> = Vec::new();
    for name in expected().into_iter().filter(|n| *n != "help") {
        paths.push(vec![name.to_owned()]);
        let text = help(&[name]);
        for (sub, desc) in commands(&text) {
            if sub != "help" {
                assert_one_sentence(&format!("{name} {sub}"), &desc);
                paths.push(vec![name.to_owned(), sub]);
            }
        }
    }
    assert!(paths.iter().any(|p| p == &["router", "ctl"]), "{paths:?}");
    for path in paths {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args);
        assert!(
            defined_flags(&text).contains("help"),
            "weft {args:?}: {text}"
        );
        for (owner, flag) in mentioned_flags(&path, &text) {
            let theirs: Vec<&str> = owner.iter().map(String::as_str).collect();
            assert!(
                defined_flags(&help(&theirs)).contains(&flag),
                "`weft {} --help` mentions --{flag} of `weft {}`, which does not list it:\n{text}",
                args.join(" "),
                theirs.join(" ")
            );
        }
    }
}

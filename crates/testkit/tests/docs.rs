//! The documents that list things the tree holds keep up with the tree: every fuzz
//! target is named in docs/testing.md, and docs/README.md links every document.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// File stems in `dir` with extension `ext`, sorted.
fn stems(dir: &str, ext: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == ext).then(|| p.file_stem()?.to_str().map(String::from))?
        })
        .collect();
    v.sort();
    v
}

#[test]
fn testing_md_names_every_fuzz_target_and_fuzz_toml_builds_each() {
    let targets = stems("fuzz/fuzz_targets", "rs");
    assert!(targets.len() >= 10, "found {targets:?}");
    let testing = read("docs/testing.md");
    let line = testing
        .lines()
        .find(|l| l.contains("libFuzzer, targets:"))
        .expect("docs/testing.md has the fuzz target list");
    let listed: Vec<&str> = line
        .split("targets:")
        .nth(1)
        .unwrap_or("")
        .split(['(', '|'])
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let manifest = read("fuzz/Cargo.toml");
    for t in &targets {
        assert!(
            listed.contains(&t.as_str()),
            "docs/testing.md omits fuzz target {t}"
        );
        assert!(
            manifest.contains(&format!("fuzz_targets/{t}.rs")),
            "fuzz/Cargo.toml has no [[bin]] for {t}"
        );
    }
    for l in &listed {
        assert!(
            targets.iter().any(|t| t == l),
            "docs/testing.md lists {l}, which is not a fuzz target"
        );
    }
}

#[test]
fn docs_readme_links_every_document() {
    let index = read("docs/README.md");
    let mut docs: Vec<String> = stems("docs", "md")
        .into_iter()
        .filter(|d| d != "README")
        .map(|d| format!("{d}.md"))
        .collect();
    docs.extend(
        stems("docs/results", "md")
            .into_iter()
            .map(|d| format!("results/{d}.md")),
    );
    for d in &docs {
        let linked = index.contains(&format!("]({d})"));
        assert!(linked, "docs/README.md does not link {d}");
    }
}

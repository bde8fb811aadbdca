//! docs/router.md stays in step with the router: every counter `show counters`
//! prints, every `show links` column and every control command is documented there.

use weft_router::ctl::COMMANDS;
use weft_router::Counter;

fn guide() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/router.md");
    std::fs::read_to_string(path).expect("docs/router.md")
}

#[test]
fn every_counter_is_documented() {
    let g = guide();
    let missing: Vec<&str> = Counter::ALL
        .iter()
        .map(|c| c.name())
        .filter(|n| !g.contains(&format!("| `{n}` |")))
        .collect();
    assert!(missing.is_empty(), "not in docs/router.md: {missing:?}");
}

#[test]
fn every_link_column_and_command_is_documented() {
    let g = guide();
    let r = weft_router::Router::new(Vec::new(), weft_router::RouterConfig::default());
    let header = weft_router::ctl::execute(&r, "show links");
    let columns: Vec<&str> = header
        .lines()
        .next()
        .expect("header")
        .split_whitespace()
        .skip(1)
        .collect();
    assert!(columns.len() >= 7, "{header}");
    for c in columns {
        assert!(
            g.contains(&format!("| `{c}` |")),
            "column {c} not documented"
        );
    }
    for line in COMMANDS.lines().skip(1) {
        let Some(cmd) = line.strip_prefix("  ").and_then(|c| c.split("  ").next()) else {
            continue;
        };
        if cmd.trim().is_empty() {
            continue;
        }
        let first_words: String = cmd.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        assert!(
            g.contains(&format!("`{first_words}")),
            "command {cmd:?} not documented"
        );
    }
}

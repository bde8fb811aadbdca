#!/usr/bin/env bash
# The test command of the README and of CI: set up, then format, lint and test the
# whole workspace. Long soaks and full sweeps are not here; see docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "== cargo fmt --check" >&2
cargo fmt --all --check
echo "== cargo clippy" >&2
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test" >&2
# A hung test must fail the run, not eat CI's whole budget: the suite takes minutes,
# so 45 minutes (compilation included) means something is stuck.
timeout --kill-after=30s 45m cargo test --workspace --locked
echo "== cargo build --release --bin weft" >&2
cargo build --release --locked --bin weft
# The lean tool (router, router ctl, decode) must build without the benchmarks;
# crates/cli/tests/lean_tool.rs checks what it depends on.
echo "== cargo check -p weft --no-default-features" >&2
cargo check --locked -p weft --no-default-features --all-targets

#!/usr/bin/env bash
# Builds target/debian/levee_<version>_amd64.deb: the release binary (one build), then
# levee(1) and the shell completions from it, then `cargo deb --no-build` packs them
# (assets and units: [package.metadata.deb] in crates/levee/Cargo.toml).
# Needs cargo-deb: cargo install --locked cargo-deb
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
# Reproducible: the build date levee --version shows is the last commit's.
if [ -z "${SOURCE_DATE_EPOCH:-}" ] && git rev-parse HEAD >/dev/null 2>&1; then
  SOURCE_DATE_EPOCH="$(git log -1 --format=%ct)"
  export SOURCE_DATE_EPOCH
fi
cargo build --release --locked -p levee
out="$target/release/packaging"
mkdir -p "$out"
levee="$target/release/levee"
# Compressed here: cargo-deb compresses only the man pages it did not find in target/.
"$levee" manpage | gzip -9n >"$out/levee.1.gz"
"$levee" completions bash >"$out/levee.bash"
"$levee" completions zsh >"$out/_levee"
"$levee" completions fish >"$out/levee.fish"
# --strip: the release profile keeps line tables (debug = 1) for backtraces; Debian
# binaries ship stripped.
cargo deb --no-build --strip --locked -p levee "$@"

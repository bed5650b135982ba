#!/usr/bin/env bash
# CI step (run as root on Debian 12, after the tests): builds the .deb, checks it with
# lintian, installs it with dpkg, checks the installed configuration, starts the
# installed binary as levee.service does (user levee, its command line) in front of a
# local origin and fetches a page twice (X-Cache: HIT the second time), then removes
# the package (everything but the conffile) and purges it (the conffile too).
# Where systemd is not PID 1 (CI containers), `systemd-analyze verify` checks the units.
# Needs: cargo-deb, lintian, curl, systemd (systemd-analyze); .ci/run installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"

fail() { echo "check-deb: $*" >&2; exit 1; }
step() { echo "check-deb: $* ($((SECONDS - t0)) s)"; }
t0=$SECONDS

if dpkg-query -W -f='${Status}' levee 2>/dev/null | grep -q installed; then
  fail "a levee package is installed already; dpkg --purge levee first"
fi
for port in 8080 8081; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    fail "127.0.0.1:$port is in use; the packaged config and its origin need it"
  fi
done

./packaging/build-deb.sh --quiet
deb="$(ls -t "$target"/debian/levee_*_amd64.deb | head -n 1)"
step "built $deb"

# lintian: no errors (warnings are printed, not fatal).
lintian --fail-on error --info "$deb"
step "lintian: no errors"

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if dpkg-query -W levee >/dev/null 2>&1; then dpkg --purge levee >/dev/null || true; fi
}
trap cleanup EXIT

dpkg -i "$deb"
test -x /usr/bin/levee || fail "no /usr/bin/levee"
getent passwd levee >/dev/null || fail "no levee user"
dpkg-query -W -f='${Conffiles}\n' levee | grep -q '^ /etc/levee/levee.toml ' \
  || fail "/etc/levee/levee.toml is not a conffile"
for f in /usr/share/man/man1/levee.1.gz /usr/share/bash-completion/completions/levee \
  /usr/share/zsh/vendor-completions/_levee /usr/share/fish/vendor_completions.d/levee.fish \
  /usr/lib/systemd/system/levee.service /lib/systemd/system/levee.socket; do
  test -s "$f" || fail "$f is missing"
done
for d in /var/lib/levee /var/cache/levee /var/log/levee; do
  [ "$(stat -c %U "$d")" = levee ] || fail "$d is not levee's"
done
levee --version
# levee.service is enabled, levee.socket is not (socket activation is the admin's choice).
test -L /etc/systemd/system/multi-user.target.wants/levee.service || fail "levee.service is not enabled"
test ! -e /etc/systemd/system/sockets.target.wants/levee.socket || fail "levee.socket was enabled"
step "installed"

# The units as systemd would read them (the binary they name is installed now).
systemd-analyze verify /usr/lib/systemd/system/levee.service /lib/systemd/system/levee.socket
step "systemd-analyze verify: clean"

# The unit's ExecStartPre=, then its ExecStart=, as its user (setpriv execs levee, as
# systemd does; runuser would stay in between).
runuser -u levee -- /usr/bin/levee serve --check --config /etc/levee/levee.toml >/dev/null
# The packaged config's backend, http://127.0.0.1:8081: a cacheable origin.
drop_to() { echo setpriv --reuid="$1" --regid="$2" --init-groups --inh-caps=-all --; }
$(drop_to nobody nogroup) /usr/bin/levee origin --listen 127.0.0.1:8081 --delay 5ms \
  --cache-control "max-age=60" --no-session &
pids+=($!)
$(drop_to levee levee) /usr/bin/levee serve --config /etc/levee/levee.toml &
pids+=($!)
for _ in $(seq 1 100); do
  curl -s -o /dev/null http://127.0.0.1:8080/ && break
  sleep 0.1
done
first="$(curl -sS -D - -o /dev/null http://127.0.0.1:8080/check-deb)"
second="$(curl -sS -D - -o /dev/null http://127.0.0.1:8080/check-deb)"
grep -qi '^x-cache: MISS' <<<"$first" || fail "first request not a MISS: $first"
grep -qi '^x-cache: HIT' <<<"$second" || fail "second request not a HIT: $second"
[ "$(ps -o user= -p "${pids[1]}")" = levee ] || fail "levee serve does not run as levee"
step "the installed levee, as user levee, served a cached page"
# SIGTERM, as systemctl stop sends: both drain and exit 0.
for pid in "${pids[@]}"; do kill -TERM "$pid"; done
for pid in "${pids[@]}"; do wait "$pid" || fail "a process exited $? after SIGTERM"; done
pids=()

dpkg -r levee
test ! -e /usr/bin/levee || fail "dpkg -r left /usr/bin/levee"
test -f /etc/levee/levee.toml || fail "dpkg -r removed the conffile"
dpkg --purge levee
test ! -e /etc/levee/levee.toml || fail "dpkg --purge left /etc/levee/levee.toml"
test ! -e /var/lib/levee || fail "dpkg --purge left /var/lib/levee"
step "removed (conffile kept), then purged (conffile gone)"

#!/usr/bin/env bash
# CI step after check-deb.sh (root, on Debian 12; the host's PID 1 need not be systemd):
# the .deb under a real systemd. Boots a minimal Debian 12 (debootstrap --variant=minbase,
# systemd as PID 1) with systemd-nspawn, installs the package there with apt, and with a
# test origin on 127.0.0.1:8081 and a steady load from the host (the container shares
# the host's network) checks, each action timed:
#   install   service active, READY=1 reached ("serving"), a page fetched twice a HIT;
#   reload    systemctl reload: 0 failed requests, same main pid, the page still a HIT;
#   restart   systemctl restart: 0 failed requests, a new main pid, the page a HIT read
#             from the disk tier (levee_disk_hits_total) after the memory was lost;
#   upgrade   apt-get install of a newer version of the same build, whose levee.toml
#             changed too (a comment line): 0 failed requests, the admin's edited
#             /etc/levee/levee.toml kept, the package's new one beside it (.dpkg-dist),
#             as apt does with --force-confdef --force-confold;
#   remove    apt-get remove, then dpkg --purge: no unit, no binary, no port held, the
#             conffile kept until the purge, the levee user kept (see debian/postrm).
# With LEVEE_UPGRADE_FROM=old.deb (an older build of the package, e.g. from main), first:
#   from-old  the old package installed, its conffile edited, then the upgrade to this
#             one under load: the failed requests are counted, not fatal (the old levee
#             did not hand its sockets to systemd), the admin's file kept; then purged.
# Everything it starts (container, origin, load) is stopped by a trap, the tree removed.
#
# Uses the newest target/debian/levee_*.deb (check-deb.sh's; LEVEE_DEB=path to pick one),
# building it only when there is none. LEVEE_DEBOOTSTRAP_TARBALL=path keeps debootstrap's
# downloads between runs (made on the first). LEVEE_CHECK_DIR: where the tree goes
# (default /var/tmp; it needs ~300 MB and must allow device files and exec).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"

fail() { echo "check-systemd: FAILED: $*" >&2; exit 1; }
step() { echo "check-systemd: $* ($((SECONDS - t0)) s)"; }
ms() { echo $(($(date +%s%N) / 1000000)); }
t0=$SECONDS

[ "$(id -u)" = 0 ] || fail "run as root (it boots a container and installs a package in it)"
need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
command -v curl >/dev/null || need+=(curl)
if [ "${#need[@]}" -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
    || fail "cannot install ${need[*]}; install them with apt-get"
fi
for port in 8080 8081 9091; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    fail "127.0.0.1:$port is in use on this host; the container shares its network and needs the port"
  fi
done

deb="${LEVEE_DEB:-}"
if [ -z "$deb" ]; then
  deb="$(ls -t "$target"/debian/levee_*_amd64.deb 2>/dev/null | head -n 1 || true)"
  if [ -z "$deb" ]; then
    ./packaging/build-deb.sh --quiet
    deb="$(ls -t "$target"/debian/levee_*_amd64.deb | head -n 1)"
  fi
fi
[ -f "$deb" ] || fail "no package at $deb; build one with packaging/build-deb.sh"
version="$(dpkg-deb -f "$deb" Version)"
step "package $deb ($version)"

work="$(mktemp -d "${LEVEE_CHECK_DIR:-/var/tmp}/levee-check-systemd.XXXXXX")"
tree="$work/tree"
nspawn=""
leader=""
bg=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  touch "$work"/stop 2>/dev/null || true
  for pid in "${bg[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${bg[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ -n "$nspawn" ] && kill -0 "$nspawn" 2>/dev/null; then
    # nspawn turns the first SIGTERM into a clean poweroff of the container, the second
    # into an immediate one.
    kill -TERM "$nspawn" 2>/dev/null || true
    for _ in $(seq 1 300); do kill -0 "$nspawn" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$nspawn" 2>/dev/null || true
    wait "$nspawn" 2>/dev/null || true
  fi
  if [ "$rc" != 0 ] && [ -s "$work/journal" ]; then
    echo "check-systemd: levee's journal in the container:" >&2
    tail -n 40 "$work/journal" >&2
  fi
  # --one-file-system: never into something still mounted in the tree.
  rm -rf --one-file-system "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The minimal system: systemd as PID 1 (systemd-sysv), adduser for the package's
# postinst; apt, dpkg and the libraries levee links come with minbase.
include=systemd,systemd-sysv,adduser
mirror=http://deb.debian.org/debian
tarball="${LEVEE_DEBOOTSTRAP_TARBALL:-}"
if [ -n "$tarball" ] && [ ! -s "$tarball" ]; then
  debootstrap --variant=minbase --include="$include" --make-tarball="$tarball" bookworm \
    "$work/dl" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log"; fail "debootstrap could not download from $mirror"; }
  rm -rf "$work/dl"
fi
if [ -n "$tarball" ]; then
  debootstrap --variant=minbase --include="$include" --unpack-tarball="$(realpath "$tarball")" \
    bookworm "$tree" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log"; fail "debootstrap failed (log above)"; }
else
  debootstrap --variant=minbase --include="$include" bookworm "$tree" "$mirror" \
    >"$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log"; fail "debootstrap failed (log above)"; }
fi
step "debootstrap: minimal Debian 12 in $tree"

# The package as built, and a newer version of the same files for the upgrade: only
# its version and its levee.toml (a comment line) differ.
cp "$deb" "$tree/root/levee.deb"
dpkg-deb -R "$deb" "$work/newer"
sed -i "s/^Version: .*/Version: ${version}+upgrade1/" "$work/newer/DEBIAN/control"
echo "# levee ${version}+upgrade1 (check-systemd)" >>"$work/newer/etc/levee/levee.toml"
dpkg-deb -b "$work/newer" "$tree/root/levee-newer.deb" >/dev/null
if [ -n "${LEVEE_UPGRADE_FROM:-}" ]; then
  cp "$LEVEE_UPGRADE_FROM" "$tree/root/levee-old.deb" || fail "cannot read LEVEE_UPGRADE_FROM=$LEVEE_UPGRADE_FROM"
fi
# The origin runs on the host, from the package's own binary.
dpkg-deb -x "$deb" "$work/pkg"
levee="$work/pkg/usr/bin/levee"

# Boot. No D-Bus on the host: no machine registration, and nspawn stays in the caller's
# cgroup. The console output is kept for a failure's message.
systemd-nspawn -q -b -D "$tree" --register=no --keep-unit --console=passive \
  >"$work/console" 2>&1 &
nspawn=$!
# The container's PID 1 is nspawn's child once it has exec'd systemd.
for _ in $(seq 1 300); do
  for c in $(cat /proc/"$nspawn"/task/*/children 2>/dev/null); do
    [ "$(cat /proc/"$c"/comm 2>/dev/null)" = systemd ] && leader=$c
  done
  [ -n "$leader" ] && break
  kill -0 "$nspawn" 2>/dev/null || { cat "$work/console"; fail "systemd-nspawn exited"; }
  sleep 0.1
done
[ -n "$leader" ] || fail "no systemd in the container after 30 s"
ct() { nsenter -t "$leader" -a "$@"; }
boot=$(ms)
# Until systemd answers on its private socket (it does a moment after its exec), then
# until the boot is over.
state=""
for _ in $(seq 1 600); do
  state="$(timeout 120 nsenter -t "$leader" -a systemctl is-system-running --wait 2>/dev/null || true)"
  [ -n "$state" ] && break
  sleep 0.1
done
case "$state" in
  running | degraded) ;;
  *) tail -n 30 "$work/console"; fail "the container's systemd is '$state', not running" ;;
esac
step "booted: $(ct systemctl --version | head -n 1), system $state after $(($(ms) - boot)) ms"

# The test origin: cacheable pages, slow enough that a miss is not free.
"$levee" origin --listen 127.0.0.1:8081 --delay 5ms --cache-control "max-age=600" \
  --no-session >"$work/origin.log" 2>&1 &
bg+=($!)

show() { ct systemctl show -p "$1" --value levee; }
headers() { curl -sS --max-time 10 -D - -o /dev/null "http://127.0.0.1:8080$1"; }
x_cache() { headers "$1" | tr -d '\r' | sed -n 's/^[Xx]-[Cc]ache: //p'; }
journal() { ct journalctl -u levee --no-pager -o cat >"$work/journal" 2>&1 || true; }

# Requests from the host until the file stop appears, bounded: at most 6000 requests
# or 120 s. Ten per curl, on one kept-alive connection, as a browser fetches a page's
# parts (curl, like browsers, retries a request once when a reused connection turns out
# closed). One line per request: its status (000: no answer) and the connections
# opened for it.
load() {
  local out=$1 n=0 end=$((SECONDS + 120)) args
  while [ ! -e "$work/stop" ] && [ "$n" -lt 6000 ] && [ "$SECONDS" -lt "$end" ]; do
    args=()
    for i in 0 1 2 3 4 5 6 7 8 9; do
      args+=(-o /dev/null "http://127.0.0.1:8080/load/$(((n + i) % 40))")
    done
    curl -s --max-time 10 -w '%{http_code} %{num_connects}\n' "${args[@]}" >>"$out" 2>/dev/null || true
    n=$((n + 10))
  done
}
lines() { wc -l <"$1"; }
wait_lines() { # FILE N: until the load has made N requests (it stops within 120 s)
  while [ "$(lines "$1")" -lt "$2" ]; do
    kill -0 "${bg[-1]}" 2>/dev/null || fail "the load stopped early"
    sleep 0.05
  done
}
# measure_load NAME COMMAND...: runs COMMAND during the load, then lets the load go on
# for 100 more requests (the new process serving them); sets took (ms), n (requests),
# failed and connects. Fails only if COMMAND does.
measure_load() {
  local name=$1 out="$work/$1.load" start
  shift
  rm -f "$work/stop"
  : >"$out" # before the load starts: wait_lines reads it at once
  load "$out" &
  bg+=($!)
  wait_lines "$out" 100
  start=$(ms)
  "$@" || fail "$name: '$*' failed"
  took=$(($(ms) - start))
  n=$(lines "$out")
  wait_lines "$out" $((n + 100))
  touch "$work/stop"
  wait "${bg[-1]}"
  unset 'bg[-1]'
  n=$(lines "$out")
  failed=$(awk '$1 != 200' "$out" | wc -l)
  connects=$(awk '{ c += $2 } END { print c + 0 }' "$out")
}
# under_load NAME COMMAND...: measure_load, and fails on any failed request.
under_load() {
  local name=$1 took n failed connects
  measure_load "$@"
  shift
  echo "check-systemd: $name: '$*' took $took ms; load: $n requests over $connects connections, $failed failed"
  [ "$failed" = 0 ] || { sort "$work/$name.load" | uniq -c >&2; fail "$name: $failed of $n requests failed"; }
}

# apt-get install DEB (a file in the container's /root), as an admin would run it
# unattended: a conffile the admin edited is kept (--force-confold), one they did not is
# replaced (--force-confdef).
apt_install() {
  ct env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "/root/$1" >"$work/apt.log" 2>&1 || { tail -n 30 "$work/apt.log"; return 1; }
}
conf="$tree/etc/levee/levee.toml"

# --- from an older package (optional) ---
if [ -n "${LEVEE_UPGRADE_FROM:-}" ]; then
  apt_install levee-old.deb || fail "from-old: apt-get install of $LEVEE_UPGRADE_FROM failed"
  old_version="$(ct dpkg-query -W -f='${Version}' levee)"
  [ "$(show ActiveState)" = active ] || fail "from-old: the old levee.service is not active"
  echo "# edited by the admin (check-systemd)" >>"$conf"
  edited="$(md5sum <"$conf")"
  measure_load from-old apt_install levee.deb
  echo "check-systemd: from-old: upgrade $old_version -> $version took $took ms; load: $n requests, $failed failed (the old levee kept no sockets in systemd's store)"
  [ "$(show ActiveState)" = active ] || fail "from-old: levee.service is not active after the upgrade"
  [ "$(md5sum <"$conf")" = "$edited" ] || fail "from-old: the admin's levee.toml was not kept"
  if [ -e "$conf.dpkg-dist" ]; then
    echo "check-systemd: from-old: the package's new levee.toml is beside the admin's, as levee.toml.dpkg-dist; the difference:"
    diff -u "$conf" "$conf.dpkg-dist" | sed 's/^/    /' || true
  fi
  ct dpkg --purge levee >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "from-old: dpkg --purge failed"; }
  step "from-old: upgraded from $old_version, purged"
fi

# --- install ---
start=$(ms)
apt_install levee.deb || fail "apt-get install of the package failed"
step "apt-get install ./levee.deb: $(($(ms) - start)) ms"
[ "$(ct systemctl is-enabled levee)" = enabled ] || fail "levee.service is not enabled"
[ "$(show ActiveState)" = active ] || { journal; fail "levee.service is not active"; }
[ "$(show StatusText)" = serving ] || fail "no READY=1 (Type=notify): status '$(show StatusText)'"
pid1=$(show MainPID)
[ "$(x_cache /check)" = MISS ] || fail "the first request for /check was not a MISS"
[ "$(x_cache /check)" = HIT ] || fail "the second request for /check was not a HIT"
step "installed: $(ct systemctl show -p ActiveState,SubState,StatusText,MainPID,NFileDescriptorStore levee | tr '\n' ' ')"

# --- reload ---
under_load reload ct systemctl reload levee
[ "$(show MainPID)" = "$pid1" ] || fail "reload: the main pid changed"
[ "$(show ActiveState)" = active ] || fail "reload: levee.service is not active"
[ "$(x_cache /check)" = HIT ] || fail "reload: /check is no longer a HIT (cache lost)"
step "reloaded: same main pid $pid1, /check still a HIT"

# The admin's edit of the conffile: a comment, and the admin listener (for the disk
# tier's counters below). Applied by the restart.
echo "# edited by the admin (check-systemd)" >>"$conf"
sed -i 's/^# listen = "127.0.0.1:9091"/listen = "127.0.0.1:9091"/' "$conf"
grep -q '^listen = "127.0.0.1:9091"' "$conf" || fail "no '# listen = \"127.0.0.1:9091\"' line in [admin] of the packaged levee.toml to turn on"
edited="$(md5sum <"$conf")"

# --- restart ---
under_load restart ct systemctl restart levee
pid2=$(show MainPID)
[ "$pid2" != "$pid1" ] || fail "restart: the main pid did not change"
# The new levee got its predecessor's sockets back from systemd's fd store (the
# environment it started with; levee removes the variables from its own).
passed="$(ct cat /proc/"$pid2"/environ | tr '\0' '\n' | grep '^LISTEN_FDNAMES=' || true)"
[ -n "$passed" ] || fail "restart: the new levee got no socket from systemd's fd store (FileDescriptorStoreMax=?)"
[ "$(show StatusText)" = serving ] || fail "restart: status '$(show StatusText)'"
[ "$(x_cache /check)" = HIT ] || fail "restart: /check is not a HIT after the restart"
disk_hits="$(curl -sS --max-time 10 http://127.0.0.1:9091/metrics | sed -n 's/^levee_disk_hits_total \([0-9.e+]*\)$/\1/p')"
[ "${disk_hits%%.*}" -ge 1 ] 2>/dev/null \
  || fail "restart: the new process has no disk hit (levee_disk_hits_total '$disk_hits'); is [cache] disk_path set?"
step "restarted: main pid $pid1 -> $pid2, /check a HIT from the disk tier (levee_disk_hits_total $disk_hits), $(show NFileDescriptorStore) sockets in systemd's fd store, passed as $passed"

# --- upgrade ---
under_load upgrade apt_install levee-newer.deb
# shellcheck disable=SC2016 # dpkg-query's ${Version}, not the shell's
[ "$(ct dpkg-query -W -f='${Version}' levee)" = "${version}+upgrade1" ] || fail "upgrade: the new version is not installed"
pid3=$(show MainPID)
[ "$pid3" != "$pid2" ] || fail "upgrade: levee was not restarted (main pid $pid2)"
[ "$(show StatusText)" = serving ] || fail "upgrade: status '$(show StatusText)'"
passed="$(ct cat /proc/"$pid3"/environ | tr '\0' '\n' | grep '^LISTEN_FDNAMES=' || true)"
[ -n "$passed" ] || fail "upgrade: the new levee got no socket from systemd's fd store"
[ "$(md5sum <"$conf")" = "$edited" ] || fail "upgrade: the admin's /etc/levee/levee.toml was not kept"
grep -q "^# levee ${version}+upgrade1" "$conf.dpkg-dist" \
  || fail "upgrade: the package's new levee.toml is not beside the admin's as levee.toml.dpkg-dist"
[ "$(x_cache /check)" = HIT ] || fail "upgrade: /check is not a HIT after the upgrade"
step "upgraded to ${version}+upgrade1: main pid $pid2 -> $pid3, the admin's levee.toml kept (the package's as .dpkg-dist), /check a HIT, sockets passed as $passed"
journal

# --- remove, purge ---
start=$(ms)
ct env DEBIAN_FRONTEND=noninteractive apt-get remove -y -q levee >"$work/apt.log" 2>&1 \
  || { tail -n 30 "$work/apt.log"; fail "apt-get remove failed"; }
step "apt-get remove: $(($(ms) - start)) ms"
[ ! -e "$tree/usr/bin/levee" ] || fail "remove: /usr/bin/levee is still there"
for u in /lib/systemd/system/levee.service /usr/lib/systemd/system/levee.service /lib/systemd/system/levee.socket; do
  [ ! -e "$tree$u" ] || fail "remove: $u is still there"
done
# Masked until the purge, as dh_installsystemd's scripts do.
case "$(show LoadState)" in
  masked | not-found) ;;
  *) fail "remove: systemd still has levee.service ($(show LoadState))" ;;
esac
[ -f "$conf" ] || fail "remove: the conffile went (only a purge removes it)"
if (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; then
  fail "remove: something still listens on 127.0.0.1:8080 (the fd store not released?)"
fi
ct dpkg --purge levee >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "dpkg --purge failed"; }
for f in /etc/levee /var/cache/levee /var/lib/levee /var/log/levee \
  /etc/systemd/system/levee.service /etc/systemd/system/multi-user.target.wants/levee.service; do
  [ ! -e "$tree$f" ] && [ ! -L "$tree$f" ] || fail "purge: $f is still there"
done
[ "$(show LoadState)" = not-found ] || fail "purge: systemd still knows levee.service ($(show LoadState))"
ct getent passwd levee >/dev/null || fail "purge: the levee user went (postrm keeps it, as Debian's varnish does)"
step "removed (conffile kept), purged (conffile, cache, state gone; the levee user kept)"
step "all checks passed"

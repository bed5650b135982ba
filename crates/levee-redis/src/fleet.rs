//! The fleet's leases on a backend (levee-limits' fleet.rs decides what a node asks
//! for; levee-tiers renews). One hash per backend, `P fleet:S` (`S`: the backend's
//! scope, the same on every node serving it), one field per node:
//! `expires_ms grant report` (`Report::to_line`). A node renews with one script,
//! atomic in Redis: the other nodes' expired leases are dropped, and the node is
//! granted what it asks for, at most the capacity no live node holds (a node holds its
//! grant, or more while requests it started before a smaller grant are still in
//! flight). So the grants never add up past the capacity however stale a node's view
//! is; what each asks for only decides how fast room moves to where it is needed.
//! Times are Redis's own clock (`TIME`): the nodes' clocks never matter.
//!
//! `P fleet` is the channel where a node says "renew now" (`S node`): it freed room
//! someone wants, or a person waits on it for room another holds.

use std::sync::OnceLock;
use std::time::Duration;

use crate::conn::Conn;
use crate::inner::Inner;

/// Drops the expired leases, grants what is asked within what no one else holds,
/// writes this node's lease; answers the grant, then every live other node and its
/// lease's value.
const RENEW: &str = r#"
local key, me = KEYS[1], ARGV[1]
local ttl, want, cap, line = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', key)
local held = 0
local out = {''}
for i = 1, #all, 2 do
  local node, v = all[i], all[i + 1]
  if node ~= me then
    local exp, grant, used = string.match(v, '^(%d+) (%d+) (%d+) ')
    if exp == nil or tonumber(exp) < now then
      redis.call('HDEL', key, node)
    else
      held = held + math.max(tonumber(grant), tonumber(used))
      out[#out + 1] = node
      out[#out + 1] = v
    end
  end
end
local grant = math.max(0, math.min(want, cap - held))
redis.call('HSET', key, me, (now + ttl) .. ' ' .. grant .. ' ' .. line)
redis.call('PEXPIRE', key, ttl * 20)
out[1] = tostring(grant)
return out
"#;

fn script() -> &'static redis::Script {
    static SCRIPT: OnceLock<redis::Script> = OnceLock::new();
    SCRIPT.get_or_init(|| redis::Script::new(RENEW))
}

/// Where a node stands after a renewal: its grant, and the other live nodes' leases
/// (`node`, `grant`, `report line`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub grant: usize,
    pub others: Vec<(String, usize, String)>,
}

/// A scope as a key part: what levee serves a backend under (a site's name, a path, a
/// backend's address) with nothing that a key, a channel message or a Cluster hash
/// tag would read: spaces and braces.
pub(crate) fn scope_part(scope: &str) -> String {
    scope
        .chars()
        .map(|c| match c {
            ' ' | '{' | '}' | '\n' | '\r' | '\t' => '_',
            c => c,
        })
        .collect()
}

pub(crate) async fn renew(
    inner: &Inner,
    scope: &str,
    want: usize,
    capacity: usize,
    line: &str,
    ttl: Duration,
) -> Option<Lease> {
    let mut conn = inner.conn()?;
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let mut call = script().key(inner.keys.fleet(&scope_part(scope)));
    call.arg(&inner.node)
        .arg(ttl_ms)
        .arg(want)
        .arg(capacity)
        .arg(line);
    let answer: Vec<String> = inner.run(call.invoke_async(&mut conn)).await?;
    parse(&answer)
}

/// The script's answer; None when it is not one (a Redis someone else scripts).
fn parse(answer: &[String]) -> Option<Lease> {
    let (grant, rest) = answer.split_first()?;
    let grant = grant.parse().ok()?;
    let others = rest
        .chunks_exact(2)
        .filter_map(|pair| {
            // `expires grant report`
            let mut f = pair[1].splitn(3, ' ');
            let _expires = f.next()?;
            let grant = f.next()?.parse().ok()?;
            Some((pair[0].clone(), grant, f.next()?.to_string()))
        })
        .collect();
    Some(Lease { grant, others })
}

/// Tells every node serving `scope` to renew now.
pub(crate) async fn nudge(inner: &Inner, scope: &str) {
    let Some(mut conn) = inner.conn() else { return };
    let mut cmd = redis::cmd("PUBLISH");
    cmd.arg(inner.keys.fleet_channel())
        .arg(format!("{} {}", scope_part(scope), inner.node));
    let _ = inner.run(cmd.query_async::<i64>(&mut conn)).await;
}

/// A message from the fleet channel: wakes the renewal of its scope, unless this node
/// sent it.
pub(crate) fn received(inner: &Inner, payload: &[u8]) {
    let Ok(text) = std::str::from_utf8(payload) else {
        return;
    };
    let Some((scope, node)) = text.split_once(' ') else {
        return;
    };
    if node == inner.node {
        return;
    }
    if let Some(wake) = inner.fleet.find(scope) {
        wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_a_grant_and_the_other_leases() {
        let answer: Vec<String> = ["2", "n1", "123 1 0 4 0 0 3 ", "n2", "junk"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let lease = parse(&answer).unwrap();
        assert_eq!(lease.grant, 2);
        assert_eq!(lease.others, vec![("n1".into(), 1, "0 4 0 0 3 ".into())]);
        assert_eq!(parse(&[]), None);
        assert_eq!(parse(&["x".to_string()]), None);
        assert_eq!(scope_part("a b{c}"), "a_b_c_");
    }
}

/// One backend's fleet as Redis holds it: its scope and each live node's lease
/// (`node`, `grant`, `report line`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetView {
    pub scope: String,
    pub nodes: Vec<(String, usize, String)>,
}

/// What `levee serve --check` shows of the shared tier: what the URLs reached (one
/// server, Sentinel's primary, a Cluster's primaries) and every backend's fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedView {
    pub mode: crate::target::Mode,
    /// `host:port` of each primary written to.
    pub primaries: Vec<String>,
    pub fleets: Vec<FleetView>,
}

/// What the fleets sharing the Redis at `urls` (keys under `prefix`) hold now, for
/// `levee serve --check`: each backend's live leases. Err says why Redis could not be
/// read.
pub async fn read_fleets(
    urls: &[String],
    prefix: &str,
    limit: Duration,
) -> Result<SharedView, String> {
    let steps = async {
        let target = crate::target::Target::parse(urls).map_err(|e| e.to_string())?;
        let crate::target::Connected {
            mut conn,
            primaries,
            mode,
            ..
        } = target.connect(limit).await?;
        let now_ms: u64 = {
            let (secs, micros): (u64, u64) = redis::cmd("TIME")
                .query_async(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            secs * 1000 + micros / 1000
        };
        // SCAN, never KEYS: the cache's Redis may hold millions of keys. In a Cluster,
        // on every primary.
        let pattern = format!("{prefix}fleet:*");
        let mut keys: Vec<String> = Vec::new();
        for primary in &primaries {
            keys.extend(scan(&mut conn, primary, &pattern).await?);
        }
        keys.sort_unstable();
        keys.dedup();
        let mut out = Vec::new();
        for key in keys {
            let all: Vec<(String, String)> = redis::cmd("HGETALL")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            let nodes = all
                .into_iter()
                .filter_map(|(node, v)| {
                    let mut f = v.splitn(3, ' ');
                    let expires: u64 = f.next()?.parse().ok()?;
                    let grant = f.next()?.parse().ok()?;
                    (expires >= now_ms).then(|| (node, grant, f.next().unwrap_or("").to_string()))
                })
                .collect();
            let scope = key.strip_prefix(&format!("{prefix}fleet:")).unwrap_or(&key);
            out.push(FleetView {
                scope: scope.to_string(),
                nodes,
            });
        }
        Ok(SharedView {
            mode,
            primaries,
            fleets: out,
        })
    };
    tokio::time::timeout(limit, steps)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {limit:?}")))
}

/// Every key matching `pattern` on one server (`primary`, for a Cluster's routing).
async fn scan(conn: &mut Conn, primary: &str, pattern: &str) -> Result<Vec<String>, String> {
    let mut keys = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000);
        let answer: redis::Value = match conn {
            Conn::One(c) => cmd.query_async(c).await,
            Conn::Cluster(c) => {
                let (host, port) = primary
                    .rsplit_once(':')
                    .and_then(|(h, p)| Some((h.to_string(), p.parse().ok()?)))
                    .ok_or_else(|| format!("`{primary}` is not host:port"))?;
                let route = redis::cluster_routing::RoutingInfo::SingleNode(
                    redis::cluster_routing::SingleNodeRoutingInfo::ByAddress { host, port },
                );
                c.route_command(cmd, route).await
            }
        }
        .map_err(|e| e.to_string())?;
        let (next, batch): (u64, Vec<String>) =
            redis::from_redis_value(answer).map_err(|e| e.to_string())?;
        keys.extend(batch);
        cursor = next;
        if cursor == 0 {
            return Ok(keys);
        }
    }
}

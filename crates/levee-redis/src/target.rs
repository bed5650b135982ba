//! Where the shared tier lives, as the configured URLs say, and how to reach it:
//!
//! - **one server**: `redis://host:port/db` (`rediss://` for TLS, `redis+unix://`). If
//!   that server says it is a Cluster node, it is the seed of a Cluster;
//! - **Sentinel**: `redis+sentinel://[user:pass@]host1:26379,host2:26379/mymaster[/db]`
//!   (`rediss+sentinel://` for TLS to the sentinels and the primary), the form redis-py,
//!   redis-vl and Prefect read. The sentinels are asked for the primary; the primary is
//!   asked (`ROLE`) whether it is one;
//! - **Cluster**: several `redis://` URLs, its seed nodes.
//!
//! Each connection gives the command connection ([`Conn`]), a subscriber (pub/sub), and
//! the primaries written to (what `serve --check`, the dashboard and the logs show).

use std::time::Duration;

use redis::aio::PubSub;
use redis::cluster::ClusterClientBuilder;
use redis::{AsyncConnectionConfig, Client, ConnectionAddr, IntoConnectionInfo, Value};

use crate::config::RedisError;
use crate::conn::Conn;
use crate::keys;

/// What the URLs name.
pub(crate) enum Target {
    /// One URL of one server (or a Cluster's only seed: found out on connecting).
    Server {
        client: Client,
    },
    Sentinel(Sentinel),
    /// Several URLs: a Cluster's seed nodes.
    Cluster {
        seeds: Vec<String>,
    },
}

/// How levee reaches a primary through Sentinel.
pub(crate) struct Sentinel {
    /// The sentinels, asked in turn.
    sentinels: Vec<Client>,
    /// The name the sentinels monitor the primary under.
    service: String,
    /// `redis` or `rediss`: the primary's scheme.
    scheme: &'static str,
    /// `user:pass@` or empty: the primary's credentials, as written.
    userinfo: String,
    db: i64,
    /// `?...` as written, for the primary's URL (`protocol=3`, ...).
    query: String,
}

/// Which of the three, for metrics, logs and `serve --check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Server,
    Sentinel,
    Cluster,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Server => "server",
            Mode::Sentinel => "sentinel",
            Mode::Cluster => "cluster",
        }
    }
}

/// One connection, ready to be subscribed and used.
pub(crate) struct Connected {
    pub(crate) conn: Conn,
    /// Not yet subscribed to anything.
    pub(crate) pubsub: PubSub,
    pub(crate) mode: Mode,
    /// The primaries written to, `host:port`, sorted.
    pub(crate) primaries: Vec<String>,
}

const SENTINEL_PORT: u16 = 26379;

impl Target {
    /// Reads the configured URLs. Never connects.
    pub(crate) fn parse(urls: &[String]) -> Result<Target, RedisError> {
        match urls {
            [] => Err(RedisError::NoUrl),
            [url] if is_sentinel(url) => Ok(Target::Sentinel(Sentinel::parse(url)?)),
            [url] => Ok(Target::Server {
                client: keys::client(url)?,
            }),
            seeds => {
                for url in seeds {
                    if is_sentinel(url) {
                        return Err(RedisError::Url {
                            url: keys::shown(url),
                            reason: "a Sentinel URL names every sentinel itself: give it alone, \
                                     as redis+sentinel://host1:26379,host2:26379/mymaster"
                                .to_string(),
                        });
                    }
                    if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                        return Err(RedisError::Url {
                            url: keys::shown(url),
                            reason: "several URLs are a Cluster's seed nodes: each must be \
                                     redis://host:port or rediss://host:port"
                                .to_string(),
                        });
                    }
                    keys::client(url)?;
                }
                Ok(Target::Cluster {
                    seeds: seeds.to_vec(),
                })
            }
        }
    }

    /// Connects (the command connection and a subscriber) within `limit`.
    pub(crate) async fn connect(&self, limit: Duration) -> Result<Connected, String> {
        let config = AsyncConnectionConfig::new().set_connection_timeout(Some(limit));
        match self {
            Target::Server { client } => {
                let mut conn = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .map_err(|e| e.to_string())?;
                if cluster_enabled(&mut conn).await {
                    let seed = client.get_connection_info().clone();
                    return connect_cluster(vec![seed], limit).await;
                }
                let pubsub = client.get_async_pubsub().await.map_err(|e| e.to_string())?;
                Ok(Connected {
                    conn: Conn::One(conn),
                    pubsub,
                    mode: Mode::Server,
                    primaries: vec![addr_of(client.get_connection_info().addr())],
                })
            }
            Target::Sentinel(s) => s.connect(&config).await,
            Target::Cluster { seeds } => {
                let infos = seeds
                    .iter()
                    .map(|u| u.as_str().into_connection_info().map_err(|e| e.to_string()))
                    .collect::<Result<Vec<_>, _>>()?;
                connect_cluster(infos, limit).await
            }
        }
    }
}

fn is_sentinel(url: &str) -> bool {
    url.starts_with("redis+sentinel://") || url.starts_with("rediss+sentinel://")
}

/// Whether a server says it is a Cluster node (`INFO cluster`); false if it cannot say.
async fn cluster_enabled(conn: &mut redis::aio::MultiplexedConnection) -> bool {
    let info: redis::RedisResult<String> =
        redis::cmd("INFO").arg("cluster").query_async(conn).await;
    info.is_ok_and(|i| i.lines().any(|l| l.trim() == "cluster_enabled:1"))
}

/// `host:port` (or the socket's path) as logs and `serve --check` show a server.
fn addr_of(addr: &ConnectionAddr) -> String {
    match addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{host}:{port}")
        }
        ConnectionAddr::Unix(path) => path.display().to_string(),
        #[allow(unreachable_patterns)]
        other => other.to_string(),
    }
}

async fn connect_cluster(
    seeds: Vec<redis::ConnectionInfo>,
    limit: Duration,
) -> Result<Connected, String> {
    let client = ClusterClientBuilder::new(seeds.clone())
        .connection_timeout(limit)
        .build()
        .map_err(|e| e.to_string())?;
    let mut conn = client
        .get_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let primaries = cluster_primaries(&mut conn).await?;
    // A Cluster forwards every PUBLISH to all its nodes: one subscriber, on any node,
    // hears every other levee node. The primaries are tried first, then the seeds.
    let template = seeds
        .first()
        .cloned()
        .ok_or_else(|| "no seed node".to_string())?;
    let mut tried = Vec::new();
    let candidates = primaries
        .iter()
        .filter_map(|a| {
            let (host, port) = a.rsplit_once(':')?;
            Some((host.to_string(), port.parse::<u16>().ok()?))
        })
        .map(|(host, port)| with_addr(&template, host, port))
        .chain(seeds.iter().cloned());
    for info in candidates {
        match Client::open(info).map_err(|e| e.to_string()) {
            Ok(client) => match tokio::time::timeout(limit, client.get_async_pubsub()).await {
                Ok(Ok(pubsub)) => {
                    return Ok(Connected {
                        conn: Conn::Cluster(conn),
                        pubsub,
                        mode: Mode::Cluster,
                        primaries,
                    })
                }
                Ok(Err(e)) => tried.push(e.to_string()),
                Err(_) => tried.push(format!("no answer within {limit:?}")),
            },
            Err(e) => tried.push(e),
        }
    }
    Err(format!(
        "no Cluster node took a subscription ({})",
        tried.join("; ")
    ))
}

/// `info` pointed at `host:port`, with its TLS and credentials.
fn with_addr(info: &redis::ConnectionInfo, host: String, port: u16) -> redis::ConnectionInfo {
    let addr = match info.addr() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host, port),
    };
    info.clone().set_addr(addr)
}

/// The Cluster's primaries (`CLUSTER SLOTS`), `host:port`, sorted.
pub(crate) async fn cluster_primaries(
    conn: &mut impl redis::aio::ConnectionLike,
) -> Result<Vec<String>, String> {
    let slots: Value = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(conn)
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    if let Value::Array(ranges) = slots {
        for range in ranges {
            let Value::Array(parts) = range else { continue };
            // [start, end, [host, port, id, ...], replicas...]
            let Some(Value::Array(primary)) = parts.get(2) else {
                continue;
            };
            let host = match primary.first() {
                Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                Some(Value::SimpleString(s)) => s.clone(),
                _ => continue,
            };
            let Some(Value::Int(port)) = primary.get(1) else {
                continue;
            };
            out.push(format!("{host}:{port}"));
        }
    }
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        return Err("the Cluster serves no slot".to_string());
    }
    Ok(out)
}

impl Sentinel {
    fn parse(url: &str) -> Result<Sentinel, RedisError> {
        let bad = |reason: &str| {
            RedisError::Url {
            url: keys::shown(url),
            reason: format!(
                "{reason}: expected redis+sentinel://[user:password@]host1:26379,host2:26379/mymaster[/db]"
            ),
        }
        };
        let (scheme, rest) = if let Some(rest) = url.strip_prefix("rediss+sentinel://") {
            ("rediss", rest)
        } else if let Some(rest) = url.strip_prefix("redis+sentinel://") {
            ("redis", rest)
        } else {
            return Err(bad("not a Sentinel URL"));
        };
        // `#insecure` (redis-rs: TLS without checking the certificate's name) applies to
        // the sentinels and the primary alike.
        let (rest, fragment) = match rest.split_once('#') {
            Some((r, f)) => (r, format!("#{f}")),
            None => (rest, String::new()),
        };
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, format!("?{q}{fragment}")),
            None => (rest, fragment.clone()),
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((u, h)) => (format!("{u}@"), h),
            None => (String::new(), authority),
        };
        let mut segments = path.split('/').filter(|s| !s.is_empty());
        let service = segments
            .next()
            .ok_or_else(|| bad("no primary's name after the sentinels"))?
            .to_string();
        let db = match segments.next() {
            Some(d) => d
                .parse::<i64>()
                .map_err(|_| bad("the database after the name is not a number"))?,
            None => 0,
        };
        if hosts.is_empty() {
            return Err(bad("no sentinel named"));
        }
        let mut sentinels = Vec::new();
        for host in hosts.split(',') {
            let host = host.trim();
            let with_port = if host.ends_with(']') || !host.contains(':') {
                format!("{host}:{SENTINEL_PORT}")
            } else {
                host.to_string()
            };
            // The sentinels take no credentials: those in the URL are the primary's.
            let client = keys::client(&format!("{scheme}://{with_port}/{fragment}"))
                .map_err(|_| bad(&format!("`{host}` is not host:port")))?;
            sentinels.push(client);
        }
        Ok(Sentinel {
            sentinels,
            service,
            scheme,
            userinfo,
            db,
            query,
        })
    }

    /// Asks the sentinels, in turn, which server is the primary: `host:port` (an IPv6
    /// host in brackets). Each sentinel gets its own bounded try, so that a hung one
    /// does not stop the others from being heard (why this is not redis-rs's
    /// `Sentinel`, which asks them in order with no limit of time).
    pub(crate) async fn named_primary(
        &self,
        config: &AsyncConnectionConfig,
    ) -> Result<String, String> {
        let mut tried = Vec::new();
        for sentinel in &self.sentinels {
            let shown = addr_of(sentinel.get_connection_info().addr());
            let ask = async {
                let mut conn = sentinel
                    .get_multiplexed_async_connection_with_config(config)
                    .await?;
                redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(&self.service)
                    .query_async::<Option<(String, u16)>>(&mut conn)
                    .await
            };
            match tokio::time::timeout(Duration::from_secs(1), ask).await {
                Ok(Ok(Some((host, port)))) if host.contains(':') => {
                    return Ok(format!("[{host}]:{port}"))
                }
                Ok(Ok(Some((host, port)))) => return Ok(format!("{host}:{port}")),
                Ok(Ok(None)) => tried.push(format!(
                    "sentinel {shown} does not monitor `{}`",
                    self.service
                )),
                Ok(Err(e)) => tried.push(format!("sentinel {shown}: {e}")),
                Err(_) => tried.push(format!("sentinel {shown}: no answer within 1s")),
            }
        }
        Err(format!(
            "no sentinel named a primary ({})",
            tried.join("; ")
        ))
    }

    /// Connects to the primary the sentinels name and checks that it says it is one.
    async fn connect(&self, config: &AsyncConnectionConfig) -> Result<Connected, String> {
        let primary = self.named_primary(config).await?;
        let url = format!(
            "{}://{}{primary}/{}{}",
            self.scheme, self.userinfo, self.db, self.query
        );
        let client = keys::client(&url).map_err(|e| e.to_string())?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(config)
            .await
            .map_err(|e| format!("the primary {primary}: {e}"))?;
        if !is_primary(&mut conn).await {
            return Err(format!(
                "the sentinels name {primary} as `{}`'s primary, but it says it is not one (a failover is under way)",
                self.service
            ));
        }
        let pubsub = client.get_async_pubsub().await.map_err(|e| e.to_string())?;
        Ok(Connected {
            conn: Conn::One(conn),
            pubsub,
            mode: Mode::Sentinel,
            primaries: vec![primary],
        })
    }
}

/// Whether the server answers `ROLE` as a primary.
async fn is_primary(conn: &mut impl redis::aio::ConnectionLike) -> bool {
    let role: redis::RedisResult<Value> = redis::cmd("ROLE").query_async(conn).await;
    role.is_ok_and(|v| role_is_primary(&v))
}

/// Whether an answer to `ROLE` is a primary's (`["master", offset, replicas]`).
pub(crate) fn role_is_primary(role: &Value) -> bool {
    let Value::Array(parts) = role else {
        return false;
    };
    match parts.first() {
        Some(Value::BulkString(b)) => b == b"master",
        Some(Value::SimpleString(s)) => s == "master",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn one_url_is_a_server_several_a_cluster_and_sentinel_its_own_form() {
        assert!(matches!(
            Target::parse(&urls(&["redis://127.0.0.1:6379/0"])),
            Ok(Target::Server { .. })
        ));
        assert!(matches!(
            Target::parse(&urls(&["redis://a:1", "redis://b:2", "rediss://c:3"])),
            Ok(Target::Cluster { seeds }) if seeds.len() == 3
        ));
        let Ok(Target::Sentinel(s)) = Target::parse(&urls(&[
            "redis+sentinel://u:p%40ss@10.0.0.1:26379,10.0.0.2,[::1]:26380/mymaster/2?protocol=3",
        ])) else {
            panic!("a Sentinel URL")
        };
        assert_eq!(s.sentinels.len(), 3);
        assert_eq!(s.service, "mymaster");
        assert_eq!(s.db, 2);
        assert_eq!(s.scheme, "redis");
        assert_eq!(s.userinfo, "u:p%40ss@");
        assert_eq!(s.query, "?protocol=3");
        let Ok(Target::Sentinel(s)) =
            Target::parse(&urls(&["rediss+sentinel://h1:1,h2:2/primary"]))
        else {
            panic!("a TLS Sentinel URL")
        };
        assert_eq!(
            (s.scheme, s.db, s.service.as_str()),
            ("rediss", 0, "primary")
        );
    }

    #[test]
    fn what_cannot_work_is_refused_saying_what_to_write() {
        for bad in [
            vec!["redis+sentinel://h1:26379"],
            vec!["redis+sentinel:///mymaster"],
            vec!["redis+sentinel://h1:26379/mymaster/x"],
            vec!["redis+sentinel://h1:26379/m", "redis://a:1"],
            vec!["redis://a:1", "redis+unix:///tmp/s"],
        ] {
            let e = match Target::parse(&urls(&bad)) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{bad:?} accepted"),
            };
            assert!(e.contains("redis"), "{e}");
        }
        assert!(matches!(Target::parse(&[]), Err(RedisError::NoUrl)));
    }
}

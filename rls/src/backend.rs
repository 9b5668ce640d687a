//! The one place that talks to Redis: sends a request's plan (redis-cell
//! commands only) as one pipeline, over a single server, a cluster or a
//! sentinel-managed master, reconnecting after failures.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelServerType};
use redis::{RedisResult, Value};
use tokio::sync::Mutex;

use crate::module::{self, Found};
use crate::plan::Plan;
use crate::settings::{redis_url, RedisSettings};

pub enum Backend {
    /// A pool of multiplexed connections that reconnect by themselves.
    Single {
        conns: Vec<ConnectionManager>,
        next: AtomicUsize,
    },
    /// A single server over TLS: a pool of multiplexed connections made
    /// by the service's own connector (client certificate, CA, name
    /// check), each made again on the next request after it fails.
    Tls {
        link: Box<TlsLink>,
        conns: Vec<Mutex<Option<redis::aio::MultiplexedConnection>>>,
        next: AtomicUsize,
    },
    Cluster(ClusterConnection),
    Sentinel {
        client: Box<Mutex<SentinelClient>>,
        conn: Mutex<Option<redis::aio::MultiplexedConnection>>,
    },
}

fn urls(s: &RedisSettings) -> Vec<String> {
    s.url
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(|u| redis_url(s, u))
        .collect()
}

/// How to reach a single server over TLS.
pub struct TlsLink {
    connector: tokio_native_tls::TlsConnector,
    host: String,
    port: u16,
    info: redis::RedisConnectionInfo,
    timeout: std::time::Duration,
}

impl TlsLink {
    fn new(s: &RedisSettings, url: &str) -> RedisResult<TlsLink> {
        use redis::IntoConnectionInfo;
        let config = |text: String| {
            redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, "TLS to Redis", text))
        };
        let info = url.into_connection_info()?;
        let redis::ConnectionAddr::TcpTls { host, port, .. } = info.addr else {
            return Err(config(format!(
                "REDIS_TLS: '{}' is not host:port (or a rediss:// URL)",
                s.url
            )));
        };
        Ok(TlsLink {
            connector: crate::tls::redis_connector(s).map_err(config)?,
            host,
            port,
            info: info.redis,
            timeout: s.timeout,
        })
    }

    async fn connect(&self) -> RedisResult<redis::aio::MultiplexedConnection> {
        let host = self.host.trim_matches(['[', ']']);
        let timed_out = || {
            redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connecting to Redis timed out",
            ))
        };
        let tls = tokio::time::timeout(self.timeout, async {
            let tcp = tokio::net::TcpStream::connect((host, self.port)).await?;
            tcp.set_nodelay(true)?;
            self.connector
                .connect(host, tcp)
                .await
                .map_err(std::io::Error::other)
        })
        .await
        .map_err(|_| timed_out())??;
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(self.timeout);
        let (conn, driver) = tokio::time::timeout(
            self.timeout,
            redis::aio::MultiplexedConnection::new_with_config(&self.info, tls, config),
        )
        .await
        .map_err(|_| timed_out())??;
        tokio::spawn(driver);
        Ok(conn)
    }

    /// The slot's connection, made when it has none.
    async fn get(
        &self,
        slot: &Mutex<Option<redis::aio::MultiplexedConnection>>,
    ) -> RedisResult<redis::aio::MultiplexedConnection> {
        let mut guard = slot.lock().await;
        if let Some(c) = guard.as_ref() {
            return Ok(c.clone());
        }
        let c = self.connect().await?;
        *guard = Some(c.clone());
        Ok(c)
    }
}

impl Backend {
    /// Connects as the reference does from `REDIS_TYPE` and `REDIS_URL`
    /// (`SINGLE`: one address; `CLUSTER`: seed addresses separated by commas;
    /// `SENTINEL`: `master_name,sentinel1,sentinel2...`).
    pub async fn connect(s: &RedisSettings) -> RedisResult<Arc<Backend>> {
        let custom_tls = !(s.tls_cacert.is_empty()
            && (s.tls_client_cert.is_empty() || s.tls_client_key.is_empty()));
        if s.tls && custom_tls && s.kind != "SINGLE" {
            return Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "TLS to Redis",
                format!(
                    "REDIS_TLS_CACERT and REDIS_TLS_CLIENT_CERT/KEY are taken with REDIS_TYPE=SINGLE only (not {})",
                    s.kind
                ),
            )));
        }
        let backend = match s.kind.as_str() {
            "CLUSTER" => {
                let client = redis::cluster::ClusterClientBuilder::new(urls(s))
                    .connection_timeout(s.timeout)
                    .response_timeout(s.timeout)
                    .retries(2)
                    .build()?;
                Backend::Cluster(client.get_async_connection().await?)
            }
            "SENTINEL" => {
                let mut parts = s.url.split(',').map(str::trim);
                let master = parts.next().unwrap_or_default().to_string();
                let sentinels: Vec<String> = parts.map(|u| redis_url(s, u)).collect();
                let node = redis::sentinel::SentinelNodeConnectionInfo {
                    tls_mode: None,
                    redis_connection_info: Some(redis::RedisConnectionInfo {
                        password: (!s.auth.is_empty()).then(|| s.auth.clone()),
                        ..Default::default()
                    }),
                };
                let client = SentinelClient::build(
                    sentinels,
                    master,
                    Some(node),
                    SentinelServerType::Master,
                )?;
                Backend::Sentinel {
                    client: Box::new(Mutex::new(client)),
                    conn: Mutex::new(None),
                }
            }
            _ if s.tls && !(s.socket_type == "unix" && s.url.starts_with('/')) => {
                let url = urls(s).into_iter().next().unwrap_or_default();
                let link = TlsLink::new(s, &url)?;
                let mut conns = Vec::new();
                for _ in 0..s.pool_size.max(1) {
                    let c = link.connect().await.map_err(|e| {
                        redis::RedisError::from((
                            e.kind(),
                            "TLS to Redis",
                            format!("{}:{}: {e}", link.host, link.port),
                        ))
                    })?;
                    conns.push(Mutex::new(Some(c)));
                }
                Backend::Tls {
                    link: Box::new(link),
                    conns,
                    next: AtomicUsize::new(0),
                }
            }
            _ => {
                let url = urls(s).into_iter().next().unwrap_or_default();
                let client = redis::Client::open(url)?;
                let config = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(s.timeout)
                    .set_response_timeout(s.timeout)
                    // A dead server must answer an error quickly, not hold the
                    // request through a long retry loop: the next request
                    // reconnects.
                    .set_number_of_retries(1)
                    .set_max_delay(200);
                let mut conns = Vec::new();
                for _ in 0..s.pool_size.max(1) {
                    conns.push(
                        ConnectionManager::new_with_config(client.clone(), config.clone()).await?,
                    );
                }
                Backend::Single {
                    conns,
                    next: AtomicUsize::new(0),
                }
            }
        };
        Ok(Arc::new(backend))
    }

    fn pipeline(plan: &Plan) -> redis::Pipeline {
        let mut p = redis::pipe();
        if plan.atomic {
            p.atomic();
        }
        for c in &plan.commands {
            let mut cmd = redis::cmd(&c[0]);
            for a in &c[1..] {
                cmd.arg(a);
            }
            p.add_command(cmd);
        }
        p
    }

    /// Sends the plan; one list of integers per command.
    ///
    /// A single server's path is awaited in place; the others' futures
    /// (TLS, cluster, sentinels: kilobytes of client state) are boxed, so
    /// that a decision's future, which holds this one, stays small: it is
    /// boxed and copied once per request.
    pub async fn run(&self, plan: &Plan) -> RedisResult<Vec<Vec<i64>>> {
        if plan.commands.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            Backend::Single { conns, next } => Self::run_single(conns, next, plan).await,
            _ => Box::pin(self.run_other(plan)).await,
        }
    }

    async fn run_single(
        conns: &[ConnectionManager],
        next: &AtomicUsize,
        plan: &Plan,
    ) -> RedisResult<Vec<Vec<i64>>> {
        let mut c = conns[next.fetch_add(1, Ordering::Relaxed) % conns.len()].clone();
        Self::pipeline(plan).query_async(&mut c).await
    }

    /// [`Backend::run`] on a TLS link, a cluster or the sentinels' master.
    async fn run_other(&self, plan: &Plan) -> RedisResult<Vec<Vec<i64>>> {
        match self {
            Backend::Single { conns, next } => Self::run_single(conns, next, plan).await,
            Backend::Tls { link, conns, next } => {
                let slot = &conns[next.fetch_add(1, Ordering::Relaxed) % conns.len()];
                let mut c = link.get(slot).await?;
                let r = Self::pipeline(plan).query_async(&mut c).await;
                if let Err(e) = &r {
                    if unreachable(e) {
                        *slot.lock().await = None;
                    }
                }
                r
            }
            Backend::Cluster(conn) => {
                let mut c = conn.clone();
                if plan.all_or_nothing {
                    // The keys share one hash tag: one slot, one transaction.
                    let key = plan.commands[0]
                        .iter()
                        .find(|a| a.starts_with('{'))
                        .cloned()
                        .unwrap_or_default();
                    return cluster_transaction(&mut c, &plan.commands, &key).await;
                }
                // The reference's keys have no hash tag: each group of
                // commands goes to its own key's node, all at once.
                let futs = plan.groups.iter().map(|g| {
                    let mut c = conn.clone();
                    let cmds = &plan.commands[g.clone()];
                    async move {
                        if cmds.len() == 1 {
                            let mut cmd = redis::cmd(&cmds[0][0]);
                            for a in &cmds[0][1..] {
                                cmd.arg(a);
                            }
                            Ok(vec![cmd.query_async::<Vec<i64>>(&mut c).await?])
                        } else {
                            cluster_transaction(&mut c, cmds, &cmds[0][1]).await
                        }
                    }
                });
                let parts: Vec<Vec<Vec<i64>>> = futures_util::future::try_join_all(futs).await?;
                Ok(parts.into_iter().flatten().collect())
            }
            Backend::Sentinel { client, conn } => {
                let mut c = sentinel_master(client, conn).await?;
                let r = Self::pipeline(plan).query_async(&mut c).await;
                if r.is_err() {
                    // The master may have moved: ask the sentinels again next time.
                    *conn.lock().await = None;
                }
                r
            }
        }
    }

    /// A connection to the server (the sentinels' master) for a check.
    async fn any_connection(&self) -> RedisResult<Check> {
        Ok(match self {
            Backend::Single { conns, .. } => Check::Plain(Box::new(conns[0].clone())),
            Backend::Tls { link, conns, .. } => Check::Sentinel(link.get(&conns[0]).await?),
            Backend::Cluster(conn) => Check::Cluster(conn.clone()),
            Backend::Sentinel { client, conn } => {
                Check::Sentinel(sentinel_master(client, conn).await?)
            }
        })
    }

    /// Whether every server this backend sends to (every master of a
    /// cluster) has the module at the version the service needs, by
    /// `MODULE LIST`, or by the probe on `probe_key` where a server answers
    /// `MODULE LIST` with an error (a user without `@admin`, a renamed
    /// command). Each server as `(name, found)`; `server` names a single
    /// server or the sentinels' master. `Err` when a server cannot be
    /// reached: nothing is known then.
    pub async fn check_module(
        &self,
        server: &str,
        probe_key: &str,
    ) -> RedisResult<Vec<(String, Found)>> {
        let list = redis::cmd("MODULE").arg("LIST").clone();
        let mut c = self.any_connection().await?;
        let listed: RedisResult<Vec<(String, Value)>> = match &mut c {
            Check::Cluster(conn) => {
                use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
                let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
                conn.route_command(&list, routing).await.map(|v| match v {
                    // One reply per master, by address.
                    Value::Map(by_node) => by_node
                        .into_iter()
                        .map(|(addr, reply)| (text(&addr).unwrap_or_default(), reply))
                        .collect(),
                    one => vec![(server.to_string(), one)],
                })
            }
            Check::Plain(conn) => list
                .query_async::<Value>(&mut **conn)
                .await
                .map(|v| vec![(server.to_string(), v)]),
            Check::Sentinel(conn) => list
                .query_async::<Value>(conn)
                .await
                .map(|v| vec![(server.to_string(), v)]),
        };
        match listed {
            Ok(replies) => Ok(replies
                .into_iter()
                .map(|(name, reply)| (name, module::from_list(&modules(&reply))))
                .collect()),
            Err(e) if unreachable(&e) => Err(e),
            Err(_) => {
                let mut probe = redis::cmd("FW.PEEK");
                probe.arg(probe_key).arg(module::PROBE);
                let r = match &mut c {
                    Check::Cluster(conn) => probe.query_async::<Value>(conn).await,
                    Check::Plain(conn) => probe.query_async::<Value>(&mut **conn).await,
                    Check::Sentinel(conn) => probe.query_async::<Value>(conn).await,
                };
                let found = match r {
                    Ok(_) => module::from_probe(Ok(())),
                    Err(e) if unreachable(&e) => return Err(e),
                    Err(e) => {
                        let text = match (e.code(), e.detail()) {
                            (Some(code), Some(detail)) => format!("{code} {detail}"),
                            _ => e.to_string(),
                        };
                        module::from_probe(Err(&text))
                    }
                };
                Ok(vec![(server.to_string(), found)])
            }
        }
    }

    /// Whether the backend answers a PING: the first connection's check at
    /// start and the health check's Redis probe. A sentinel-managed master
    /// is asked of the sentinels when there is no connection to it yet.
    pub async fn ping(&self) -> RedisResult<()> {
        let ping = redis::cmd("PING");
        let r = match self {
            Backend::Single { conns, .. } => {
                let mut c = conns[0].clone();
                ping.query_async::<String>(&mut c).await
            }
            Backend::Tls { link, conns, .. } => {
                let mut c = link.get(&conns[0]).await?;
                let r = ping.query_async::<String>(&mut c).await;
                if matches!(&r, Err(e) if unreachable(e)) {
                    *conns[0].lock().await = None;
                }
                r
            }
            Backend::Cluster(conn) => {
                let mut c = conn.clone();
                ping.query_async::<String>(&mut c).await
            }
            Backend::Sentinel { client, conn } => {
                let mut c = sentinel_master(client, conn).await?;
                let r = ping.query_async::<String>(&mut c).await;
                if r.is_err() {
                    // The master may have moved: ask the sentinels again.
                    *conn.lock().await = None;
                }
                r
            }
        };
        match r?.as_str() {
            "PONG" => Ok(()),
            other => Err(redis::RedisError::from((
                redis::ErrorKind::ResponseError,
                "unexpected PING response",
                other.to_string(),
            ))),
        }
    }
}

/// A connection for a module check.
enum Check {
    Plain(Box<ConnectionManager>),
    Cluster(ClusterConnection),
    Sentinel(redis::aio::MultiplexedConnection),
}

/// The connection to the master the sentinels named last, or a new one to
/// the master they name now where there is none (none yet, or forgotten
/// after a failure).
async fn sentinel_master(
    client: &Mutex<SentinelClient>,
    conn: &Mutex<Option<redis::aio::MultiplexedConnection>>,
) -> RedisResult<redis::aio::MultiplexedConnection> {
    let mut guard = conn.lock().await;
    if let Some(c) = guard.clone() {
        return Ok(c);
    }
    let c = client.lock().await.get_async_connection().await?;
    *guard = Some(c.clone());
    Ok(c)
}

/// A failure to reach a server (as opposed to its error reply).
pub(crate) fn unreachable(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal()
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

/// `MODULE LIST`'s entries as `(name, ver)` (RESP2 arrays of field/value
/// pairs, or RESP3 maps).
fn modules(reply: &Value) -> Vec<(String, i64)> {
    let Value::Array(entries) = reply else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|entry| {
            let pairs: Vec<(&Value, &Value)> = match entry {
                Value::Array(items) => items
                    .chunks(2)
                    .filter_map(|p| Some((p.first()?, p.get(1)?)))
                    .collect(),
                Value::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
                _ => return None,
            };
            let field = |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| text(k).as_deref() == Some(name))
                    .map(|(_, v)| *v)
            };
            let name = text(field("name")?)?;
            let ver = match field("ver")? {
                Value::Int(n) => *n,
                other => text(other)?.parse().ok()?,
            };
            Some((name, ver))
        })
        .collect()
}

/// Commands in one MULTI/EXEC on the node of `key`'s slot (the crate
/// would route CL.THROTTLEALL by its numkeys argument).
async fn cluster_transaction(
    c: &mut ClusterConnection,
    cmds: &[Vec<String>],
    key: &str,
) -> RedisResult<Vec<Vec<i64>>> {
    use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};
    let route =
        SingleNodeRoutingInfo::SpecificNode(Route::new(key_slot(key.as_bytes()), SlotAddr::Master));
    let mut p = redis::pipe();
    p.atomic();
    for cv in cmds {
        let mut cmd = redis::cmd(&cv[0]);
        for a in &cv[1..] {
            cmd.arg(a);
        }
        p.add_command(cmd);
    }
    let mut vals = c.route_pipeline(&p, cmds.len() + 1, 1, route).await?;
    match vals.pop() {
        Some(redis::Value::Array(items)) => {
            redis::from_owned_redis_value(redis::Value::Array(items))
        }
        _ => Err((
            redis::ErrorKind::ResponseError,
            "the transaction was not executed",
        )
            .into()),
    }
}

/// The cluster slot of a key, as Redis Cluster computes it (the module's
/// own reckoning, shared).
pub fn key_slot(key: &[u8]) -> u16 {
    cell_core::trial::slot(key)
}

#[cfg(test)]
mod tests {
    #[test]
    fn slots_as_redis_computes_them() {
        // CLUSTER KEYSLOT answers these.
        assert_eq!(super::key_slot(b"foo"), 12182);
        assert_eq!(
            super::key_slot(b"{user1000}.following"),
            super::key_slot(b"user1000")
        );
        assert_eq!(super::key_slot(b"123456789"), 0x31C3);
    }
}

//! The one place that talks to Redis: sends a request's plan (redis-cell
//! commands only) as one pipeline, over a single server, a cluster or a
//! sentinel-managed master, reconnecting after failures.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelServerType};
use redis::RedisResult;
use tokio::sync::Mutex;

use crate::plan::Plan;
use crate::settings::{redis_url, RedisSettings};

pub enum Backend {
    /// A pool of multiplexed connections that reconnect by themselves.
    Single {
        conns: Vec<ConnectionManager>,
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

impl Backend {
    /// Connects as the reference does from `REDIS_TYPE` and `REDIS_URL`
    /// (`SINGLE`: one address; `CLUSTER`: seed addresses separated by commas;
    /// `SENTINEL`: `master_name,sentinel1,sentinel2...`).
    pub async fn connect(s: &RedisSettings) -> RedisResult<Arc<Backend>> {
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
    pub async fn run(&self, plan: &Plan) -> RedisResult<Vec<Vec<i64>>> {
        if plan.commands.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            Backend::Single { conns, next } => {
                let i = next.fetch_add(1, Ordering::Relaxed) % conns.len();
                let mut c = conns[i].clone();
                Self::pipeline(plan).query_async(&mut c).await
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
                let mut guard = conn.lock().await;
                let mut c = match guard.clone() {
                    Some(c) => c,
                    None => {
                        let c = client.lock().await.get_async_connection().await?;
                        *guard = Some(c.clone());
                        c
                    }
                };
                drop(guard);
                let r = Self::pipeline(plan).query_async(&mut c).await;
                if r.is_err() {
                    // The master may have moved: ask the sentinels again next time.
                    *conn.lock().await = None;
                }
                r
            }
        }
    }

    /// Whether the backend answers a PING (the health check's Redis probe).
    pub async fn ping(&self) -> bool {
        let plan_ping = || redis::cmd("PING");
        match self {
            Backend::Single { conns, .. } => {
                let mut c = conns[0].clone();
                plan_ping().query_async::<String>(&mut c).await.is_ok()
            }
            Backend::Cluster(conn) => {
                let mut c = conn.clone();
                plan_ping().query_async::<String>(&mut c).await.is_ok()
            }
            Backend::Sentinel { conn, .. } => match conn.lock().await.clone() {
                Some(mut c) => plan_ping().query_async::<String>(&mut c).await.is_ok(),
                None => true,
            },
        }
    }
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

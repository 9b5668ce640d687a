//! TLS on the gRPC listener and on the Redis link, with client
//! certificates on both, as Envoy Gateway deploys the service: the
//! certificates are made here by `openssl`, the Redis server (TLS port,
//! `tls-auth-clients yes`) by the test kit.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use openssl::ssl::{SslConnector, SslFiletype, SslMethod};
use tonic::transport::{Endpoint, Uri};

use crate::support::*;
use crate::tls_front::TlsFront;
use crate::xds_server::TlsFiles;

const CONFIG: &str = r#"
domain: tls
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 3
"#;

/// A certificate `name.crt` (key `name.key`) that the CA in `dir` issues
/// with the given subjectAltName and extended key usage.
pub(crate) fn issue(dir: &Path, name: &str, san: &str, usage: &str) {
    let (key, csr, crt, ext) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
        format!("{name}.ext"),
    );
    std::fs::write(
        dir.join(&ext),
        format!("subjectAltName={san}\nextendedKeyUsage={usage}\nbasicConstraints=CA:FALSE\n"),
    )
    .unwrap();
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &key,
            "-out",
            &csr,
        ],
    );
    sign_with_ca(dir, &csr, &ext, &crt);
}

/// A CA; Redis's certificate (127.0.0.1); the service's gRPC certificate
/// (`localhost`); a client certificate for `envoy.test.internal` (Envoy's
/// and the service's own towards Redis) and one for another name; an xDS
/// server's (`xds.test.internal`) and the service's client certificate
/// towards it (`ratelimit`); and a client certificate from a CA nobody
/// trusts.
pub(crate) fn certificates() -> PathBuf {
    let d = tempdir("tls-certs");
    make_ca(&d, "test CA");
    issue(&d, "redis", "IP:127.0.0.1", "serverAuth");
    issue(&d, "rls", "DNS:localhost,IP:127.0.0.1", "serverAuth");
    issue(&d, "envoy", "DNS:envoy.test.internal", "clientAuth");
    issue(&d, "other", "DNS:other.test.internal", "clientAuth");
    issue(&d, "xds", "DNS:xds.test.internal", "serverAuth");
    issue(&d, "ratelimit", "DNS:ratelimit.test.internal", "clientAuth");
    let rogue = d.join("rogue");
    std::fs::create_dir_all(&rogue).unwrap();
    make_ca(&rogue, "rogue CA");
    issue(&rogue, "envoy", "DNS:envoy.test.internal", "clientAuth");
    d
}

/// A self-signed CA (`ca.crt`, `ca.key`) named `cn` in `dir`.
pub(crate) fn make_ca(dir: &Path, cn: &str) {
    let subject = format!("/CN={cn}");
    openssl(
        dir,
        &[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", &subject,
            "-keyout", "ca.key", "-out", "ca.crt",
        ],
    );
}

pub(crate) fn path(dir: &Path, f: &str) -> String {
    dir.join(f).to_string_lossy().into_owned()
}

/// A gRPC client over TLS to the service on `port`, verifying it against
/// `ca` under `localhost`, offering `cert` (`dir/name.crt` and `.key`).
pub(crate) async fn tls_client(
    port: u16,
    ca: &str,
    cert: Option<(&Path, &str)>,
) -> Result<Client, String> {
    let mut b = SslConnector::builder(SslMethod::tls_client()).unwrap();
    b.set_ca_file(ca).unwrap();
    b.set_alpn_protos(b"\x02h2").unwrap();
    if let Some((dir, name)) = cert {
        b.set_certificate_chain_file(dir.join(format!("{name}.crt")))
            .unwrap();
        b.set_private_key_file(dir.join(format!("{name}.key")), SslFiletype::PEM)
            .unwrap();
    }
    let connector = b.build();
    let connect = tower::service_fn(move |_: Uri| {
        let connector = connector.clone();
        async move {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
            let ssl = connector
                .configure()
                .and_then(|c| c.into_ssl("localhost"))
                .map_err(std::io::Error::other)?;
            let mut s = tokio_openssl::SslStream::new(ssl, tcp).map_err(std::io::Error::other)?;
            std::pin::Pin::new(&mut s)
                .connect()
                .await
                .map_err(std::io::Error::other)?;
            Ok::<_, std::io::Error>(TokioIo::new(s))
        }
    });
    let channel = Endpoint::from_shared(format!("http://localhost:{port}"))
        .unwrap()
        .timeout(Duration::from_secs(5))
        .connect_with_connector(connect)
        .await
        .map_err(|e| format!("{e:?}"))?;
    Ok(Client::new(channel))
}

/// The common name of the certificate the service on `port` shows.
async fn served_name(port: u16, ca: &str) -> String {
    let mut b = SslConnector::builder(SslMethod::tls_client()).unwrap();
    b.set_ca_file(ca).unwrap();
    let ssl = b
        .build()
        .configure()
        .unwrap()
        .into_ssl("localhost")
        .unwrap();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut s = tokio_openssl::SslStream::new(ssl, tcp).unwrap();
    std::pin::Pin::new(&mut s).connect().await.unwrap();
    let cert = s.ssl().peer_certificate().expect("a certificate");
    let cn = cert
        .subject_name()
        .entries_by_nid(openssl::nid::Nid::COMMONNAME)
        .next()
        .expect("a CN");
    String::from_utf8_lossy(cn.data().as_slice()).into_owned()
}

/// A call's codes, or the error it ended with (a refused handshake ends
/// the connection: with TLS 1.3 the client learns it at its first read).
async fn try_call(c: Result<Client, String>, user: &str) -> Result<Vec<i32>, String> {
    let mut c = c?;
    c.should_rate_limit(request("tls", vec![desc(&[("user", user)])]))
        .await
        .map(|r| codes(&r.into_inner()))
        .map_err(|e| format!("{e:?}"))
}

/// A Redis server with the module behind TLS that takes only a client
/// certificate the test CA issued: the server's own TLS port where it was
/// built with TLS, else a TLS front (`tls_front`) before its plain port (the
/// servers unpacked from PyPI wheels have no TLS). Which one is written to
/// `$RLS_TLS_REPORT` (rls/test fails when no server of its run had TLS of
/// its own) and to stderr.
pub(crate) struct TlsRedis {
    /// Where the service connects: TLS.
    pub tls_port: u16,
    /// The server's own plain port, for the test's checks.
    pub plain_port: u16,
    behind: Behind,
}

/// What serves the TLS port (kept until the test ends).
enum Behind {
    Own(testkit::Server),
    Front { _front: TlsFront, server: Redis },
}

impl TlsRedis {
    pub fn start(certs: &Path) -> TlsRedis {
        // Its TLS port is chosen here, so that a restart keeps it.
        let tls_port = testkit::free_port();
        let spec = testkit::Spec {
            tls: true,
            ..Default::default()
        }
        .config("tls-cert-file", &path(certs, "redis.crt"))
        .config("tls-key-file", &path(certs, "redis.key"))
        .config("tls-ca-cert-file", &path(certs, "ca.crt"))
        .config("tls-auth-clients", "yes")
        .config("tls-port", &tls_port.to_string());
        assert!(
            spec.modules.iter().all(|(m, _)| m.is_file()),
            "module not found at {:?} (cargo build --release, or set REDIS_CELL_MODULE)",
            spec.modules
        );
        let binary = spec.binary.display().to_string();
        let (redis, line) = match testkit::Server::try_start(spec) {
            Ok(server) => (
                TlsRedis {
                    tls_port,
                    plain_port: server.port,
                    behind: Behind::Own(server),
                },
                format!("tls {binary}"),
            ),
            Err(exit) if testkit::no_tls_support(&exit.log) => {
                eprintln!("{binary} was built without TLS: its Redis TLS link is a TLS front's");
                let server = Redis::start();
                let front = TlsFront::start(
                    &TlsFiles {
                        cert: certs.join("redis.crt"),
                        key: certs.join("redis.key"),
                        client_ca: certs.join("ca.crt"),
                    },
                    server.port,
                );
                (
                    TlsRedis {
                        tls_port: front.port,
                        plain_port: server.port,
                        behind: Behind::Front {
                            _front: front,
                            server,
                        },
                    },
                    format!("tls-front {binary}"),
                )
            }
            Err(exit) => panic!("{exit}"),
        };
        if let Ok(report) = std::env::var("RLS_TLS_REPORT") {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(report)
                .expect("RLS_TLS_REPORT");
            writeln!(f, "{line}").expect("RLS_TLS_REPORT");
        }
        redis
    }

    /// The service's address for it.
    pub fn url(&self) -> String {
        format!("127.0.0.1:{}", self.tls_port)
    }

    /// Kills the server and starts it again on the same ports.
    pub fn restart(&mut self) {
        match &mut self.behind {
            Behind::Own(server) => server.restart(),
            Behind::Front { server, .. } => server.restart(),
        }
    }
}

/// The service's settings for TLS on its two links, as Envoy Gateway sets
/// them: its gRPC listener (`rls.crt`, client certificates from the test
/// CA for `envoy.test.internal` only) and its Redis link (the CA, and
/// `envoy.crt` as its client certificate).
pub(crate) fn tls_links_env(certs: &Path) -> Vec<(String, String)> {
    let p = |f: &str| path(certs, f);
    [
        ("REDIS_TLS", "true".to_string()),
        ("REDIS_TLS_CACERT", p("ca.crt")),
        ("REDIS_TLS_CLIENT_CERT", p("envoy.crt")),
        ("REDIS_TLS_CLIENT_KEY", p("envoy.key")),
        ("GRPC_SERVER_USE_TLS", "true".to_string()),
        ("GRPC_SERVER_TLS_CERT", p("rls.crt")),
        ("GRPC_SERVER_TLS_KEY", p("rls.key")),
        ("GRPC_SERVER_TLS_CA_CERT", p("ca.crt")),
        ("GRPC_CLIENT_TLS_CACERT", p("ca.crt")),
        ("GRPC_CLIENT_TLS_SAN", "envoy.test.internal".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_and_redis_links_with_client_certificates() {
    not_near_hour_end();
    let certs = certificates();
    let p = |f: &str| path(&certs, f);
    let redis = TlsRedis::start(&certs);
    let (redis_url, plain_port) = (redis.url(), redis.plain_port);
    // Without a client certificate the server refuses the service's link:
    // it does not start (once its retries run out), and says why.
    let env = [
        ("REDIS_TLS", "true".to_string()),
        ("REDIS_TLS_CACERT", p("ca.crt")),
        ("REDIS_STARTUP_MAX_ELAPSED_TIME", "1s".to_string()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let refused = Rls::try_start_healthy(&redis_url, &[("tls.yaml", CONFIG)], &env);
    let text = refused.err().expect("started without a client certificate");
    assert!(
        text.contains("TLS to Redis") && text.contains(&redis_url),
        "{text}"
    );

    // Envoy Gateway's variables, plus the reference's client verification.
    let mut env = tls_links_env(&certs);
    env.push(("GRPC_HANDSHAKE_TIMEOUT".into(), "3s".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let rls = Rls::start(&redis_url, &[("tls.yaml", CONFIG)], &env);
    let ca = p("ca.crt");
    let port = rls.grpc_port;

    // An idle connection (no TLS hello) and a plaintext gRPC client hold up
    // nobody: the next client is served while they are open.
    let idle = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let plain = tokio::time::timeout(Duration::from_secs(10), async {
        let mut c = Client::connect(format!("http://127.0.0.1:{port}")).await?;
        c.should_rate_limit(request("tls", vec![desc(&[("user", "x")])]))
            .await
            .map_err(|e| -> Box<dyn std::error::Error> { Box::new(e) })
    })
    .await
    .expect("a plaintext client is answered (refused) at once");
    assert!(plain.is_err(), "a plaintext call was served: {plain:?}");

    let user = unique("tls");
    let mut decided = Vec::new();
    for _ in 0..4 {
        let c = tls_client(port, &ca, Some((&certs, "envoy"))).await;
        decided.push(try_call(c, &user).await.expect("served over mutual TLS")[0]);
    }
    assert_eq!(decided, vec![OK, OK, OK, OVER]);
    // The counter is in the Redis behind the (TLS) link.
    let keys = resp_command(plain_port, &["DBSIZE"]).unwrap();
    assert!(
        keys.starts_with(':') && keys.trim() != ":0",
        "no key written: {keys}"
    );

    // Refused: no client certificate, one for another name, one from a
    // CA the service does not trust.
    for (what, cert) in [
        ("no certificate", None),
        ("another name", Some((certs.clone(), "other"))),
        ("an untrusted CA", Some((certs.join("rogue"), "envoy"))),
    ] {
        let cert = cert.as_ref().map(|(d, n)| (d.as_ref(), *n));
        let r = try_call(tls_client(port, &ca, cert).await, &user).await;
        assert!(r.is_err(), "{what}: served: {r:?}");
    }

    // The idle socket is closed by the handshake deadline, and the service
    // is still up and deciding.
    let mut buf = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        use tokio::io::AsyncReadExt;
        let mut idle = idle;
        idle.read(&mut buf).await
    })
    .await
    .expect("the idle connection closed by GRPC_HANDSHAKE_TIMEOUT");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    assert_eq!(http_get(rls.http_port, "/healthcheck").unwrap().0, 200);
    let c = tls_client(port, &ca, Some((&certs, "envoy"))).await;
    assert_eq!(try_call(c, &unique("tls")).await.unwrap(), vec![OK]);
}

/// `GRPC_SERVER_TLS_CA_CERT` alone (what Envoy Gateway sets) asks no
/// client certificate, as in the reference, which does not read it; a
/// renewed certificate is served without a restart; a certificate and key
/// that do not belong together stop the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_tls_without_client_verification() {
    let certs = certificates();
    let p = |f: &str| path(&certs, f);
    let redis = Redis::start();
    let env = [
        ("GRPC_SERVER_USE_TLS", "true".to_string()),
        ("GRPC_SERVER_TLS_CERT", p("rls.crt")),
        ("GRPC_SERVER_TLS_KEY", p("rls.key")),
        ("GRPC_SERVER_TLS_CA_CERT", p("ca.crt")),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let rls = Rls::start(&redis.url(), &[("tls.yaml", CONFIG)], &env);
    let c = tls_client(rls.grpc_port, &p("ca.crt"), None).await;
    assert_eq!(try_call(c, &unique("tls")).await.unwrap(), vec![OK]);

    // A renewed certificate is served from the next connections on; files
    // that do not load leave it in place.
    assert_eq!(served_name(rls.grpc_port, &p("ca.crt")).await, "rls");
    issue(
        &certs,
        "renewed",
        "DNS:localhost,IP:127.0.0.1",
        "serverAuth",
    );
    std::fs::copy(p("renewed.crt"), p("next.crt")).unwrap();
    std::fs::copy(p("renewed.key"), p("next.key")).unwrap();
    std::fs::rename(p("next.key"), p("rls.key")).unwrap();
    std::fs::rename(p("next.crt"), p("rls.crt")).unwrap();
    let mut waited = 0;
    while served_name(rls.grpc_port, &p("ca.crt")).await != "renewed" {
        waited += 1;
        assert!(waited < 100, "the renewed certificate is not served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    std::fs::write(p("rls.crt"), "not a certificate").unwrap();
    let mut waited = 0;
    while !rls
        .log_text()
        .contains("do not load, the last good ones stay")
    {
        waited += 1;
        assert!(waited < 100, "no error for files that do not load");
        // A connection makes the service look at its files.
        assert_eq!(served_name(rls.grpc_port, &p("ca.crt")).await, "renewed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let c = tls_client(rls.grpc_port, &p("ca.crt"), None).await;
    assert_eq!(try_call(c, &unique("tls")).await.unwrap(), vec![OK]);
    drop(rls);
    std::fs::copy(p("renewed.crt"), p("rls.crt")).unwrap();

    let mut env = env.clone();
    let wrong_key = p("envoy.key");
    env[2] = ("GRPC_SERVER_TLS_KEY", wrong_key.as_str());
    let text = Rls::try_start_healthy(&redis.url(), &[("tls.yaml", CONFIG)], &env)
        .err()
        .expect("started with another certificate's key");
    assert!(
        text.contains("GRPC_SERVER_TLS_KEY") && text.contains("mismatch"),
        "{text}"
    );
}

/// `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION` skips the name check only: a
/// server reached by a name its certificate lacks is refused without it
/// and taken with it, and a chain from an unknown CA is refused either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_tls_skips_only_the_name_check_when_told() {
    let certs = certificates();
    let p = |f: &str| path(&certs, f);
    let mut redis = TlsRedis::start(&certs);
    // The certificate names 127.0.0.1, not localhost.
    let by_name = format!("localhost:{}", redis.tls_port);
    let files = [("tls.yaml", CONFIG)];
    let base = [
        ("REDIS_TLS", "true".to_string()),
        ("REDIS_TLS_CLIENT_CERT", p("envoy.crt")),
        ("REDIS_TLS_CLIENT_KEY", p("envoy.key")),
        // A refused link is retried as the reference does: 1 s of it.
        ("REDIS_STARTUP_MAX_ELAPSED_TIME", "1s".to_string()),
    ];
    let with = |extra: &[(&'static str, String)]| {
        let mut env = base.to_vec();
        env.extend_from_slice(extra);
        env
    };
    let start = |env: &[(&'static str, String)]| {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Rls::try_start_healthy(&by_name, &files, &env)
    };

    let ca = ("REDIS_TLS_CACERT", p("ca.crt"));
    let text = start(&with(std::slice::from_ref(&ca)))
        .err()
        .expect("started with a name the certificate lacks");
    assert!(text.contains("TLS to Redis"), "{text}");

    let skip = ("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true".to_string());
    let text = start(&with(std::slice::from_ref(&skip)))
        .err()
        .expect("started with a certificate from an unknown CA");
    assert!(text.contains("TLS to Redis"), "{text}");

    let rls = start(&with(&[ca, skip])).expect("the name check skipped");
    let mut c = rls.client().await;
    let r = call(
        &mut c,
        request("tls", vec![desc(&[("user", &unique("tls"))])]),
    )
    .await;
    assert_eq!(codes(&r), vec![OK]);

    // Redis restarted: the links are made again by the next calls.
    redis.restart();
    let mut tries = 0;
    loop {
        let r = c
            .should_rate_limit(request("tls", vec![desc(&[("user", &unique("tls"))])]))
            .await;
        if r.as_ref().is_ok_and(|r| codes(r.get_ref()) == vec![OK]) {
            break;
        }
        tries += 1;
        assert!(tries < 50, "no decision after Redis restarted: {r:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

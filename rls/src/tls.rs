//! TLS on the gRPC listener and the Redis link, through OpenSSL (which
//! `native-tls` wraps here, so there is one TLS library): certificates and
//! keys read from PEM files as the reference reads them.
//!
//! - gRPC (`GRPC_SERVER_USE_TLS`): the listener's certificate chain and key;
//!   with `GRPC_CLIENT_TLS_CACERT`, a client must present a certificate for
//!   client use that this CA or a system root issued, and with
//!   `GRPC_CLIENT_TLS_SAN` one that names it (a DNS name, or an IP address
//!   when the setting is one; the subject's CN is not looked at, as Go does
//!   not). HTTP/2 is chosen by ALPN when the client offers it.
//! - Redis (`REDIS_TLS`): the server verified against the system's roots
//!   and `REDIS_TLS_CACERT`, under its host name unless
//!   `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION` (the chain is still checked);
//!   `REDIS_TLS_CLIENT_CERT`/`KEY` offered when both are set.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use openssl::ssl::{AlpnError, SslAcceptor, SslMethod, SslVerifyMode};
use openssl::x509::verify::X509CheckFlags;
use openssl::x509::X509;

use crate::settings::{GrpcTlsSettings, RedisSettings};

/// A file's bytes, or the setting, the path and why not.
pub fn read(what: &str, path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{what} '{path}': {e}"))
}

/// Every certificate of a PEM file (at least one).
pub fn certificates(what: &str, path: &str) -> Result<Vec<X509>, String> {
    let pem = read(what, path)?;
    let certs = X509::stack_from_pem(&pem).map_err(|e| format!("{what} '{path}': {e}"))?;
    if certs.is_empty() {
        return Err(format!("{what} '{path}': no certificate"));
    }
    Ok(certs)
}

/// A certificate chain and its key as `native-tls` takes them (the key
/// may be PKCS#1, SEC1 or PKCS#8 on disk; native-tls takes PKCS#8 only).
pub fn identity(
    (cert_what, cert_path): (&str, &str),
    (key_what, key_path): (&str, &str),
) -> Result<native_tls::Identity, String> {
    let cert = read(cert_what, cert_path)?;
    let key = read(key_what, key_path)?;
    let key = openssl::pkey::PKey::private_key_from_pem(&key)
        .and_then(|k| k.private_key_to_pem_pkcs8())
        .map_err(|e| format!("{key_what} '{key_path}': {e}"))?;
    native_tls::Identity::from_pkcs8(&cert, &key)
        .map_err(|e| format!("{cert_what} '{cert_path}': {e}"))
}

/// Adds the certificates of a CA file as roots.
pub fn add_roots(
    b: &mut native_tls::TlsConnectorBuilder,
    what: &str,
    path: &str,
) -> Result<(), String> {
    for c in certificates(what, path)? {
        let der = c.to_der().map_err(|e| e.to_string())?;
        let cert = native_tls::Certificate::from_der(&der).map_err(|e| e.to_string())?;
        b.add_root_certificate(cert);
    }
    Ok(())
}

/// The Redis link's connector (a single server's; the redis crate with
/// `native-tls` takes no client certificate or CA of its own).
pub fn redis_connector(r: &RedisSettings) -> Result<tokio_native_tls::TlsConnector, String> {
    let mut b = native_tls::TlsConnector::builder();
    if !r.tls_cacert.is_empty() {
        // Beside the system's roots, as the reference's pool.
        add_roots(&mut b, "REDIS_TLS_CACERT", &r.tls_cacert)?;
    }
    b.danger_accept_invalid_hostnames(r.tls_skip_hostname_verification);
    if !r.tls_client_cert.is_empty() && !r.tls_client_key.is_empty() {
        b.identity(identity(
            ("REDIS_TLS_CLIENT_CERT", &r.tls_client_cert),
            ("REDIS_TLS_CLIENT_KEY", &r.tls_client_key),
        )?);
    }
    let c = b.build().map_err(|e| format!("REDIS_TLS: {e}"))?;
    Ok(tokio_native_tls::TlsConnector::from(c))
}

/// The gRPC listener's TLS, read from its files.
pub fn grpc_acceptor(t: &GrpcTlsSettings) -> Result<SslAcceptor, String> {
    fn err(what: &str, path: &str) -> impl Fn(openssl::error::ErrorStack) -> String {
        let (what, path) = (what.to_string(), path.to_string());
        move |e| format!("{what} '{path}': {e}")
    }
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())
        .map_err(|e| format!("GRPC_SERVER_USE_TLS: {e}"))?;
    // Read first, so that a missing file is named as such.
    read("GRPC_SERVER_TLS_CERT", &t.cert)?;
    read("GRPC_SERVER_TLS_KEY", &t.key)?;
    b.set_certificate_chain_file(&t.cert)
        .map_err(err("GRPC_SERVER_TLS_CERT", &t.cert))?;
    b.set_private_key_file(&t.key, openssl::ssl::SslFiletype::PEM)
        .map_err(err("GRPC_SERVER_TLS_KEY", &t.key))?;
    b.check_private_key().map_err(|e| {
        format!(
            "GRPC_SERVER_TLS_KEY '{}' is not the key of GRPC_SERVER_TLS_CERT '{}': {e}",
            t.key, t.cert
        )
    })?;
    b.set_alpn_select_callback(|_, offered| {
        openssl::ssl::select_next_proto(b"\x02h2", offered).ok_or(AlpnError::NOACK)
    });
    if !t.client_cacert.is_empty() {
        let what = "GRPC_CLIENT_TLS_CACERT";
        b.set_default_verify_paths()
            .map_err(|e| format!("{what}: the system's roots: {e}"))?;
        for c in certificates(what, &t.client_cacert)? {
            b.add_client_ca(&c).map_err(err(what, &t.client_cacert))?;
            b.cert_store_mut()
                .add_cert(c)
                .map_err(err(what, &t.client_cacert))?;
        }
        b.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
        if !t.client_san.is_empty() {
            let p = b.verify_param_mut();
            p.set_hostflags(X509CheckFlags::NEVER_CHECK_SUBJECT);
            let san = t.client_san.trim_matches(['[', ']']);
            match san.parse::<std::net::IpAddr>() {
                Ok(ip) => p.set_ip(ip),
                Err(_) => p.set_host(san),
            }
            .map_err(|e| format!("GRPC_CLIENT_TLS_SAN '{}': {e}", t.client_san))?;
        }
    }
    Ok(b.build())
}

/// The gRPC listener's TLS, made again from its files when they change (a
/// renewed certificate, Kubernetes swapping a secret's files), as the
/// reference reloads its certificate: looked at, at most once a second, when
/// a connection comes. Files that do not load leave the last good ones in
/// use, with an error in the log.
pub struct GrpcAcceptor {
    settings: GrpcTlsSettings,
    current: Mutex<Current>,
}

struct Current {
    acceptor: SslAcceptor,
    stamp: Stamp,
    checked: Instant,
}

/// Each file's modification time and length.
type Stamp = Vec<Option<(SystemTime, u64)>>;

/// How often the files are looked at.
const CHECK_EVERY: Duration = Duration::from_secs(1);

fn stamp(t: &GrpcTlsSettings) -> Stamp {
    [&t.cert, &t.key, &t.client_cacert]
        .iter()
        .map(|p| {
            let m = std::fs::metadata(p).ok()?;
            Some((m.modified().ok()?, m.len()))
        })
        .collect()
}

impl GrpcAcceptor {
    pub fn new(t: &GrpcTlsSettings) -> Result<GrpcAcceptor, String> {
        let stamp = stamp(t);
        Ok(GrpcAcceptor {
            settings: t.clone(),
            current: Mutex::new(Current {
                acceptor: grpc_acceptor(t)?,
                stamp,
                checked: Instant::now(),
            }),
        })
    }

    /// The TLS settings for a new connection.
    pub fn current(&self) -> SslAcceptor {
        let mut c = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if c.checked.elapsed() >= CHECK_EVERY {
            c.checked = Instant::now();
            let now = stamp(&self.settings);
            if now != c.stamp {
                c.stamp = now;
                match grpc_acceptor(&self.settings) {
                    Ok(a) => {
                        c.acceptor = a;
                        crate::log::info("grpc: TLS certificate reloaded");
                    }
                    Err(e) => crate::log::error(&format!(
                        "grpc: TLS files changed but do not load, the last good ones stay: {e}"
                    )),
                }
            }
        }
        c.acceptor.clone()
    }
}

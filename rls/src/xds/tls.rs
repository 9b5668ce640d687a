//! TLS to the xDS server (`CONFIG_GRPC_XDS_SERVER_USE_TLS`), as the
//! reference sets it up: the server verified against
//! `CONFIG_GRPC_XDS_SERVER_TLS_CACERT` (the system's roots when unset) under
//! the name `CONFIG_GRPC_XDS_SERVER_TLS_SAN` (the URL's host when unset),
//! and this service's certificate (`CONFIG_GRPC_XDS_CLIENT_TLS_CERT`/`KEY`)
//! offered when the server asks for one. HTTP/2 is negotiated by ALPN, which
//! gRPC servers require.
//!
//! Through OpenSSL (`native-tls`), which the Redis client already links.

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};

use super::XdsSettings;

fn read(what: &str, path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{what} '{path}': {e}"))
}

/// The connector's TLS settings, read from the files once per connection
/// (a certificate renewed on disk is used from the next connection on).
fn connector(x: &XdsSettings) -> Result<tokio_native_tls::TlsConnector, String> {
    let mut b = native_tls::TlsConnector::builder();
    b.request_alpns(&["h2"]);
    if !x.server_tls_cacert.is_empty() {
        let pem = read("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", &x.server_tls_cacert)?;
        let certs = openssl::x509::X509::stack_from_pem(&pem).map_err(|e| {
            format!(
                "CONFIG_GRPC_XDS_SERVER_TLS_CACERT '{}': {e}",
                x.server_tls_cacert
            )
        })?;
        if certs.is_empty() {
            return Err(format!(
                "CONFIG_GRPC_XDS_SERVER_TLS_CACERT '{}': no certificate",
                x.server_tls_cacert
            ));
        }
        b.disable_built_in_roots(true);
        for c in certs {
            let der = c.to_der().map_err(|e| e.to_string())?;
            let cert = native_tls::Certificate::from_der(&der).map_err(|e| e.to_string())?;
            b.add_root_certificate(cert);
        }
    }
    if !x.client_tls_cert.is_empty() {
        let cert = read("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", &x.client_tls_cert)?;
        let key = read("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", &x.client_tls_key)?;
        // PKCS#1, SEC1 or PKCS#8 on disk; native-tls takes PKCS#8 only.
        let key = openssl::pkey::PKey::private_key_from_pem(&key)
            .and_then(|k| k.private_key_to_pem_pkcs8())
            .map_err(|e| format!("CONFIG_GRPC_XDS_CLIENT_TLS_KEY '{}': {e}", x.client_tls_key))?;
        let id = native_tls::Identity::from_pkcs8(&cert, &key).map_err(|e| {
            format!(
                "CONFIG_GRPC_XDS_CLIENT_TLS_CERT '{}': {e}",
                x.client_tls_cert
            )
        })?;
        b.identity(id);
    }
    let c = b.build().map_err(|e| format!("TLS: {e}"))?;
    Ok(tokio_native_tls::TlsConnector::from(c))
}

pub async fn connect(x: &XdsSettings, endpoint: Endpoint) -> Result<Channel, String> {
    let tls = connector(x)?;
    let san = x.server_tls_san.clone();
    let connect = tower::service_fn(move |uri: Uri| {
        let (tls, san) = (tls.clone(), san.clone());
        async move {
            let host = uri.host().unwrap_or_default().to_string();
            let port = uri.port_u16().unwrap_or(443);
            let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port)).await?;
            tcp.set_nodelay(true)?;
            let name = if san.is_empty() { host } else { san };
            let stream = tls
                .connect(name.trim_matches(['[', ']']), tcp)
                .await
                .map_err(std::io::Error::other)?;
            let alpn = stream
                .get_ref()
                .negotiated_alpn()
                .map_err(std::io::Error::other)?;
            if alpn.as_deref() != Some(b"h2".as_slice()) {
                return Err(std::io::Error::other(
                    "the xDS server did not negotiate HTTP/2 (ALPN h2)",
                ));
            }
            Ok::<_, std::io::Error>(TokioIo::new(stream))
        }
    });
    endpoint
        .connect_with_connector(connect)
        .await
        .map_err(|e| super::error_text(&e))
}

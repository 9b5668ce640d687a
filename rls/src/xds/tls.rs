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
use crate::tls;

/// The connector's TLS settings, read from the files once per connection
/// (a certificate renewed on disk is used from the next connection on).
fn connector(x: &XdsSettings) -> Result<tokio_native_tls::TlsConnector, String> {
    let mut b = native_tls::TlsConnector::builder();
    b.request_alpns(&["h2"]);
    if !x.server_tls_cacert.is_empty() {
        b.disable_built_in_roots(true);
        tls::add_roots(
            &mut b,
            "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
            &x.server_tls_cacert,
        )?;
    }
    if !x.client_tls_cert.is_empty() {
        b.identity(tls::identity(
            ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", &x.client_tls_cert),
            ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", &x.client_tls_key),
        )?);
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

//! A TLS front for a Redis server built without TLS (the servers unpacked
//! from PyPI wheels): it takes TLS only with a client certificate the test
//! CA issued, as a server with `tls-auth-clients yes` does, and passes the
//! bytes on to the server's plain port, so that the service's Redis link is
//! TLS on every server of the matrix. Stopped (every connection closed)
//! when dropped.

use crate::support::Served;
use crate::xds_server::{acceptor, TlsFiles};

pub struct TlsFront {
    pub port: u16,
    _served: Served,
}

impl TlsFront {
    /// A front on a port of its own for the plain port `to` on 127.0.0.1.
    pub fn start(tls: &TlsFiles, to: u16) -> TlsFront {
        let port = crate::support::free_port();
        let acceptor = acceptor(tls);
        let served = Served::start("the TLS front", port, move |listener| async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let ssl = openssl::ssl::Ssl::new(acceptor.context()).unwrap();
                tokio::spawn(async move {
                    let mut tls = Box::pin(tokio_openssl::SslStream::new(ssl, tcp).unwrap());
                    if tls.as_mut().accept().await.is_err() {
                        return;
                    }
                    let Ok(mut plain) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await
                    else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        TlsFront {
            port,
            _served: served,
        }
    }
}

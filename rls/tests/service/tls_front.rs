//! A TLS front for a Redis server built without TLS (the servers unpacked
//! from PyPI wheels): it takes TLS only with a client certificate the test
//! CA issued, as a server with `tls-auth-clients yes` does, and passes the
//! bytes on to the server's plain port, so that the service's Redis link is
//! TLS on every server of the matrix. Stopped (every connection closed)
//! when dropped.

use std::time::Duration;

use crate::xds_server::{acceptor, TlsFiles};

pub struct TlsFront {
    pub port: u16,
    running: Option<(
        tokio::sync::oneshot::Sender<()>,
        std::thread::JoinHandle<()>,
    )>,
}

impl TlsFront {
    /// A front on a port of its own for the plain port `to` on 127.0.0.1.
    pub fn start(tls: &TlsFiles, to: u16) -> TlsFront {
        let port = crate::support::free_port();
        let acceptor = acceptor(tls);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                    .await
                    .unwrap_or_else(|e| panic!("TLS front: bind {port}: {e}"));
                ready_tx.send(()).unwrap();
                let accept = async {
                    while let Ok((tcp, _)) = listener.accept().await {
                        let ssl = openssl::ssl::Ssl::new(acceptor.context()).unwrap();
                        tokio::spawn(async move {
                            let mut tls =
                                Box::pin(tokio_openssl::SslStream::new(ssl, tcp).unwrap());
                            if tls.as_mut().accept().await.is_err() {
                                return;
                            }
                            let Ok(mut plain) =
                                tokio::net::TcpStream::connect(("127.0.0.1", to)).await
                            else {
                                return;
                            };
                            let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                        });
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stop_rx => {}
                }
            });
            // Every connection's task ends with the runtime.
            drop(rt);
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the TLS front did not start");
        TlsFront {
            port,
            running: Some((stop_tx, thread)),
        }
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.running.take() {
            let _ = stop.send(());
            let _ = thread.join();
        }
    }
}

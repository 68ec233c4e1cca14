//! An optional Prometheus endpoint: the process's metrics (every
//! `felix_cluster_*` figure, and whatever else records through the
//! `metrics` facade) as Prometheus text, on `GET` of any path.

use std::net::SocketAddr;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The longest request head read before answering.
const MAX_REQUEST: usize = 8 * 1024;

/// Installs a Prometheus recorder as the process's `metrics` recorder and
/// serves it on `listen`; returns the address bound. Must be called
/// within a tokio runtime, once per process.
pub async fn serve_prometheus(listen: &str) -> std::io::Result<SocketAddr> {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|e| {
        std::io::Error::other(format!("a metrics recorder is already installed: {e}"))
    })?;
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        // Drains histograms as the exporter's own listener would.
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            upkeep.run_upkeep();
        }
    });
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let handle = handle.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(5), answer(stream, &handle)).await;
            });
        }
    });
    Ok(addr)
}

/// Reads the request head (bounded) and answers with the metrics.
async fn answer(mut stream: TcpStream, handle: &PrometheusHandle) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(buf.get(..n).unwrap_or_default());
    }
    let (status, body) = if head.starts_with(b"GET ") {
        ("200 OK", handle.render())
    } else {
        ("405 Method Not Allowed", String::from("GET only\n"))
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

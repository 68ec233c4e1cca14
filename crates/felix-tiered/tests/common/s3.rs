//! A real S3-protocol server on 127.0.0.1, in the test's own process:
//! s3s's service over s3s-fs's file-system backend, served by hyper-util
//! on an ephemeral port, with dummy keys.

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;

use felix_tiered::S3Endpoint;

/// The bucket every test uses.
pub const BUCKET: &str = "felix";
const ACCESS_KEY: &str = "felix-test";
const SECRET_KEY: &str = "felix-test-secret";

/// A running server; stops when dropped.
pub struct TestS3 {
    pub endpoint: S3Endpoint,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for TestS3 {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts a server storing its objects under `root`.
pub async fn start(root: &std::path::Path) -> TestS3 {
    // A bucket is a directory under the root.
    std::fs::create_dir_all(root.join(BUCKET)).unwrap();
    let fs = s3s_fs::FileSystem::new(root).unwrap();
    let mut builder = S3ServiceBuilder::new(fs);
    // Without an auth provider, signed requests are refused.
    builder.set_auth(SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
    let service = builder.build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let http = ConnBuilder::new(TokioExecutor::new());
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((socket, _)) = accepted else { continue };
                    // Without it the end of each response waits for the
                    // client's delayed acknowledgement (Nagle): a 1 MiB
                    // get took 51 ms instead of under 10.
                    let _ = socket.set_nodelay(true);
                    let conn = http.serve_connection(TokioIo::new(socket), service.clone()).into_owned();
                    tokio::spawn(async move { let _ = conn.await; });
                }
                _ = &mut stopped => break,
            }
        }
    });
    let mut endpoint = S3Endpoint::new(&format!("http://{addr}"), BUCKET, ACCESS_KEY, SECRET_KEY);
    endpoint.retry.max_retries = 1;
    endpoint.request_timeout = std::time::Duration::from_secs(10);
    TestS3 {
        endpoint,
        stop: Some(stop),
    }
}

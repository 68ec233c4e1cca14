//! A real S3-protocol server on 127.0.0.1, in the test's own process:
//! s3s's service over s3s-fs's file-system backend, served by hyper-util
//! on an ephemeral port, with dummy keys. [`start_with_503_after`] puts a
//! gateway in front of the backend that answers 503 to a put it has
//! already applied.

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use s3s::auth::SimpleAuth;
use s3s::dto::*;
use s3s::service::S3ServiceBuilder;
use s3s::{S3, S3Request, S3Response, S3Result, s3_error};

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
    serve(s3s_fs::FileSystem::new(root).unwrap()).await
}

/// Starts a server as [`start`] does, behind a gateway that answers the
/// first put of an object whose key contains `on` with a 503 after the
/// backend stored it. The count is of puts so answered.
pub async fn start_with_503_after(root: &std::path::Path, on: &str) -> (TestS3, Arc<AtomicUsize>) {
    std::fs::create_dir_all(root.join(BUCKET)).unwrap();
    let failed = Arc::new(AtomicUsize::new(0));
    let gateway = Gateway {
        inner: s3s_fs::FileSystem::new(root).unwrap(),
        on: on.to_owned(),
        failed: Arc::clone(&failed),
    };
    (serve(gateway).await, failed)
}

async fn serve(backend: impl S3) -> TestS3 {
    let mut builder = S3ServiceBuilder::new(backend);
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

/// Passes every request `object_store` makes to s3s-fs; the first put of a
/// key containing `on` is applied and then answered with a 503.
struct Gateway {
    inner: s3s_fs::FileSystem,
    on: String,
    failed: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl S3 for Gateway {
    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let hit = req.input.key.contains(&self.on);
        let out = self.inner.put_object(req).await?;
        if hit
            && self
                .failed
                .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            return Err(s3_error!(ServiceUnavailable, "applied, then answered 503"));
        }
        Ok(out)
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        self.inner.get_object(req).await
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        self.inner.head_object(req).await
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.inner.head_bucket(req).await
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.inner.list_objects_v2(req).await
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        self.inner.delete_object(req).await
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        self.inner.delete_objects(req).await
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        self.inner.create_multipart_upload(req).await
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        self.inner.upload_part(req).await
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        self.inner.complete_multipart_upload(req).await
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        self.inner.abort_multipart_upload(req).await
    }
}

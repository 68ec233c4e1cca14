//! The object stores felix-tiered runs on, built the one way each needs.

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::{BackoffConfig, ClientOptions, RetryConfig};

use crate::error::StoreSetupError;

/// The object store a tiered shard offloads to: any `object_store` backend.
pub type TierStore = Arc<dyn ObjectStore>;

/// A store in memory (tests, examples): supports every conditional put.
pub fn in_memory() -> TierStore {
    Arc::new(InMemory::new())
}

/// A store in a local directory, created if missing.
///
/// `fsync` is switched on: `object_store`'s local store does not sync by
/// default, and the manifest must be durable before local segments are
/// deleted. It supports put-if-absent (`PutMode::Create`) but not
/// `PutMode::Update`, which is why the manifest is a series of versioned
/// objects, each written once.
pub fn local_dir(dir: &std::path::Path) -> Result<TierStore, StoreSetupError> {
    std::fs::create_dir_all(dir).map_err(|source| StoreSetupError::CreateDir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let store = LocalFileSystem::new_with_prefix(dir)
        .map_err(|source| StoreSetupError::Build {
            backend: "local",
            source,
        })?
        .with_fsync(true);
    Ok(Arc::new(store))
}

/// Where an S3-protocol server is and how to sign requests to it.
#[derive(Debug, Clone)]
pub struct S3Endpoint {
    /// The endpoint URL, `http://127.0.0.1:PORT` for a loopback server.
    pub endpoint: String,
    /// The bucket.
    pub bucket: String,
    /// The region named in signatures. Default `us-east-1`.
    pub region: String,
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// Retries of a failed request. `object_store`'s default is 10 over
    /// three minutes; tests set it low so a failing server fails fast.
    pub max_retries: usize,
    /// How long one request may take, connect to last byte.
    pub request_timeout: Duration,
}

impl S3Endpoint {
    /// An endpoint with `us-east-1`, 2 retries and a 30 s request timeout.
    pub fn new(endpoint: &str, bucket: &str, access_key_id: &str, secret_access_key: &str) -> Self {
        S3Endpoint {
            endpoint: endpoint.to_owned(),
            bucket: bucket.to_owned(),
            region: "us-east-1".to_owned(),
            access_key_id: access_key_id.to_owned(),
            secret_access_key: secret_access_key.to_owned(),
            max_retries: 2,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// An S3 (or S3-compatible) store: path-style requests, plain HTTP allowed
/// (a loopback test server), conditional puts by ETag, no proxy.
///
/// Installs ring as rustls's crypto provider for the process if none is
/// installed yet: reqwest builds its TLS configuration even for `http://`
/// endpoints, and this crate builds rustls without aws-lc.
pub fn s3(endpoint: &S3Endpoint) -> Result<TierStore, StoreSetupError> {
    // Err means a provider is already installed, which is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let retry = RetryConfig {
        max_retries: endpoint.max_retries,
        retry_timeout: endpoint.request_timeout,
        backoff: BackoffConfig::default(),
    };
    let client = ClientOptions::new()
        .with_allow_http(true)
        .with_timeout(endpoint.request_timeout);
    let store = AmazonS3Builder::new()
        .with_endpoint(&endpoint.endpoint)
        .with_virtual_hosted_style_request(false)
        .with_bucket_name(&endpoint.bucket)
        .with_region(&endpoint.region)
        .with_access_key_id(&endpoint.access_key_id)
        .with_secret_access_key(&endpoint.secret_access_key)
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .with_client_options(client)
        .with_retry(retry)
        .build()
        .map_err(|source| StoreSetupError::Build {
            backend: "s3",
            source,
        })?;
    Ok(Arc::new(store))
}

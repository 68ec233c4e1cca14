//! The object stores felix-tiered runs on, built the one way each needs.

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::{BackoffConfig, ClientOptions, RetryConfig};

use crate::error::{RetryPolicyError, StoreSetupError};

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
#[derive(Debug, Clone, PartialEq)]
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
    /// How long one attempt of a request may take, connect to last byte.
    /// Default 30 s; more than zero.
    pub request_timeout: Duration,
    /// How failed attempts are retried.
    pub retry: RetryPolicy,
}

impl S3Endpoint {
    /// An endpoint with `us-east-1`, a 30 s request timeout and the default
    /// [`RetryPolicy`].
    pub fn new(endpoint: &str, bucket: &str, access_key_id: &str, secret_access_key: &str) -> Self {
        S3Endpoint {
            endpoint: endpoint.to_owned(),
            bucket: bucket.to_owned(),
            region: "us-east-1".to_owned(),
            access_key_id: access_key_id.to_owned(),
            secret_access_key: secret_access_key.to_owned(),
            request_timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
        }
    }
}

/// How an S3 store retries a failed attempt of a request.
///
/// `object_store` retries a 5xx answer, a 429, a refused or dropped
/// connection, and a timed-out attempt of a request it counts as safe to
/// repeat: gets, heads, lists, plain puts and the parts of a multipart
/// upload, not deletes nor the manifest's put-if-absent (whose timed-out
/// attempt may have been applied, which the tier settles by reading the
/// object back). Before each retry it waits a random time between
/// [`init_backoff`](Self::init_backoff) and `backoff_base` times the
/// previous wait, at most [`max_backoff`](Self::max_backoff). It stops at
/// [`max_retries`](Self::max_retries) retries, or once the
/// [`retry_window`](Self::retry_window) has passed since the first attempt,
/// whichever comes first.
///
/// ```
/// use std::time::Duration;
/// use felix_tiered::{RetryPolicy, S3Endpoint};
///
/// let mut endpoint = S3Endpoint::new("http://127.0.0.1:9000", "felix", "key", "secret");
/// endpoint.request_timeout = Duration::from_secs(10);
/// endpoint.retry = RetryPolicy { max_retries: 6, ..RetryPolicy::default() };
/// // The window defaults to one long enough for every retry of a request
/// // whose every attempt times out.
/// assert_eq!(
///     endpoint.retry.window(endpoint.request_timeout),
///     6 * (Duration::from_secs(10) + Duration::from_secs(15)),
/// );
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after a request's first attempt. Default 4; at most
    /// [`RetryPolicy::MAX_RETRIES`]. 0 turns retries off.
    pub max_retries: usize,
    /// No retry starts once this long has passed since the request's first
    /// attempt: a bound on how long a failing request holds its caller.
    /// Default `None`: the window every retry needs when each attempt runs
    /// to the request timeout, `max_retries × (request_timeout +
    /// max_backoff)`, so a request that times out is retried
    /// `max_retries` times (three minutes with the other defaults). A
    /// window given must be at least twice the request timeout: a shorter
    /// one could never retry an attempt that timed out.
    pub retry_window: Option<Duration>,
    /// The wait before the first retry, and the least wait before any.
    /// Default 500 ms; more than zero, at most `max_backoff`.
    pub init_backoff: Duration,
    /// The longest wait before a retry. Default 15 s; at most
    /// [`RetryPolicy::MAX_BACKOFF`].
    pub max_backoff: Duration,
    /// How much each wait may grow over the one before. Default 2; more
    /// than 1, at most 16.
    pub backoff_base: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            retry_window: None,
            init_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(15),
            backoff_base: 2.0,
        }
    }
}

impl RetryPolicy {
    /// The most retries a request may take.
    pub const MAX_RETRIES: usize = 100;
    /// The longest [`max_backoff`](Self::max_backoff).
    pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

    /// The retry window in force for attempts of `request_timeout` each:
    /// [`retry_window`](Self::retry_window) if set, else the one that lets
    /// every retry of a timed-out request start.
    pub fn window(&self, request_timeout: Duration) -> Duration {
        self.retry_window.unwrap_or_else(|| {
            let retries = u32::try_from(self.max_retries).unwrap_or(u32::MAX);
            request_timeout
                .saturating_add(self.max_backoff)
                .saturating_mul(retries)
        })
    }

    /// Checks every field against its documented range, for attempts of
    /// `request_timeout` each.
    pub fn validate(&self, request_timeout: Duration) -> Result<(), RetryPolicyError> {
        if request_timeout.is_zero() {
            return Err(RetryPolicyError::RequestTimeout);
        }
        if self.max_retries > Self::MAX_RETRIES {
            return Err(RetryPolicyError::MaxRetries {
                value: self.max_retries,
                max: Self::MAX_RETRIES,
            });
        }
        if self.max_backoff > Self::MAX_BACKOFF {
            return Err(RetryPolicyError::MaxBackoff {
                value: self.max_backoff,
                max: Self::MAX_BACKOFF,
            });
        }
        // A zero first wait, or one above the longest, leaves the random
        // wait's range empty.
        if self.init_backoff.is_zero() || self.init_backoff > self.max_backoff {
            return Err(RetryPolicyError::InitBackoff {
                init_backoff: self.init_backoff,
                max_backoff: self.max_backoff,
            });
        }
        // Written so that NaN fails it too.
        let base_in_range = self.backoff_base > 1.0 && self.backoff_base <= 16.0;
        if !base_in_range {
            return Err(RetryPolicyError::BackoffBase {
                value: self.backoff_base,
            });
        }
        if let Some(window) = self.retry_window
            && window < request_timeout.saturating_mul(2)
        {
            return Err(RetryPolicyError::Window {
                window,
                request_timeout,
            });
        }
        Ok(())
    }

    fn to_object_store(&self, request_timeout: Duration) -> RetryConfig {
        RetryConfig {
            max_retries: self.max_retries,
            retry_timeout: self.window(request_timeout),
            backoff: BackoffConfig {
                init_backoff: self.init_backoff,
                max_backoff: self.max_backoff,
                base: self.backoff_base,
            },
        }
    }
}

/// An S3 (or S3-compatible) store: path-style requests, plain HTTP allowed
/// (a loopback test server), conditional puts by ETag, no proxy, each
/// request retried as `endpoint.retry` says.
///
/// Installs ring as rustls's crypto provider for the process if none is
/// installed yet: reqwest builds its TLS configuration even for `http://`
/// endpoints, and this crate builds rustls without aws-lc.
pub fn s3(endpoint: &S3Endpoint) -> Result<TierStore, StoreSetupError> {
    endpoint
        .retry
        .validate(endpoint.request_timeout)
        .map_err(StoreSetupError::Retry)?;
    // Err means a provider is already installed, which is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
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
        .with_retry(endpoint.retry.to_object_store(endpoint.request_timeout))
        .build()
        .map_err(|source| StoreSetupError::Build {
            backend: "s3",
            source,
        })?;
    Ok(Arc::new(store))
}

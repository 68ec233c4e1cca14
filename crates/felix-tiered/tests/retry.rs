//! The S3 store's retry policy against servers on 127.0.0.1 that fail in
//! the two ways a network does: one that accepts and never answers (every
//! attempt times out) and one that refuses connections. A timed-out
//! request is retried `max_retries` times, and retries after a refused
//! connection are spread over the backoff, not spent at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};

use felix_tiered::{RetryPolicy, RetryPolicyError, S3Endpoint, StoreSetupError, stores};

/// A server that accepts connections, counts them and never answers;
/// stops (closing every connection) when dropped.
struct Silent {
    addr: std::net::SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Silent {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                held.push(socket);
            }
        });
        Silent {
            addr,
            accepted,
            task,
        }
    }

    /// Connections accepted since the last call.
    fn take(&self) -> usize {
        self.accepted.swap(0, Ordering::SeqCst)
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn endpoint(addr: std::net::SocketAddr, timeout: Duration, retry: RetryPolicy) -> S3Endpoint {
    let mut endpoint = S3Endpoint::new(&format!("http://{addr}"), "felix", "key", "secret");
    endpoint.request_timeout = timeout;
    endpoint.retry = retry;
    endpoint
}

/// Short waits, so a test's attempts are mostly its timeouts.
fn quick(max_retries: usize) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        init_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        ..RetryPolicy::default()
    }
}

/// The error and its sources, one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}

#[tokio::test]
async fn s3_request_that_times_out_is_retried_max_retries_times() {
    let server = Silent::start().await;
    let timeout = Duration::from_millis(300);
    let store = stores::s3(&endpoint(server.addr, timeout, quick(3))).unwrap();
    let path = Path::from("felix/object");

    let started = Instant::now();
    let head = store.head(&path).await;
    let elapsed = started.elapsed();
    assert!(head.is_err(), "{head:?}");
    assert_eq!(server.take(), 4, "the first attempt and 3 retries");
    assert!(elapsed >= 4 * timeout, "{elapsed:?}");
    assert!(
        elapsed < 4 * timeout + Duration::from_secs(3),
        "{elapsed:?}"
    );

    // A plain put (a segment's upload) is safe to repeat: retried alike.
    let put = store.put(&path, PutPayload::from_static(b"bytes")).await;
    assert!(put.is_err(), "{put:?}");
    assert_eq!(server.take(), 4);
}

#[tokio::test]
async fn s3_retry_window_given_bounds_the_retries_of_a_request_that_times_out() {
    let server = Silent::start().await;
    let timeout = Duration::from_millis(400);
    // Attempts end near 0.4 s, 0.8 s and 1.2 s: a retry starts after the
    // first two, not after the third.
    let retry = RetryPolicy {
        retry_window: Some(Duration::from_millis(1000)),
        ..quick(10)
    };
    let store = stores::s3(&endpoint(server.addr, timeout, retry)).unwrap();
    let head = store.head(&Path::from("felix/object")).await;
    assert!(head.is_err(), "{head:?}");
    assert_eq!(server.take(), 3);
}

#[tokio::test]
async fn s3_refused_connection_is_retried_over_the_default_backoff() {
    // A port nothing listens on: bound, then closed.
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let retry = RetryPolicy::default();
    let store = stores::s3(&endpoint(addr, Duration::from_secs(5), retry.clone())).unwrap();
    let started = Instant::now();
    let err = store.head(&Path::from("felix/object")).await.unwrap_err();
    let elapsed = started.elapsed();
    let text = chain(&err);
    assert!(text.contains("after 4 retries, max_retries: 4"), "{text}");
    // Each wait is at least the first one, and at most the previous one
    // doubled: 0.5 s + 1 s + 2 s + 4 s at the most.
    assert!(elapsed >= 4 * retry.init_backoff, "{elapsed:?}");
    assert!(elapsed < Duration::from_millis(7500 + 2000), "{elapsed:?}");
}

#[test]
fn retry_policy_defaults_retry_a_timed_out_request_every_time() {
    let retry = RetryPolicy::default();
    assert_eq!(
        retry,
        RetryPolicy {
            max_retries: 4,
            retry_window: None,
            init_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(15),
            backoff_base: 2.0,
        }
    );
    let endpoint = S3Endpoint::new("http://127.0.0.1:1", "b", "k", "s");
    assert_eq!(endpoint.request_timeout, Duration::from_secs(30));
    assert_eq!(endpoint.retry, retry);
    // Four attempts of 30 s and the waits between them fit in the window.
    assert_eq!(
        retry.window(endpoint.request_timeout),
        Duration::from_secs(180)
    );
    assert!(
        retry.window(endpoint.request_timeout)
            >= 4 * Duration::from_secs(30) + 3 * retry.max_backoff
    );
    assert_eq!(retry.validate(endpoint.request_timeout), Ok(()));
}

#[test]
fn s3_retry_policy_out_of_range_is_refused_naming_the_field() {
    let cases: Vec<(Duration, RetryPolicy, RetryPolicyError, &str)> = vec![
        (
            Duration::ZERO,
            RetryPolicy::default(),
            RetryPolicyError::RequestTimeout,
            "the request timeout is zero",
        ),
        (
            Duration::from_secs(1),
            RetryPolicy {
                max_retries: 101,
                ..RetryPolicy::default()
            },
            RetryPolicyError::MaxRetries {
                value: 101,
                max: 100,
            },
            "retry policy max_retries is 101, above 100",
        ),
        (
            Duration::from_secs(1),
            RetryPolicy {
                max_backoff: Duration::from_secs(301),
                ..RetryPolicy::default()
            },
            RetryPolicyError::MaxBackoff {
                value: Duration::from_secs(301),
                max: Duration::from_secs(300),
            },
            "retry policy max_backoff is 301s, above 300s",
        ),
        (
            Duration::from_secs(1),
            RetryPolicy {
                init_backoff: Duration::ZERO,
                ..RetryPolicy::default()
            },
            RetryPolicyError::InitBackoff {
                init_backoff: Duration::ZERO,
                max_backoff: Duration::from_secs(15),
            },
            "retry policy init_backoff is 0ns, outside (0, max_backoff = 15s]",
        ),
        (
            Duration::from_secs(1),
            RetryPolicy {
                init_backoff: Duration::from_secs(20),
                ..RetryPolicy::default()
            },
            RetryPolicyError::InitBackoff {
                init_backoff: Duration::from_secs(20),
                max_backoff: Duration::from_secs(15),
            },
            "retry policy init_backoff is 20s, outside (0, max_backoff = 15s]",
        ),
        (
            Duration::from_secs(1),
            RetryPolicy {
                backoff_base: 1.0,
                ..RetryPolicy::default()
            },
            RetryPolicyError::BackoffBase { value: 1.0 },
            "retry policy backoff_base is 1, outside (1, 16]",
        ),
        (
            Duration::from_secs(30),
            RetryPolicy {
                retry_window: Some(Duration::from_secs(30)),
                ..RetryPolicy::default()
            },
            RetryPolicyError::Window {
                window: Duration::from_secs(30),
                request_timeout: Duration::from_secs(30),
            },
            "retry policy retry_window is 30s, shorter than twice the request timeout 30s: a timed-out attempt could never be retried",
        ),
    ];
    for (timeout, retry, expected, text) in cases {
        let endpoint = endpoint("127.0.0.1:1".parse().unwrap(), timeout, retry);
        let err = stores::s3(&endpoint).map(|_| ()).unwrap_err();
        match &err {
            StoreSetupError::Retry(found) => {
                assert_eq!(found, &expected);
                assert_eq!(found.to_string(), text);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(chain(&err), format!("S3 retry policy: {text}"));
    }
    // NaN is no base either.
    let nan = RetryPolicy {
        backoff_base: f64::NAN,
        ..RetryPolicy::default()
    };
    assert!(matches!(
        nan.validate(Duration::from_secs(1)),
        Err(RetryPolicyError::BackoffBase { value }) if value.is_nan()
    ));
}

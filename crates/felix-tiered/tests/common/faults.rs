//! A fault layer over `object_store`: the `n`th call of one kind of
//! request fails (or, for puts, stores a truncated object and reports
//! success), every other call goes through.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// Which kind of request fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `put_opts` and `put_multipart_opts`.
    Put,
    /// A put that stores only half its payload and reports success.
    TruncatedPut,
    /// `get_opts` (gets, ranged gets and heads).
    Get,
    /// `list` and `list_with_delimiter`.
    List,
    /// `delete_stream`.
    Delete,
}

/// Fails the `nth` (0-based) call of `op`.
#[derive(Debug)]
pub struct FaultStore {
    inner: Arc<dyn ObjectStore>,
    op: Op,
    nth: usize,
    seen: AtomicUsize,
}

impl FaultStore {
    pub fn new(inner: Arc<dyn ObjectStore>, op: Op, nth: usize) -> Self {
        FaultStore {
            inner,
            op,
            nth,
            seen: AtomicUsize::new(0),
        }
    }

    /// Whether the fault has fired.
    pub fn fired(&self) -> bool {
        self.seen.load(Ordering::SeqCst) > self.nth
    }

    /// Counts a call of `op`; true if this one fails.
    fn hit(&self, op: Op) -> bool {
        let matches = self.op == op || (self.op == Op::TruncatedPut && op == Op::Put);
        matches && self.seen.fetch_add(1, Ordering::SeqCst) == self.nth
    }
}

fn injected(op: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "fault",
        source: format!("injected {op} failure").into(),
    }
}

impl fmt::Display for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultStore({:?} #{})", self.op, self.nth)
    }
}

#[async_trait::async_trait]
impl ObjectStore for FaultStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        if self.hit(Op::Put) {
            if self.op == Op::TruncatedPut {
                let bytes: Bytes = Bytes::from(payload);
                let half = bytes.slice(..bytes.len() / 2);
                return self
                    .inner
                    .put_opts(location, PutPayload::from(half), opts)
                    .await;
            }
            return Err(injected("put"));
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        if self.hit(Op::Put) {
            return Err(injected("put"));
        }
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if self.hit(Op::Get) {
            return Err(injected("get"));
        }
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        if self.hit(Op::Delete) {
            return futures::stream::once(async { Err(injected("delete")) }).boxed();
        }
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        if self.hit(Op::List) {
            return futures::stream::once(async { Err(injected("list")) }).boxed();
        }
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        if self.hit(Op::List) {
            return Err(injected("list"));
        }
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

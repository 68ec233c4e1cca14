//! A fault layer over `object_store`: the `n`th call of one kind of
//! request fails, or is applied and then reported failed, or (for puts)
//! stores a truncated object and reports success; every other call goes
//! through. Multipart uploads can fail a part, fail their completion, or
//! complete and then report failure. [`FaultStore::on`] restricts the
//! fault to objects whose path contains a string (`"manifest/"`).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result, UploadPart,
};

/// Which kind of request fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `put_opts` and `put_multipart_opts`, refused: nothing stored.
    Put,
    /// A put that stores only half its payload and reports success.
    TruncatedPut,
    /// A put the store applies, then reports failed: a 503 sent after the
    /// server stored the object, or an answer lost on the way.
    AppliedPut,
    /// As [`Op::AppliedPut`], then put again as `object_store`'s retry
    /// does, that attempt's result returned: `AlreadyExists` for a
    /// put-if-absent, success for a plain put.
    RetriedPut,
    /// `get_opts` (gets, ranged gets and heads).
    Get,
    /// `list` and `list_with_delimiter`.
    List,
    /// `delete_stream`.
    Delete,
    /// One part of a multipart upload is refused (`nth` counts parts).
    Part,
    /// A multipart upload's completion is refused: nothing stored.
    Complete,
    /// A multipart upload completes in the store, then reports failure.
    AppliedComplete,
}

impl Op {
    /// Whether a call of kind `call` counts towards this fault.
    fn counts(self, call: Op) -> bool {
        match self {
            Op::TruncatedPut | Op::AppliedPut | Op::RetriedPut => call == Op::Put,
            Op::AppliedComplete => call == Op::Complete,
            op => op == call,
        }
    }
}

#[derive(Debug)]
struct Fault {
    op: Op,
    nth: usize,
    /// Only objects whose path contains this count (all when empty).
    on: String,
    seen: AtomicUsize,
}

impl Fault {
    /// Counts a call of kind `call` on `path`; true if this one fails.
    fn hit(&self, call: Op, path: Option<&Path>) -> bool {
        let on_path = self.on.is_empty() || path.is_some_and(|p| p.as_ref().contains(&self.on));
        self.op.counts(call) && on_path && self.seen.fetch_add(1, Ordering::SeqCst) == self.nth
    }
}

/// Fails the `nth` (0-based) call of `op`.
#[derive(Debug)]
pub struct FaultStore {
    inner: Arc<dyn ObjectStore>,
    fault: Arc<Fault>,
}

impl FaultStore {
    pub fn new(inner: Arc<dyn ObjectStore>, op: Op, nth: usize) -> Self {
        Self::on(inner, op, nth, "")
    }

    /// Fails the `nth` call of `op` among those on objects whose path
    /// contains `on`.
    pub fn on(inner: Arc<dyn ObjectStore>, op: Op, nth: usize, on: &str) -> Self {
        FaultStore {
            inner,
            fault: Arc::new(Fault {
                op,
                nth,
                on: on.to_owned(),
                seen: AtomicUsize::new(0),
            }),
        }
    }

    /// Whether the fault has fired.
    pub fn fired(&self) -> bool {
        self.fault.seen.load(Ordering::SeqCst) > self.fault.nth
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
        write!(f, "FaultStore({:?} #{})", self.fault.op, self.fault.nth)
    }
}

/// A multipart upload whose parts and completion count towards a fault.
#[derive(Debug)]
struct FaultUpload {
    inner: Box<dyn MultipartUpload>,
    fault: Arc<Fault>,
    path: Path,
}

#[async_trait::async_trait]
impl MultipartUpload for FaultUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        if self.fault.hit(Op::Part, Some(&self.path)) {
            return Box::pin(async { Err(injected("part")) });
        }
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        if self.fault.hit(Op::Complete, Some(&self.path)) {
            if self.fault.op == Op::AppliedComplete {
                self.inner.complete().await?;
            }
            return Err(injected("complete"));
        }
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
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
        if !self.fault.hit(Op::Put, Some(location)) {
            return self.inner.put_opts(location, payload, opts).await;
        }
        match self.fault.op {
            Op::TruncatedPut => {
                let bytes: Bytes = Bytes::from(payload);
                let half = bytes.slice(..bytes.len() / 2);
                self.inner
                    .put_opts(location, PutPayload::from(half), opts)
                    .await
            }
            Op::AppliedPut => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(injected("put"))
            }
            Op::RetriedPut => {
                self.inner
                    .put_opts(location, payload.clone(), opts.clone())
                    .await?;
                self.inner.put_opts(location, payload, opts).await
            }
            _ => Err(injected("put")),
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        if self.fault.op == Op::Put && self.fault.hit(Op::Put, Some(location)) {
            return Err(injected("put"));
        }
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(FaultUpload {
            inner,
            fault: Arc::clone(&self.fault),
            path: location.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if self.fault.hit(Op::Get, Some(location)) {
            return Err(injected("get"));
        }
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        if self.fault.hit(Op::Delete, None) {
            return futures::stream::once(async { Err(injected("delete")) }).boxed();
        }
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        if self.fault.hit(Op::List, prefix) {
            return futures::stream::once(async { Err(injected("list")) }).boxed();
        }
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        if self.fault.hit(Op::List, prefix) {
            return Err(injected("list"));
        }
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

//! A store that records the path of every get (gets, ranged gets and
//! heads), counts what happens to its multipart uploads (parts sent,
//! completed, aborted) and how many puts are in flight at once (each put
//! held for a set delay, so that puts made together overlap), and passes
//! every call through.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result, UploadPart,
};

/// What the multipart uploads saw, all uploads together.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PartCounts {
    /// Uploads started.
    pub started: usize,
    /// Parts sent.
    pub parts: usize,
    /// Uploads completed.
    pub completed: usize,
    /// Uploads aborted.
    pub aborted: usize,
}

/// Records the object of each get and counts multipart calls.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    gets: Mutex<Vec<Path>>,
    parts: Arc<Mutex<PartCounts>>,
    /// How long each put is held before it is passed on.
    put_delay: Duration,
    puts_in_flight: AtomicUsize,
    most_puts_in_flight: AtomicUsize,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        CountingStore {
            inner,
            gets: Mutex::new(Vec::new()),
            parts: Arc::default(),
            put_delay: Duration::ZERO,
            puts_in_flight: AtomicUsize::new(0),
            most_puts_in_flight: AtomicUsize::new(0),
        }
    }

    /// Holds each put for `delay` before passing it on.
    pub fn with_put_delay(mut self, delay: Duration) -> Self {
        self.put_delay = delay;
        self
    }

    /// The most puts that were in flight at once so far.
    pub fn most_puts_in_flight(&self) -> usize {
        self.most_puts_in_flight.load(Ordering::SeqCst)
    }

    /// The multipart counts so far.
    pub fn parts(&self) -> PartCounts {
        *self.parts.lock().unwrap()
    }

    /// The objects got since the last call, in order, and forgets them.
    pub fn take_gets(&self) -> Vec<Path> {
        std::mem::take(&mut *self.gets.lock().unwrap())
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountingStore({})", self.inner)
    }
}

#[derive(Debug)]
struct CountedUpload {
    inner: Box<dyn MultipartUpload>,
    counts: Arc<Mutex<PartCounts>>,
}

#[async_trait::async_trait]
impl MultipartUpload for CountedUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.counts.lock().unwrap().parts += 1;
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        self.counts.lock().unwrap().completed += 1;
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        self.counts.lock().unwrap().aborted += 1;
        self.inner.abort().await
    }
}

#[async_trait::async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let now = self.puts_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_puts_in_flight.fetch_max(now, Ordering::SeqCst);
        if !self.put_delay.is_zero() {
            tokio::time::sleep(self.put_delay).await;
        }
        let result = self.inner.put_opts(location, payload, opts).await;
        self.puts_in_flight.fetch_sub(1, Ordering::SeqCst);
        result
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        self.parts.lock().unwrap().started += 1;
        Ok(Box::new(CountedUpload {
            inner,
            counts: Arc::clone(&self.parts),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.gets.lock().unwrap().push(location.clone());
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

//! `--remote` and `manifest`: a tiered shard offloaded to a local-directory
//! object store in a temporary directory, shown by `stat`, verified by
//! `verify`, and its manifest listed, fetched and checked; then one remote
//! segment object damaged, or missing, or the whole copy lost (an emptied
//! bucket, the wrong prefix), which `verify --remote` reports with exit 1.
//! An S3 endpoint nothing listens on, and one answering every request with
//! S3's NoSuchBucket error, are exit 2 with the error told once on stderr.
//! (The S3 client's requests are covered by felix-tiered's loopback-server
//! tests.)

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{run, s, transcript};
use felix_storage::{Preallocation, Record, ShardKey, Store, StoreConfig};
use felix_tiered::{RemoteShard, TierConfig, TierRetention, TieredShard, stores};

fn key() -> ShardKey {
    ShardKey::new("acme", "default", "orders", 3)
}

/// A store root with one shard of 120 records whose oldest segments are
/// offloaded to `<tmp>/bucket`; returns the tempdir, the shard directory
/// and the bucket directory.
fn offloaded() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let bucket = tmp.path().join("bucket");
    let config = StoreConfig {
        segment_size_bytes: 1024,
        index_spacing_bytes: 128,
        preallocate: Preallocation::Off,
        ..StoreConfig::default()
    };
    let store = Store::options(&root).config(config).open().unwrap();
    let shard = store.create_shard(&key()).unwrap();
    for offset in 0..120u64 {
        let payload = format!("record-{offset:033}");
        shard
            .append(&[Record::new(1_000 + offset, payload)])
            .wait()
            .unwrap();
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tier = TierConfig {
        local: TierRetention {
            max_bytes: Some(2500),
            max_age: None,
        },
        ..TierConfig::default()
    };
    let remote = stores::local_dir(&bucket).unwrap();
    let tiered = rt
        .block_on(TieredShard::open(Arc::clone(&shard), key(), remote, tier))
        .unwrap();
    let outcome = rt.block_on(tiered.offload()).unwrap();
    assert!(outcome.uploaded.len() >= 2, "{outcome:?}");
    drop(tiered);
    drop(shard);
    store.close().unwrap();
    let dir = root.join(key().dir_name());
    (tmp, dir, bucket)
}

/// The remote shard as the tests read it back.
fn remote(bucket: &Path) -> (tokio::runtime::Runtime, RemoteShard) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = stores::local_dir(bucket).unwrap();
    (rt, RemoteShard::new(store, "felix", &key()))
}

/// `transcript` with what varies from run to run replaced: the random
/// upload ids by `[UPLOAD i]`, and the `.log` objects' CRC-32s (a segment
/// header holds its creation time) by `[LOG CRC i]` or `[CRC]`.
fn shown(args: &[&str], tmp: &Path, bucket: &Path) -> String {
    let (rt, shard) = remote(bucket);
    let manifest = rt.block_on(shard.newest()).unwrap().unwrap();
    let mut text = transcript(args, tmp);
    for (i, segment) in manifest.segments.iter().enumerate() {
        text = text.replace(
            &format!("{:016x}", segment.upload),
            &format!("[UPLOAD {i}]"),
        );
        text = text.replace(
            &format!("{:08x}/", segment.segment_crc),
            &format!("[LOG CRC {i}]/"),
        );
    }
    for marker in ["has CRC-32 ", "the manifest says "] {
        let mut from = 0;
        while let Some(found) = text[from..].find(marker) {
            let hex = from + found + marker.len();
            // `0x` and eight hex digits.
            text.replace_range(hex..hex + 10, "[CRC]");
            from = hex;
        }
    }
    text
}

#[test]
fn stat_verify_and_manifest_show_the_remote_copy() {
    let (tmp, dir, bucket) = offloaded();
    let url = format!("file://{}", bucket.display());
    let mut text = Vec::new();
    for args in [
        vec!["stat", s(&dir), "--remote", &url],
        vec!["verify", s(&dir), "--remote", &url],
        vec!["manifest", "list", s(&dir), "--remote", &url],
        vec!["manifest", "check", s(&dir), "--remote", &url],
    ] {
        text.push(shown(&args, tmp.path(), &bucket));
    }
    insta::assert_snapshot!(text.join("\n"));
}

#[test]
fn json_lines_carry_the_remote_range_and_findings() {
    let (_tmp, dir, bucket) = offloaded();
    let url = format!("file://{}", bucket.display());
    let (rt, shard) = remote(&bucket);
    let manifest = rt.block_on(shard.newest()).unwrap().unwrap();
    let stat = run(["stat", "--json", s(&dir), "--remote", &url]);
    assert_eq!(stat.code, 0, "{}", stat.stderr);
    let line = &stat.json_lines()[0];
    assert_eq!(line["remote"]["manifest_seq"], manifest.seq);
    assert_eq!(line["remote"]["start_offset"], 0);
    assert_eq!(line["remote"]["next_offset"], manifest.next_offset());
    assert_eq!(line["base_offset"], manifest.next_offset());
    assert_eq!(
        line["remote"]["segments"].as_array().unwrap().len(),
        manifest.segments.len()
    );
    let verify = run(["verify", "--json", s(&dir), "--remote", &url]);
    assert_eq!(verify.code, 0, "{}", verify.stderr);
    assert_eq!(
        verify.json_lines()[0]["remote"]["findings"],
        serde_json::json!([])
    );
    let check = run(["manifest", "check", "--json", s(&dir), "--remote", &url]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    let checked = &check.json_lines()[0];
    assert_eq!(checked["ok"], true);
    assert_eq!(checked["manifest"]["next_offset"], manifest.next_offset());
}

#[test]
fn manifest_fetch_writes_the_bytes_as_stored() {
    let (tmp, dir, bucket) = offloaded();
    let url = format!("file://{}", bucket.display());
    let (rt, shard) = remote(&bucket);
    let versions = rt.block_on(shard.manifests()).unwrap();
    let newest = versions.last().unwrap();
    let out = tmp.path().join("manifest.bin");
    let fetched = run([
        "manifest",
        "fetch",
        s(&dir),
        "--remote",
        &url,
        "--output",
        s(&out),
    ]);
    assert_eq!(fetched.code, 0, "{}", fetched.stderr);
    let stored = std::fs::read(bucket.join(newest.object.as_ref())).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), stored);
    let decoded = felix_format::tier_manifest::decode_manifest(&stored).unwrap();
    assert_eq!(decoded.seq, newest.seq);
}

#[test]
fn manifest_commands_name_the_shard_by_key_when_its_directory_is_gone() {
    let (_tmp, dir, bucket) = offloaded();
    let url = format!("file://{}", bucket.display());
    let by_dir = run(["manifest", "list", s(&dir), "--remote", &url]);
    assert_eq!(by_dir.code, 0, "{}", by_dir.stderr);
    std::fs::remove_dir_all(&dir).unwrap();
    let key = ["--key", "acme", "default", "orders", "3"];
    let listed = run([["manifest", "list", "--remote", &url].as_slice(), &key].concat());
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert_eq!(listed.stdout, by_dir.stdout);
    let checked = run([["manifest", "check", "--remote", &url].as_slice(), &key].concat());
    assert_eq!(checked.code, 0, "{}", checked.stderr);
    // Another shard's key finds none of these objects.
    let other = run([
        "manifest", "list", "--remote", &url, "--key", "acme", "default", "orders", "4",
    ]);
    assert_eq!(other.code, 0, "{}", other.stderr);
    assert!(
        other
            .stdout
            .contains("0 manifest versions under felix/acme_default_orders_4-"),
        "{}",
        other.stdout
    );
    let bad = run([
        "manifest", "list", "--remote", &url, "--key", "acme", "default", "orders", "x",
    ]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("not a u32"), "{}", bad.stderr);
}

#[test]
fn a_damaged_remote_object_is_named_and_exits_1() {
    let (tmp, dir, bucket) = offloaded();
    let url = format!("file://{}", bucket.display());
    let (rt, shard) = remote(&bucket);
    let manifest = rt.block_on(shard.newest()).unwrap().unwrap();
    // Flip one payload byte of the second remote segment's `.log`.
    let victim = &manifest.segments[1];
    let object = bucket.join(format!(
        "{}/{}",
        shard.base(),
        felix_format::tier_manifest::segment_object_name(
            victim.extent.id,
            victim.upload,
            felix_format::FileKind::Segment
        )
    ));
    let mut bytes = std::fs::read(&object).unwrap();
    let at = bytes.len() - 3;
    bytes[at] ^= 0x20;
    std::fs::write(&object, bytes).unwrap();
    let text = shown(&["verify", s(&dir), "--remote", &url], tmp.path(), &bucket);
    insta::assert_snapshot!(text);
    let json = run(["verify", "--json", s(&dir), "--remote", &url]);
    assert_eq!(json.code, 1, "{}", json.stderr);
    let findings = json.json_lines()[0]["remote"]["findings"].clone();
    // The object's CRC, and the record walk naming the damaged record.
    assert_eq!(findings.as_array().unwrap().len(), 2, "{findings}");
    for finding in findings.as_array().unwrap() {
        assert_eq!(finding["segment"], victim.extent.id);
        assert_eq!(finding["object"], "log");
        assert_eq!(finding["damage"], true);
    }
    assert!(
        findings[0]["detail"]
            .as_str()
            .unwrap()
            .contains("has CRC-32"),
        "{findings}"
    );
    assert!(
        findings[1]["detail"]
            .as_str()
            .unwrap()
            .contains("is damaged at byte"),
        "{findings}"
    );
    // The manifest itself is whole.
    let check = run(["manifest", "check", s(&dir), "--remote", &url]);
    assert_eq!(check.code, 0, "{}", check.stderr);
}

#[test]
fn bad_remote_urls_are_usage_errors() {
    let (_tmp, dir, _bucket) = offloaded();
    for (url, says) in [
        ("ftp://x", "expected file:///DIR or s3://BUCKET[/PREFIX]"),
        ("file://relative", "absolute directory"),
        ("s3://", "names a bucket"),
    ] {
        let r = run(["stat", s(&dir), "--remote", url]);
        assert_eq!(r.code, 2, "{url}");
        assert!(r.stderr.contains(says), "{url}: {}", r.stderr);
    }
    let r = run(["manifest", "list", s(&dir)]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("needs --remote"), "{}", r.stderr);
}

/// The object of `segment`'s file `kind` in the bucket directory.
fn object_file(
    bucket: &Path,
    shard: &RemoteShard,
    segment: &felix_format::tier_manifest::RemoteSegment,
    kind: felix_format::FileKind,
) -> PathBuf {
    bucket.join(format!(
        "{}/{}",
        shard.base(),
        felix_format::tier_manifest::segment_object_name(segment.extent.id, segment.upload, kind)
    ))
}

#[test]
fn verify_remote_emptied_bucket_names_the_offsets_held_nowhere() {
    let (tmp, dir, bucket) = offloaded();
    let url = format!("file://{}", bucket.display());
    let (rt, shard) = remote(&bucket);
    let local_start = rt.block_on(shard.newest()).unwrap().unwrap().next_offset();
    std::fs::remove_dir_all(&bucket).unwrap();
    std::fs::create_dir(&bucket).unwrap();
    let mut text = Vec::new();
    for args in [
        vec!["verify", s(&dir), "--remote", &url],
        vec!["stat", s(&dir), "--remote", &url],
    ] {
        text.push(transcript(&args, tmp.path()));
    }
    insta::assert_snapshot!(text.join("\n"));
    let json = run(["verify", "--json", s(&dir), "--remote", &url]);
    assert_eq!(json.code, 1, "{}", json.stderr);
    let held = &json.json_lines()[0]["remote"]["held_nowhere"];
    assert_eq!(held["start"], 0, "{held}");
    assert_eq!(held["end"], local_start, "{held}");
}

#[test]
fn verify_remote_wrong_prefix_names_the_offsets_held_nowhere() {
    let (_tmp, dir, bucket) = offloaded();
    let url = format!("file://{}", bucket.display());
    let right = run(["verify", s(&dir), "--remote", &url]);
    assert_eq!(right.code, 0, "{}", right.stdout);
    let wrong = run([
        "verify",
        s(&dir),
        "--remote",
        &url,
        "--tier-prefix",
        "other",
    ]);
    assert_eq!(wrong.code, 1, "{}", wrong.stdout);
    assert!(
        wrong.stdout.contains("REMOTE DAMAGED: offsets 0..98 of shard acme/default/orders/3 are in neither the local log nor the remote copy"),
        "{}",
        wrong.stdout
    );
}

#[test]
fn verify_remote_missing_listed_object_is_damage_and_exits_1() {
    let (tmp, dir, bucket) = offloaded();
    let url = format!("file://{}", bucket.display());
    let (rt, shard) = remote(&bucket);
    let manifest = rt.block_on(shard.newest()).unwrap().unwrap();
    let victim = &manifest.segments[2];
    std::fs::remove_file(object_file(
        &bucket,
        &shard,
        victim,
        felix_format::FileKind::Index,
    ))
    .unwrap();
    let text = shown(&["verify", s(&dir), "--remote", &url], tmp.path(), &bucket);
    insta::assert_snapshot!(text);
    let json = run(["verify", "--json", s(&dir), "--remote", &url]);
    assert_eq!(json.code, 1, "{}", json.stderr);
    let findings = json.json_lines()[0]["remote"]["findings"].clone();
    assert_eq!(findings.as_array().unwrap().len(), 1, "{findings}");
    assert_eq!(findings[0]["segment"], victim.extent.id);
    assert_eq!(findings[0]["object"], "index");
    assert_eq!(findings[0]["damage"], true);
}

/// Runs the binary with `args` and `env`, killed if it has not ended
/// within `limit` (then the test fails).
fn run_bounded(args: &[&str], env: &[(&str, &str)], limit: std::time::Duration) -> common::Run {
    use std::io::Read;
    let mut child = common::bin()
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("felix-store {args:?} still running after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    common::Run {
        code: status.code().expect("exited, not killed"),
        stdout,
        stderr,
    }
}

#[test]
fn stat_and_verify_remote_endpoint_down_exit_2_with_the_error_on_stderr() {
    let (_tmp, dir, _bucket) = offloaded();
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let env = [
        ("AWS_ACCESS_KEY_ID", "felix"),
        ("AWS_SECRET_ACCESS_KEY", "felix-secret"),
        ("AWS_REGION", "us-east-1"),
    ];
    for command in ["stat", "verify"] {
        let args = [
            command,
            s(&dir),
            "--remote",
            "s3://bucket",
            "--s3-endpoint",
            &endpoint,
        ];
        let r = run_bounded(&args, &env, std::time::Duration::from_secs(120));
        assert_eq!(r.code, 2, "{command}: {}{}", r.stdout, r.stderr);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{command}: {}", r.stderr);
        let line = lines[0];
        assert!(
            line.starts_with(
                "felix-store: shard acme_default_orders_3-0d3af04b998d2cb1: remote s3://bucket: object store list of felix/acme_default_orders_3-0d3af04b998d2cb1 failed: "
            ),
            "{command}: {line}"
        );
        // Each fact once: the request's URL is named a single time.
        assert_eq!(
            line.matches(&format!("127.0.0.1:{port}")).count(),
            1,
            "{command}: {line}"
        );
    }
}

/// A stand-in S3 endpoint on 127.0.0.1 that answers every request as S3
/// answers one for a bucket that does not exist: 404 with an XML body.
/// Stops (and its thread ends) when dropped.
struct NoSuchBucket {
    addr: std::net::SocketAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

const NO_SUCH_BUCKET_BODY: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message><BucketName>nosuch</BucketName></Error>";

impl NoSuchBucket {
    fn start() -> Self {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            // Bounded even if the test never drops it.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
            while !stopped.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                let Ok((mut socket, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                };
                socket.set_nonblocking(false).unwrap();
                socket
                    .set_read_timeout(Some(std::time::Duration::from_secs(5)))
                    .unwrap();
                // The request head (object_store's list has no body).
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && socket.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let answer = format!(
                    "HTTP/1.1 404 Not Found\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{NO_SUCH_BUCKET_BODY}",
                    NO_SUCH_BUCKET_BODY.len()
                );
                let _ = socket.write_all(answer.as_bytes());
            }
        });
        NoSuchBucket {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for NoSuchBucket {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn stat_remote_store_error_tells_the_url_and_the_answer_once() {
    let (_tmp, dir, _bucket) = offloaded();
    let server = NoSuchBucket::start();
    let endpoint = format!("http://{}", server.addr);
    let env = [
        ("AWS_ACCESS_KEY_ID", "felix"),
        ("AWS_SECRET_ACCESS_KEY", "felix-secret"),
        ("AWS_REGION", "us-east-1"),
    ];
    let args = [
        "stat",
        s(&dir),
        "--remote",
        "s3://nosuch",
        "--s3-endpoint",
        &endpoint,
    ];
    let r = run_bounded(&args, &env, std::time::Duration::from_secs(60));
    drop(server);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", r.stderr);
    let line = lines[0];
    for fact in [endpoint.as_str(), "<Code>NoSuchBucket</Code>", "404"] {
        assert_eq!(line.matches(fact).count(), 1, "{fact} in {line}");
    }
    // The same text on stdout, in the shard's report, once.
    assert_eq!(
        r.stdout.matches("<Code>NoSuchBucket</Code>").count(),
        1,
        "{}",
        r.stdout
    );
}

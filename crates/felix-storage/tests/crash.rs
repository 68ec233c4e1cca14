//! A writer process killed with SIGKILL at random moments, many times: every
//! record it acknowledged is there, intact, after reopen.
//!
//! The test binary re-executes itself as the writer (selected by an
//! environment variable), so no extra binary is needed.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use felix_storage::{Durability, Preallocation, ReadBound, Record, Shard, StoreConfig};

const CHILD_ENV: &str = "FELIX_STORAGE_CRASH_CHILD_DIR";

fn config() -> StoreConfig {
    StoreConfig {
        segment_size_bytes: 64 * 1024,
        index_spacing_bytes: 1024,
        preallocate: Preallocation::Stepped,
        durability: Durability::OnCommit,
        ..StoreConfig::default()
    }
}

fn payload(offset: u64) -> Vec<u8> {
    let mut p = format!("crash-{offset:020}-").into_bytes();
    p.extend((0..(offset % 300) as usize).map(|i| (offset as usize + i) as u8));
    p
}

/// The writer: appends batches of 3 until killed, printing each ack.
fn child(dir: &Path) -> ! {
    let shard = Shard::options(dir)
        .config(config())
        .label("crash")
        .open()
        .unwrap();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    loop {
        let next = shard.offsets().written;
        let batch: Vec<_> = (next..next + 3)
            .map(|o| Record::new(o, payload(o)))
            .collect();
        let receipt = shard.append(&batch).wait().unwrap();
        writeln!(out, "ack {} {}", receipt.first_offset, receipt.last_offset).unwrap();
        out.flush().unwrap();
    }
}

/// A writer process, killed with SIGKILL when dropped.
struct KillOnDrop(Child);

impl KillOnDrop {
    fn kill(&mut self) {
        // Already gone (a writer that failed) is fine: its acks are all
        // printed, and the reopen checks them.
        let _ = self.0.kill(); // SIGKILL
        self.0.wait().unwrap();
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads every record below `next` from offset 0: offsets contiguous and
/// each payload exactly what the writer appended there (whether or not
/// the kill left its ack unread). Each read must return at least one
/// record, so this makes at most `next` reads.
fn read_back_exactly(shard: &Shard, next: u64) {
    assert_eq!(shard.offsets().base, 0, "nothing was ever deleted");
    let mut offset = 0;
    while offset < next {
        let records = shard.read(offset, 1 << 20, ReadBound::Committed).unwrap();
        assert!(
            !records.is_empty(),
            "a read at {offset} returned nothing, below the next offset {next}"
        );
        for record in records {
            assert_eq!(
                record.offset, offset,
                "offsets not contiguous: {} where {offset} was next",
                record.offset
            );
            assert!(
                offset < next,
                "a record at {offset}, past the log end {next}"
            );
            assert_eq!(record.payload, payload(offset), "offset {offset}");
            offset += 1;
        }
    }
}

#[test]
fn crash_sigkill_at_random_moments_keeps_every_acknowledged_record() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(Path::new(&dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut highest_acked: Option<u64> = None;
    let mut kills = 0;
    for _round in 0..12 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let run_for = Duration::from_millis(20 + seed % 150);
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_sigkill_at_random_moments_keeps_every_acknowledged_record",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // Killed however this round ends, a failed assertion included.
        let mut child = KillOnDrop(child);
        let started = Instant::now();
        let reader = std::thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("ack ") {
                    let last_offset: u64 = rest.split(' ').nth(1).unwrap().parse().unwrap();
                    last = Some(last_offset);
                }
            }
            last
        });
        std::thread::sleep(run_for.saturating_sub(started.elapsed()));
        child.kill();
        kills += 1;
        if let Some(last) = reader.join().unwrap() {
            highest_acked = highest_acked.max(Some(last));
        }
        // Reopen in this process and check every acknowledged record.
        let shard = Shard::options(dir.path())
            .config(config())
            .label("crash")
            .open()
            .unwrap();
        let next = shard.offsets().written;
        if let Some(acked) = highest_acked {
            assert!(next > acked, "round lost acknowledged offset {acked}");
        }
        read_back_exactly(&shard, next);
    }
    println!("{kills} kills, highest acknowledged offset {highest_acked:?}");
    assert!(
        highest_acked.is_some_and(|a| a > 30),
        "the writer made progress: {highest_acked:?}"
    );
}

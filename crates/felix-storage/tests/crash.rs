//! A writer process killed with SIGKILL at random moments, many times: every
//! record it acknowledged is there, intact, after reopen.
//!
//! The test binary re-executes itself as the writer (selected by an
//! environment variable), so no extra binary is needed.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use felix_storage::{Durability, Preallocation, Record, Shard, StoreConfig};

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
        let next = shard.next_offset();
        let batch: Vec<_> = (next..next + 3)
            .map(|o| Record::new(o, payload(o)))
            .collect();
        let receipt = shard.append(&batch).unwrap();
        writeln!(out, "ack {} {}", receipt.first_offset, receipt.last_offset).unwrap();
        out.flush().unwrap();
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
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
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
        if let Some(acked) = highest_acked {
            assert!(
                shard.next_offset() > acked,
                "round lost acknowledged offset {acked}"
            );
            let mut offset = 0;
            while offset <= acked {
                for record in shard.read(offset, 1 << 20).unwrap() {
                    assert_eq!(
                        record.payload,
                        payload(record.offset),
                        "offset {}",
                        record.offset
                    );
                    offset = record.offset + 1;
                }
            }
        }
    }
    println!("{kills} kills, highest acknowledged offset {highest_acked:?}");
    assert!(
        highest_acked.is_some_and(|a| a > 30),
        "the writer made progress: {highest_acked:?}"
    );
}

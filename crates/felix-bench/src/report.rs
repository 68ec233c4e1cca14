//! One JSON line per run, with the figures `cargo xtask bench` compares.

use std::time::Duration;

use serde_json::{Map, Value, json};

/// What one run measured.
#[derive(Debug, Clone, Default)]
pub struct Measurement {
    /// The scenario, e.g. `append`.
    pub scenario: String,
    /// The implementation, e.g. `felix`.
    pub implementation: String,
    /// The parameters that define the cell (payload size, batch, threads…).
    pub params: Map<String, Value>,
    /// Records processed.
    pub records: u64,
    /// Bytes processed (as the implementation counts them on disk or read).
    pub bytes: u64,
    /// Wall time of the measured part.
    pub elapsed: Duration,
    /// Per-operation latencies, when the scenario times each operation.
    pub latencies: Option<Latencies>,
    /// Appends made durable per `fdatasync`, when known.
    pub appends_per_sync: Option<f64>,
    /// Free-form facts worth keeping with the figure (what a peer skips).
    pub notes: Map<String, Value>,
}

impl Measurement {
    /// A measurement of `scenario` by `implementation` with `params`.
    pub fn new(scenario: &str, implementation: &str, params: Value) -> Self {
        Self {
            scenario: scenario.to_string(),
            implementation: implementation.to_string(),
            params: match params {
                Value::Object(map) => map,
                _ => Map::new(),
            },
            ..Self::default()
        }
    }

    /// The JSON line, peak RSS read now.
    pub fn to_json(&self) -> Value {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        let mut line = json!({
            "scenario": self.scenario,
            "impl": self.implementation,
            "params": self.params,
            "records": self.records,
            "bytes": self.bytes,
            "elapsed_seconds": round(secs, 6),
            "records_per_second": round(self.records as f64 / secs, 1),
            "bytes_per_second": round(self.bytes as f64 / secs, 1),
        });
        if let Value::Object(map) = &mut line {
            if let Some(latencies) = &self.latencies {
                map.insert("latency_us".into(), latencies.summary());
            }
            if let Some(aps) = self.appends_per_sync {
                map.insert("appends_per_sync".into(), json!(round(aps, 3)));
            }
            map.insert("peak_rss_bytes".into(), json!(peak_rss_bytes()));
            if !self.notes.is_empty() {
                map.insert("notes".into(), Value::Object(self.notes.clone()));
            }
        }
        line
    }

    /// Prints the JSON line on stdout.
    pub fn print(&self) {
        println!("{}", self.to_json());
    }
}

/// Operation latencies in nanoseconds.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    nanos: Vec<u64>,
}

impl Latencies {
    /// Room for `n` samples, allocated before measuring starts.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            nanos: Vec::with_capacity(n),
        }
    }

    /// Records one operation's duration.
    pub fn push(&mut self, elapsed: Duration) {
        self.nanos
            .push(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Adds another thread's samples.
    pub fn extend(&mut self, other: Latencies) {
        self.nanos.extend(other.nanos);
    }

    /// Every thread's samples, thread by thread, or the first thread's
    /// failure: what a run's threads return, merged once they are joined.
    pub fn merged(runs: Vec<Result<Latencies, String>>) -> Result<Latencies, String> {
        let mut all = Latencies::with_capacity(runs.iter().flatten().map(Latencies::len).sum());
        for run in runs {
            all.extend(run?);
        }
        Ok(all)
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.nanos.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.nanos.is_empty()
    }

    /// `{p50, p90, p99, p999, max}` in microseconds (nearest rank).
    pub fn summary(&self) -> Value {
        let mut sorted = self.nanos.clone();
        sorted.sort_unstable();
        let q = |q: f64| {
            if sorted.is_empty() {
                return 0.0;
            }
            let rank = (q * sorted.len() as f64).ceil() as usize;
            let index = rank.clamp(1, sorted.len()) - 1;
            round(
                sorted.get(index).copied().unwrap_or_default() as f64 / 1e3,
                3,
            )
        };
        json!({"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "p999": q(0.999), "max": q(1.0)})
    }
}

/// The process's peak resident set (`VmHWM` of `/proc/self/status`), in
/// bytes; 0 where that file is unavailable.
pub fn peak_rss_bytes() -> u64 {
    status_kib("VmHWM:") * 1024
}

/// CPU time used so far (user and system, from `/proc`), by the whole
/// process and by the calling thread, to report what a timed part cost:
/// [`CpuTime::process_notes`], [`CpuTime::per_record_notes`]. Zero where
/// `/proc` is unavailable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTime {
    /// Every thread's, in clock ticks.
    pub process: u64,
    /// The calling thread's, in clock ticks.
    pub thread: u64,
    /// Of that, in the kernel.
    pub thread_system: u64,
}

impl CpuTime {
    /// The CPU time used until now.
    pub fn now() -> Self {
        let thread = stat_ticks("/proc/thread-self/stat");
        Self {
            process: stat_ticks("/proc/self/stat").0,
            thread: thread.0,
            thread_system: thread.1,
        }
    }

    /// Notes `cpu_us_per_record`, every thread's CPU time per record for
    /// `records` done between `self` and `now`, a later reading.
    pub fn process_notes(self, now: Self, records: u64, m: &mut Measurement) {
        m.notes.insert(
            "cpu_us_per_record".into(),
            json!(per_record(
                now.process.saturating_sub(self.process),
                records
            )),
        );
    }

    /// [`CpuTime::process_notes`], and for a run driven from one thread
    /// (the one that took both readings) its own: `driver_cpu_us_per_record`
    /// and `driver_system_us_per_record` (its time in the kernel).
    pub fn per_record_notes(self, now: Self, records: u64, m: &mut Measurement) {
        self.process_notes(now, records, m);
        m.notes.insert(
            "driver_cpu_us_per_record".into(),
            json!(per_record(now.thread.saturating_sub(self.thread), records)),
        );
        m.notes.insert(
            "driver_system_us_per_record".into(),
            json!(per_record(
                now.thread_system.saturating_sub(self.thread_system),
                records
            )),
        );
    }
}

/// `ticks` of CPU time in microseconds per record, to two decimals.
fn per_record(ticks: u64, records: u64) -> f64 {
    let tick_us = 1e6 / rustix::param::clock_ticks_per_second().max(1) as f64;
    round(ticks as f64 * tick_us / records.max(1) as f64, 2)
}

/// `(utime + stime, stime)` of a `/proc/.../stat` file: its 14th and
/// 15th fields, counted after the command name's closing parenthesis (the
/// name may hold spaces and parentheses).
fn stat_ticks(path: &str) -> (u64, u64) {
    std::fs::read_to_string(path).map_or((0, 0), |stat| ticks_of(&stat))
}

fn ticks_of(stat: &str) -> (u64, u64) {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return (0, 0);
    };
    // `rest` starts at field 3 (the state).
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field(14) + field(15), field(15))
}

/// The process's current resident set (`VmRSS`), in bytes.
pub fn rss_bytes() -> u64 {
    status_kib("VmRSS:") * 1024
}

fn status_kib(field: &str) -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// `value` rounded to `digits` decimals.
pub fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_latencies_keep_every_threads_samples_or_give_the_first_failure() {
        let run = |micros: &[u64]| {
            let mut l = Latencies::default();
            for &us in micros {
                l.push(Duration::from_micros(us));
            }
            Ok(l)
        };
        let all = Latencies::merged(vec![run(&[1, 2]), run(&[]), run(&[3])]).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all.summary()["max"], 3.0);
        let failed = Latencies::merged(vec![run(&[1]), Err("a".into()), Err("b".into())]);
        assert_eq!(failed.err().as_deref(), Some("a"));
    }

    #[test]
    fn cpu_ticks_are_user_plus_system_after_a_name_with_spaces_and_parentheses() {
        let stat = "4242 (felix (x) bench) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    37 5 0 0 20 0 3 0 12345 1000 200";
        assert_eq!(ticks_of(stat), (42, 5));
        assert_eq!(ticks_of("garbage"), (0, 0));
    }

    #[test]
    fn latencies_summary_is_nearest_rank_in_micros() {
        let mut l = Latencies::default();
        for i in 1..=1000u64 {
            l.push(Duration::from_micros(i));
        }
        let s = l.summary();
        assert_eq!(s["p50"], 500.0);
        assert_eq!(s["p999"], 999.0);
        assert_eq!(s["max"], 1000.0);
    }

    #[test]
    fn peak_rss_is_read_from_proc() {
        assert!(peak_rss_bytes() > 0);
        assert!(peak_rss_bytes() >= rss_bytes() / 2);
    }
}

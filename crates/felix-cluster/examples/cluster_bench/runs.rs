//! The four runs: produce, idle, catch-up, failover.

use super::*;

/// `records` appends of `payload_bytes`, `in_flight` at a time, the k-th
/// to `keys[k % len]`; every append's latency in microseconds.
pub(super) async fn produce(
    client: &Arc<Client>,
    keys: &Arc<Vec<ShardKey>>,
    records: u64,
    in_flight: u64,
    payload_bytes: usize,
) -> Result<Vec<u64>> {
    let mut tasks = Vec::new();
    for w in 0..in_flight {
        let (client, keys) = (Arc::clone(client), Arc::clone(keys));
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut n = w;
            while n < records {
                let key = &keys[(n % keys.len() as u64) as usize];
                let mut payload = vec![0u8; payload_bytes];
                let id = n.to_be_bytes();
                let len = id.len().min(payload_bytes);
                payload[..len].copy_from_slice(&id[..len]);
                let t = Instant::now();
                client
                    .append(key, vec![payload])
                    .await
                    .map_err(|e| format!("append to {key}: {e}"))?;
                latencies.push(micros(t.elapsed()));
                n += in_flight;
            }
            Ok::<_, String>(latencies)
        }));
    }
    let mut all = Vec::with_capacity(records as usize);
    for task in tasks {
        all.extend(task.await.map_err(|e| format!("a producer: {e}"))??);
    }
    Ok(all)
}

/// How many groups each node leads, by node id.
pub(super) async fn leaders(client: &Client, cluster: &Cluster) -> Result<BTreeMap<u64, usize>> {
    let mut led = BTreeMap::new();
    for node in &cluster.nodes {
        let groups = groups(client, &node.addr).await?;
        let count = groups.iter().filter(|g| g.role == "leader").count();
        led.insert(node.id, count);
    }
    Ok(led)
}

pub(super) fn leaders_note(led: &BTreeMap<u64, usize>) -> String {
    let items: Vec<String> = led.iter().map(|(id, n)| format!("\"{id}\":{n}")).collect();
    format!("{{{}}}", items.join(","))
}

pub(super) async fn run_produce(args: &Args, cluster: &mut Cluster) -> Result<String> {
    let client = Arc::new(client(cluster));
    wait_started(&client, cluster).await?;
    let keys: Vec<ShardKey> = (0..args.shards).map(|s| key("produce", s)).collect();
    create(&client, &keys).await?;
    settle(&client, cluster, keys.len()).await?;
    let keys = Arc::new(keys);
    // One append to each shard finds its leader; then the warm-up.
    produce(
        &client,
        &keys,
        keys.len() as u64,
        args.in_flight,
        args.payload_bytes,
    )
    .await?;
    produce(&client, &keys, WARMUP, args.in_flight, args.payload_bytes).await?;
    let mut pids = node_pids(cluster)?;
    pids.push(std::process::id().to_string());
    let cpu = CpuWindow::start(pids)?;
    let started = Instant::now();
    let mut latencies = produce(
        &client,
        &keys,
        args.records,
        args.in_flight,
        args.payload_bytes,
    )
    .await?;
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu.percent()?;
    cluster.check_running()?;
    let led = leaders(&client, cluster).await?;
    latencies.sort_unstable();
    let rate = args.records as f64 / elapsed;
    Ok(format!(
        "{{\"scenario\":\"produce\",\"impl\":\"felix-cluster\",\
         \"params\":{{\"nodes\":{NODES},\"shards\":{},\"in_flight\":{},\"payload_bytes\":{}}},\
         \"records\":{},\"bytes\":{},\"elapsed_seconds\":{elapsed:.4},\
         \"records_per_second\":{rate:.1},\"bytes_per_second\":{:.1},\
         \"latency_us\":{{\"p50\":{},\"p90\":{},\"p99\":{},\"max\":{}}},\"peak_rss_bytes\":{},\
         \"notes\":{{\"cpu_percent_of_core_per_node\":{},\"client_cpu_percent_of_core\":{:.2},\
         \"groups_led_per_node\":{},{}}}}}",
        args.shards,
        args.in_flight,
        args.payload_bytes,
        args.records,
        args.records * args.payload_bytes as u64,
        rate * args.payload_bytes as f64,
        quantile(&latencies, 0.5),
        quantile(&latencies, 0.9),
        quantile(&latencies, 0.99),
        latencies.last().copied().unwrap_or(0),
        nodes_peak_rss(cluster)?,
        list(&cpu[..cpu.len() - 1]),
        cpu.last().copied().unwrap_or(f64::NAN),
        leaders_note(&led),
        timings_note(cluster.timings),
    ))
}

pub(super) fn timings_note(t: RaftTimings) -> String {
    format!(
        "\"heartbeat_ms\":{},\"election_min_ms\":{},\"election_max_ms\":{}",
        t.heartbeat_ms, t.election_min_ms, t.election_max_ms
    )
}

/// What the nodes that answered say about their groups.
#[derive(Default)]
pub(super) struct Census {
    /// Nodes that answered a status request.
    pub(super) answered: usize,
    /// Groups each node leads, by node id.
    pub(super) led: BTreeMap<u64, usize>,
    /// The most groups one node knows no leader of.
    pub(super) leaderless: usize,
    /// Each group's highest term among the nodes.
    pub(super) terms: BTreeMap<ShardName, u64>,
}

/// Asks every node for its status; a node that does not answer (an
/// overloaded one may not) is left out rather than failing the run.
pub(super) async fn census(client: &Client, cluster: &Cluster, count: usize) -> Census {
    let mut census = Census::default();
    for node in &cluster.nodes {
        let Ok(groups) = groups(client, &node.addr).await else {
            continue;
        };
        census.answered += 1;
        let led = groups.iter().filter(|g| g.role == "leader").count();
        census.led.insert(node.id, led);
        let known = groups.iter().filter(|g| g.leader.is_some()).count();
        census.leaderless = census.leaderless.max(count.saturating_sub(known));
        for g in groups {
            let term = census.terms.entry(g.shard).or_default();
            *term = (*term).max(g.term);
        }
    }
    census
}

pub(super) async fn run_idle(args: &Args, cluster: &mut Cluster) -> Result<String> {
    let client = client(cluster);
    wait_started(&client, cluster).await?;
    let keys: Vec<ShardKey> = (0..args.shards).map(|s| key("idle", s)).collect();
    let started = Instant::now();
    create(&client, &keys).await?;
    let create_seconds = started.elapsed().as_secs_f64();
    // Every node knows a leader of every group, within the bound; a
    // cluster that does not settle is measured all the same, and says so.
    let mut before = census(&client, cluster, keys.len()).await;
    while (before.answered < cluster.nodes.len() || before.leaderless > 0)
        && started.elapsed().as_secs_f64() - create_seconds < SETTLE_BOUND.as_secs_f64()
    {
        tokio::time::sleep(Duration::from_millis(500)).await;
        before = census(&client, cluster, keys.len()).await;
    }
    let settled = before.answered == cluster.nodes.len() && before.leaderless == 0;
    let settle_seconds = started.elapsed().as_secs_f64() - create_seconds;
    // What the creations left behind (first syncs) is done.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pids = node_pids(cluster)?;
    let cpu = CpuWindow::start(pids.clone())?;
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    let cpu = cpu.percent()?;
    cluster.check_running()?;
    let mut threads = Vec::new();
    let mut fds = Vec::new();
    for pid in &pids {
        threads.push(status_field(pid, "Threads:")? as f64);
        fds.push(open_descriptors(pid)? as f64);
    }
    let peak_rss = nodes_peak_rss(cluster)?;
    // Elections while idle: the terms the groups moved on by, between
    // the census before the window (taken ≥ 2 s before it) and after.
    let after = census(&client, cluster, keys.len()).await;
    let elections: u64 = after
        .terms
        .iter()
        .filter_map(|(shard, term)| Some(term.saturating_sub(*before.terms.get(shard)?)))
        .sum();
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    Ok(format!(
        "{{\"scenario\":\"idle\",\"impl\":\"felix-cluster\",\
         \"params\":{{\"nodes\":{NODES},\"shards\":{},\"seconds\":{}}},\
         \"peak_rss_bytes\":{peak_rss},\
         \"notes\":{{\"cpu_percent_of_core\":{:.2},\"cpu_percent_of_core_per_node\":{},\
         \"clock_ticks_per_second\":{},\"threads\":{},\"threads_per_node\":{},\
         \"open_descriptors\":{},\"open_descriptors_per_node\":{},\
         \"create_seconds\":{create_seconds:.3},\"settled\":{settled},\"settle_seconds\":{settle_seconds:.3},\
         \"groups_led_per_node\":{},\"groups_without_leader_after\":{},\
         \"term_increases_around_window\":{elections},\"nodes_answering_after\":{},{}}}}}",
        args.shards,
        args.seconds,
        max(&cpu),
        list(&cpu),
        clock_ticks_per_second(),
        max(&threads),
        list(&threads),
        max(&fds),
        list(&fds),
        leaders_note(&before.led),
        after.leaderless,
        after.answered,
        timings_note(cluster.timings),
    ))
}

/// A node that follows `name`, and its address.
pub(super) async fn follower(
    client: &Client,
    cluster: &Cluster,
    name: &ShardName,
) -> Result<(u64, String)> {
    for node in &cluster.nodes {
        let groups = groups(client, &node.addr).await?;
        if groups
            .iter()
            .any(|g| &g.shard == name && g.role == "follower")
        {
            return Ok((node.id, node.addr.clone()));
        }
    }
    Err("no follower".into())
}

pub(super) async fn run_catch_up(args: &Args, cluster: &mut Cluster) -> Result<String> {
    let client = client(cluster);
    wait_started(&client, cluster).await?;
    let shard = key("catch-up", 0);
    create(&client, std::slice::from_ref(&shard)).await?;
    settle(&client, cluster, 1).await?;
    let mut left = args.records;
    let mut last = 0;
    while left > 0 {
        let n = left.min(FILL_BATCH as u64);
        let batch = vec![vec![7u8; args.payload_bytes]; n as usize];
        let offsets = client
            .append(&shard, batch)
            .await
            .map_err(|e| format!("fill: {e}"))?;
        last = offsets.last().copied().unwrap_or(last);
        left -= n;
    }
    let name = ShardName::from(&shard);
    let (follower_id, addr) = follower(&client, cluster, &name).await?;
    // The follower knows every record committed before the clock starts.
    let waited = Instant::now();
    loop {
        let batch = client
            .read_at(&addr, &shard, last, 1, Duration::ZERO)
            .await
            .map_err(|e| format!("read from node {follower_id}: {e}"))?;
        if batch.offsets.committed > last {
            break;
        }
        if waited.elapsed() > SETTLE_BOUND {
            return Err(format!(
                "node {follower_id} did not learn of commit {last} within {SETTLE_BOUND:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    // A consumer's reader: the next read is on its way while a batch is
    // checked and counted.
    let mut reader = client.reader_at(&addr, &shard, 0, READ_BYTES, Duration::ZERO);
    let (mut records, mut reads) = (0u64, 0u64);
    while reader.position() <= last {
        let from = reader.position();
        let batch = reader
            .next_batch()
            .await
            .map_err(|e| format!("read from node {follower_id} at {from}: {e}"))?;
        if batch.next <= from {
            return Err(format!("node {follower_id}: no progress at {from}"));
        }
        records += batch.records().count() as u64;
        reads += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    cluster.check_running()?;
    if records != args.records {
        return Err(format!("read {records} records of {}", args.records));
    }
    let rate = records as f64 / elapsed;
    Ok(format!(
        "{{\"scenario\":\"catch-up\",\"impl\":\"felix-cluster\",\
         \"params\":{{\"nodes\":{NODES},\"payload_bytes\":{},\"max_bytes\":{READ_BYTES}}},\
         \"records\":{records},\"bytes\":{},\"elapsed_seconds\":{elapsed:.4},\
         \"records_per_second\":{rate:.1},\"bytes_per_second\":{:.1},\"peak_rss_bytes\":{},\
         \"notes\":{{\"follower\":{follower_id},\"reads\":{reads},{}}}}}",
        args.payload_bytes,
        records * (RECORD_HEADER_LEN + args.payload_bytes as u64),
        rate * (RECORD_HEADER_LEN + args.payload_bytes as u64) as f64,
        nodes_peak_rss(cluster)?,
        timings_note(cluster.timings),
    ))
}

/// The node leading `name`, by index in the cluster (bounded wait).
pub(super) async fn leader(client: &Client, cluster: &Cluster, name: &ShardName) -> Result<usize> {
    let started = Instant::now();
    loop {
        for (i, node) in cluster.nodes.iter().enumerate() {
            if node.child.is_none() {
                continue;
            }
            if let Ok(status) = client.status(&node.addr).await
                && status
                    .groups
                    .iter()
                    .any(|g| &g.shard == name && g.role == "leader")
            {
                return Ok(i);
            }
        }
        if started.elapsed() > SETTLE_BOUND {
            return Err(format!("no leader of {name:?} within {SETTLE_BOUND:?}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Acknowledged appends of the failover's producers: when each started
/// and when it was acknowledged.
pub(super) type Acks = Arc<Mutex<Vec<(Instant, Instant)>>>;

/// The first acknowledgement of an append started at or after `since`
/// (bounded wait).
pub(super) async fn next_ack(acks: &Acks, since: Instant, bound: Duration) -> Result<Instant> {
    loop {
        let first = acks
            .lock()
            .map_err(|_| "acks poisoned")?
            .iter()
            .rev()
            .take_while(|(_, acked)| *acked >= since)
            .filter(|(start, _)| *start >= since)
            .map(|(_, acked)| *acked)
            .min();
        if let Some(acked) = first {
            return Ok(acked);
        }
        if since.elapsed() > bound {
            return Err(format!("no acknowledgement within {bound:?}"));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

pub(super) async fn run_failover(args: &Args, cluster: &mut Cluster) -> Result<String> {
    let client = Arc::new(client(cluster));
    wait_started(&client, cluster).await?;
    let shard = key("failover", 0);
    create(&client, std::slice::from_ref(&shard)).await?;
    settle(&client, cluster, 1).await?;
    let name = ShardName::from(&shard);
    let acks: Acks = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let unknown = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut producers = Vec::new();
    for p in 0..4u64 {
        let (client, acks, stop, unknown, shard) = (
            Arc::clone(&client),
            Arc::clone(&acks),
            Arc::clone(&stop),
            Arc::clone(&unknown),
            shard.clone(),
        );
        let payload_bytes = args.payload_bytes;
        producers.push(tokio::spawn(async move {
            use std::sync::atomic::Ordering::Relaxed;
            let mut n = p;
            while !stop.load(Relaxed) {
                let payload = vec![(n % 251) as u8; payload_bytes];
                n += 4;
                let t = Instant::now();
                match client.append(&shard, vec![payload]).await {
                    Ok(_) => {
                        if let Ok(mut acks) = acks.lock() {
                            acks.push((t, Instant::now()));
                        }
                    }
                    // A kill makes the appends in flight unknown, and
                    // calls to the dead node fail until the next leader.
                    Err(_) => {
                        unknown.fetch_add(1, Relaxed);
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            }
        }));
    }
    let bound = Duration::from_secs(60);
    let mut failovers = Vec::new();
    let mut killed_nodes = Vec::new();
    for _ in 0..args.kills {
        // The producers are acknowledged before each kill.
        next_ack(&acks, Instant::now(), bound).await?;
        let i = leader(&client, cluster, &name).await?;
        let node = &mut cluster.nodes[i];
        killed_nodes.push(node.id);
        let killed_at = Instant::now();
        let wall = std::time::SystemTime::now();
        node.kill();
        let acked = next_ack(&acks, killed_at, bound).await?;
        failovers.push(micros(acked - killed_at));
        // For reading beside the nodes' logs (their times are UTC).
        eprintln!(
            "killed node {} at {:?} after the epoch; next acknowledgement {:?} later",
            killed_nodes.last().copied().unwrap_or(0),
            wall.duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default(),
            acked - killed_at
        );
        cluster.restart(i)?;
        // Back: the restarted node answers and follows a leader.
        let addr = cluster.nodes[i].addr.clone();
        let back = Instant::now();
        loop {
            if let Ok(status) = client.status(&addr).await
                && status
                    .groups
                    .iter()
                    .any(|g| g.shard == name && g.leader.is_some())
            {
                break;
            }
            cluster.nodes[i].check_running()?;
            if back.elapsed() > bound {
                return Err(format!("node {} not back within {bound:?}", i + 1));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for producer in producers {
        producer.await.map_err(|e| format!("a producer: {e}"))?;
    }
    cluster.check_running()?;
    let acked = acks.lock().map_err(|_| "acks poisoned")?.len();
    let mut sorted = failovers.clone();
    sorted.sort_unstable();
    let p50 = quantile(&sorted, 0.5);
    let t = cluster.timings;
    let ms: Vec<f64> = failovers.iter().map(|us| *us as f64 / 1e3).collect();
    let killed: Vec<String> = killed_nodes.iter().map(u64::to_string).collect();
    Ok(format!(
        "{{\"scenario\":\"failover\",\"impl\":\"felix-cluster\",\
         \"params\":{{\"nodes\":{NODES},\"kills\":{},\"producers\":4,\"payload_bytes\":{}}},\
         \"latency_us\":{{\"p50\":{p50},\"p99\":{},\"max\":{}}},\"peak_rss_bytes\":{},\
         \"notes\":{{\"failover_ms\":{},\"failover_p50_ms\":{:.1},\"failover_max_ms\":{:.1},\
         \"failover_p50_over_election_timeout\":{:.3},\"killed\":[{}],\
         \"acknowledged\":{acked},\"failed_appends\":{},{}}}}}",
        args.kills,
        args.payload_bytes,
        quantile(&sorted, 0.99),
        sorted.last().copied().unwrap_or(0),
        nodes_peak_rss(cluster)?,
        list(&ms),
        p50 as f64 / 1e3,
        sorted.last().copied().unwrap_or(0) as f64 / 1e3,
        p50 as f64 / 1e3 / t.election_max_ms as f64,
        killed.join(","),
        unknown.load(std::sync::atomic::Ordering::Relaxed),
        timings_note(t),
    ))
}

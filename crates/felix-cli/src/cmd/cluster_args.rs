//! What `produce`, `consume` and `cluster` share: the nodes to ask, the
//! deadline, the shard's key, and the runtime their client runs on.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use felix_cluster::{Client, ClientOptions, ClientTls, TlsFiles};
use felix_format::ShardKey;

use crate::error::CliError;

/// The cluster to talk to.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ClusterArgs {
    /// The nodes to ask, HOST:PORT[,HOST:PORT…]: any of the cluster's (a
    /// request is sent on to the shard's leader from there).
    #[arg(
        long,
        value_delimiter = ',',
        required = true,
        value_name = "ADDR[,ADDR…]"
    )]
    pub(crate) cluster: Vec<String>,
    /// How long one request may go on, retries and leader changes
    /// included, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) timeout_ms: u64,
    /// This client's certificate (PEM), for nodes that require TLS.
    #[arg(long, requires_all = ["tls_key", "tls_ca"], value_name = "PEM")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM).
    #[arg(long, requires = "tls_cert", value_name = "PEM")]
    pub(crate) tls_key: Option<PathBuf>,
    /// The CA certificate(s) the nodes' certificates chain to (PEM).
    #[arg(long, requires = "tls_cert", value_name = "PEM")]
    pub(crate) tls_ca: Option<PathBuf>,
}

/// The shard a command works on.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct KeyArg {
    /// The shard's key.
    #[arg(
        long,
        num_args = 4,
        required = true,
        value_names = ["TENANT", "NAMESPACE", "STREAM", "SHARD"]
    )]
    key: Vec<String>,
}

impl KeyArg {
    pub(crate) fn key(&self) -> Result<ShardKey, CliError> {
        crate::cmd::manifest::key_from_parts(&self.key)
    }
}

impl ClusterArgs {
    /// Runs `work` with a client of the cluster, on a current-thread
    /// runtime.
    pub(crate) fn run<T, F>(&self, work: impl FnOnce(Client) -> F) -> Result<T, CliError>
    where
        F: Future<Output = Result<T, CliError>>,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CliError::io("start the async runtime", "-", e))?;
        let timeout = Duration::from_millis(self.timeout_ms.max(1));
        let tls = match (&self.tls_cert, &self.tls_key, &self.tls_ca) {
            (Some(cert), Some(key), Some(ca)) => {
                let files = TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                    ca: ca.clone(),
                };
                Some(ClientTls::from_files(&files).map_err(|e| CliError::Usage(e.to_string()))?)
            }
            _ => None,
        };
        let options = ClientOptions {
            deadline: timeout,
            call_timeout: timeout.min(ClientOptions::default().call_timeout),
            tls,
        };
        runtime.block_on(async {
            let client = Client::with_options(self.cluster.iter().cloned(), options);
            work(client).await
        })
    }
}

//! TLS between nodes and from clients, with certificates on both sides.
//!
//! With TLS on, a node accepts only connections whose client presents a
//! certificate chaining to the configured CA, and presents its own to
//! every peer it connects to; a client does the same. Certificates and
//! keys are PEM files. The crypto provider is rustls's `ring`, chosen
//! here rather than taken from whatever the process installed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// Where a node's or a client's TLS material is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain this side presents (PEM), leaf first. A
    /// node's must name the addresses peers and clients reach it by (an IP
    /// address SAN for `127.0.0.1:PORT`) and the node itself
    /// ([`node_certificate_name`], a DNS SAN): a node greeting with another
    /// id than its certificate names is refused.
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA certificate(s) (PEM) whose certificates this side trusts:
    /// a peer, a client or a node presenting anything else is refused.
    pub ca: PathBuf,
}

/// Why TLS material could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    #[error("TLS {what} {}: {source}", path.display())]
    Read {
        /// Which file: `certificate`, `key` or `CA`.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The read error.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no usable PEM item of the kind needed.
    #[error("TLS {what} {}: {reason}", path.display())]
    Pem {
        /// Which file.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// rustls refused the material (e.g. a key that does not match the
    /// certificate).
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    /// The CA file's certificates cannot verify clients.
    #[error("TLS client verifier: {0}")]
    Verifier(String),
    /// A node's certificate does not carry its name
    /// ([`node_certificate_name`]): its peers would refuse it.
    #[error("TLS certificate {} does not name node {node} (a DNS subject alternative name {name} is needed)", path.display())]
    NotNamed {
        /// The certificate file.
        path: PathBuf,
        /// The node.
        node: u64,
        /// The name it should carry.
        name: String,
    },
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

fn pem_error(what: &'static str, path: &Path, reason: impl ToString) -> TlsError {
    TlsError::Pem {
        what,
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(what, path, e))?;
    if certs.is_empty() {
        return Err(pem_error(what, path, "no CERTIFICATE in the file"));
    }
    Ok(certs)
}

fn roots(files: &TlsFiles) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates("CA", &files.ca)? {
        roots.add(cert).map_err(|e| pem_error("CA", &files.ca, e))?;
    }
    Ok(roots)
}

fn identity(
    files: &TlsFiles,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let chain = certificates("certificate", &files.cert)?;
    let key_bytes = read("key", &files.key)?;
    let key =
        PrivateKeyDer::from_pem_slice(&key_bytes).map_err(|e| pem_error("key", &files.key, e))?;
    Ok((chain, key))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The connecting side's TLS: its certificate and the CA it trusts.
#[derive(Clone)]
pub struct ClientTls {
    connector: TlsConnector,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientTls")
    }
}

impl ClientTls {
    /// Loads the files.
    pub fn from_files(files: &TlsFiles) -> Result<Self, TlsError> {
        let (chain, key) = identity(files)?;
        let config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots(files)?)
            .with_client_auth_cert(chain, key)?;
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    /// `tcp`, connected to `addr`, wrapped in TLS (the server's
    /// certificate checked for the host part of `addr`).
    pub(crate) async fn connect(&self, addr: &str, tcp: TcpStream) -> std::io::Result<BoxedIo> {
        let host = addr
            .rsplit_once(':')
            .map_or(addr, |(host, _)| host)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        Ok(Box::new(self.connector.connect(name, tcp).await?))
    }
}

/// A node's TLS: what it accepts with and what it connects with.
#[derive(Clone)]
pub(crate) struct NodeTls {
    pub(crate) acceptor: TlsAcceptor,
    pub(crate) client: ClientTls,
}

impl NodeTls {
    /// Node `node`'s TLS: its certificate must name it.
    pub(crate) fn from_files(files: &TlsFiles, node: u64) -> Result<Self, TlsError> {
        let (chain, key) = identity(files)?;
        if !chain.first().is_some_and(|leaf| names_node(leaf, node)) {
            return Err(TlsError::NotNamed {
                path: files.cert.clone(),
                node,
                name: node_certificate_name(node),
            });
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots(files)?), provider())
                .build()
                .map_err(|e| TlsError::Verifier(e.to_string()))?;
        let config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)?;
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            client: ClientTls::from_files(files)?,
        })
    }
}

/// The DNS name a node's certificate carries, as a subject alternative
/// name, so that the node may greet as node `node` over TLS:
/// `node-{node}.felix-cluster`. A certificate of the cluster's CA without
/// it is a client's: it may append, read and ask, but not send Raft
/// messages or say it is a node.
///
/// ```
/// assert_eq!(felix_cluster::node_certificate_name(3), "node-3.felix-cluster");
/// ```
pub fn node_certificate_name(node: u64) -> String {
    format!("node-{node}.felix-cluster")
}

/// Whether `cert` carries [`node_certificate_name`]`(node)`.
pub(crate) fn names_node(cert: &CertificateDer<'_>, node: u64) -> bool {
    let Ok(end) = webpki::EndEntityCert::try_from(cert) else {
        return false;
    };
    let Ok(name) = ServerName::try_from(node_certificate_name(node)) else {
        return false;
    };
    end.verify_is_valid_for_subject_name(&name).is_ok()
}

/// A connection, plain or TLS.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}
/// A boxed connection.
pub(crate) type BoxedIo = Box<dyn Io>;

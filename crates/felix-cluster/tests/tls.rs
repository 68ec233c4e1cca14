//! TLS with certificates on both sides: nodes and clients holding a
//! certificate of the cluster's CA talk; a client without one, or with one
//! of another CA, is refused.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{key, timings};
use felix_cluster::peer::{CallError, Peer};
use felix_cluster::wire::{Request, Response};
use felix_cluster::{
    Client, ClientError, ClientOptions, ClientTls, Node, NodeConfig, NodeError, TlsError, TlsFiles,
    node_certificate_name,
};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

/// A CA, and certificates it signs for 127.0.0.1, written as PEM files.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// Files for a holder named `name`: its certificate (for 127.0.0.1,
    /// and naming `node` when it is a node's), key, and this CA.
    fn files(&self, dir: &Path, name: &str, node: Option<u64>) -> TlsFiles {
        let mut names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        names.extend(node.map(node_certificate_name));
        let params = CertificateParams::new(names).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let files = TlsFiles {
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
            ca: dir.join(format!("{name}-ca.crt")),
        };
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        std::fs::write(&files.ca, &self.pem).unwrap();
        files
    }
}

fn client(addrs: &[String], tls: Option<ClientTls>, deadline: Duration) -> Client {
    Client::with_options(
        addrs.iter().cloned(),
        ClientOptions {
            deadline,
            call_timeout: deadline,
            tls,
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_holders_of_the_cluster_s_certificates_are_served() {
    let root = tempfile::tempdir().unwrap();
    let ca = Ca::new("felix test CA");
    let mut nodes = Vec::new();
    for id in 1..=3u64 {
        let mut config = NodeConfig::new(id, root.path().join(format!("n{id}")), "127.0.0.1:0");
        config.timings = timings();
        config.tls = Some(ca.files(root.path(), &format!("node{id}"), Some(id)));
        nodes.push(Node::start(config).await.unwrap());
    }
    common::introduce(&nodes);
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr().to_string()).collect();

    // Replication runs over TLS between the nodes, and a client with a
    // certificate of the CA appends and reads.
    let client_files = ca.files(root.path(), "client", None);
    let trusted = ClientTls::from_files(&client_files).unwrap();
    let good = client(&addrs, Some(trusted), Duration::from_secs(20));
    let shard = key(0);
    good.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let offsets = good.append(&shard, vec![b"secret".to_vec()]).await.unwrap();
    for addr in &addrs {
        let read = common::all_records(&good, addr, &shard, 1).await;
        assert_eq!(read, [(offsets[0], b"secret".to_vec())]);
    }

    // A client in the clear gets no answer.
    let plain = client(&addrs, None, Duration::from_millis(500));
    let refused = plain.status(&addrs[0]).await.unwrap_err();
    assert!(matches!(refused, ClientError::Call(_)), "{refused}");

    // Nor does one whose certificate another CA signed.
    let other = Ca::new("another CA");
    let stranger_files = other.files(root.path(), "stranger", None);
    // It trusts the cluster's CA (so it would accept the node), but the
    // node does not trust it.
    std::fs::write(&stranger_files.ca, &ca.pem).unwrap();
    let stranger = client(
        &addrs,
        Some(ClientTls::from_files(&stranger_files).unwrap()),
        Duration::from_millis(500),
    );
    let refused = stranger.status(&addrs[0]).await.unwrap_err();
    assert!(matches!(refused, ClientError::Call(_)), "{refused}");

    // A certificate of the CA that does not name node 2 cannot greet as
    // node 2 (and so send Raft messages): a client's, or node 1's.
    let as_node_2 = |files: &TlsFiles| {
        Peer::new(
            addrs[2].clone(),
            Some(2),
            Some(ClientTls::from_files(files).unwrap()),
        )
    };
    for (whose, files) in [
        ("a client's", client_files.clone()),
        ("node 1's", ca.files(root.path(), "node1-again", Some(1))),
    ] {
        let refused = as_node_2(&files)
            .call(Request::Status, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(
            matches!(refused, CallError::Unreachable { ref reason, .. }
                if reason.contains("greeting as node 2 must present a certificate naming node-2.felix-cluster")),
            "{whose}: {refused}"
        );
    }
    // Node 2's own certificate may.
    let node_2 = as_node_2(&ca.files(root.path(), "node2-again", Some(2)));
    assert!(matches!(
        node_2.call(Request::Status, Duration::from_secs(5)).await,
        Ok(Response::Status(ref s)) if s.node == 3
    ));

    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_certificate_names_another_node_does_not_start() {
    let root = tempfile::tempdir().unwrap();
    let ca = Ca::new("felix test CA");
    let mut config = NodeConfig::new(4, root.path().join("n4"), "127.0.0.1:0");
    config.tls = Some(ca.files(root.path(), "node4", Some(5)));
    let cert = config.tls.as_ref().unwrap().cert.clone();
    let err = Node::start(config).await.err().unwrap();
    assert!(
        matches!(err, NodeError::Tls { node: 4, source: TlsError::NotNamed { node: 4, ref path, ref name } }
            if *path == cert && name == "node-4.felix-cluster"),
        "{err}"
    );
}

#[test]
fn a_missing_certificate_file_is_named_with_its_path() {
    let root = tempfile::tempdir().unwrap();
    let files = TlsFiles {
        cert: root.path().join("absent.crt"),
        key: root.path().join("absent.key"),
        ca: root.path().join("ca.crt"),
    };
    let err = ClientTls::from_files(&files).unwrap_err();
    assert!(
        matches!(err, felix_cluster::TlsError::Read { what: "certificate", ref path, .. } if *path == files.cert),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("TLS certificate {}: ", files.cert.display()))
    );
}

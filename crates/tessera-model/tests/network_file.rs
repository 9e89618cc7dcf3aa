//! Across nodes only a topology file's `[network]` is read (docs/MPI.md): a file may hold the
//! network alone, or devices that are not the nodes' devices.

use tessera_model::{Network, TopologyError};

fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn the_network_is_read_without_the_devices() {
    let dir = tempfile::tempdir().unwrap();
    let alone = file(
        &dir,
        "alone.toml",
        "[network]\nname = \"lab\"\nbandwidth_gb_per_s = 12.5\nlatency_us = 2\n",
    );
    let n = Network::from_topology_file(&alone).unwrap().unwrap();
    assert_eq!(n.name, "lab");
    assert_eq!((n.bandwidth, n.latency), (12.5e9, 2e-6));
    // One device described, where the nodes together have many: not this read's concern.
    let one = file(
        &dir,
        "one.toml",
        "[[device]]\nid = 0\n[[link]]\nfrom = \"host\"\nto = \"device0\"\nbandwidth_gb_per_s = 16\n\
         [network]\nbandwidth_gb_per_s = 25\n",
    );
    let n = Network::from_topology_file(&one).unwrap().unwrap();
    assert_eq!(
        (n.name.as_str(), n.bandwidth, n.latency),
        ("network", 25e9, 0.0)
    );
    // No table, or a preset: no network here, the caller's default applies.
    let none = file(&dir, "none.toml", "name = \"x\"\n");
    assert_eq!(Network::from_topology_file(&none).unwrap(), None);
    assert_eq!(Network::from_topology_file("nvlink").unwrap(), None);
}

#[test]
fn a_bad_network_names_the_file_and_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let bad = file(&dir, "bad.toml", "[network]\nbandwidth_gb_per_s = 0\n");
    let e = Network::from_topology_file(&bad).unwrap_err();
    assert!(matches!(e, TopologyError::BadBandwidth { .. }), "{e:?}");
    let said = e.to_string();
    assert!(said.contains(&format!("{bad}:2:")), "{said}");
    let typo = file(&dir, "typo.toml", "[network]\nbandwidth = 1\n");
    let e = Network::from_topology_file(&typo).unwrap_err();
    assert!(matches!(e, TopologyError::Parse { .. }), "{e:?}");
    let missing = dir.path().join("missing.toml");
    assert!(Network::from_topology_file(missing.to_str().unwrap()).is_err());
}
